"""`bench overhead`: our Python algorithms against the MPI library's C twins, forced to the same schedule.

The twin of each of our variants is the one its file names and the exporters write, so what is
measured here is what an exported table would run. MPICH is forced through its
CVARs, Open MPI through coll_tuned's MCA variables.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

import click
from tabulate import tabulate

from a2a.algos.registry import NATIVE
from a2a.algos.registry import twin as registry_twin
from a2a.analysis.export import ompi
from a2a.errors import HarnessError
from a2a.measure.grid import parse_variant
from a2a.mpi import launcher_flags, launcher_library, mpi_tool, run_job
from a2a.record.results import read_meta, read_rows
from a2a.units import human_bytes

from .group import main
from .options import parse_count, parse_list

POINT_SECONDS = 20  # --max-time-per-point of each launch

# per library, our variants whose C twin it can be forced to run
OURS = {
    "MPICH": ["pairwise", "bruck:radix=2", "throttled:window=8", "bruck_zero_copy:radix=2",
              "bruck_zero_copy:radix=3", "bruck_zero_copy:radix=4"],
    "Open MPI": ["linear_sync:window=2"],
}


def twin(library: str, ours: str, nprocs: int) -> tuple[str, dict[str, str]]:
    """The library's algorithm for our variant (the twin its file names) and the variables that force it."""
    name, given = parse_variant(ours)
    target = registry_twin(name, "alltoall", library, given, nprocs)
    if library == "MPICH":
        variables = {"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": target[0]}
        if target[0] == "k_brucks":
            variables["MPIR_CVAR_ALLTOALL_BRUCKS_KVAL"] = str(target[1])
        if target[0] == "scattered":
            variables["MPIR_CVAR_ALLTOALL_THROTTLE"] = str(target[1])
        return f"MPICH {target[0]}" + (f":k={target[1]}" if target[0] == "k_brucks" else ""), variables
    algorithm, requests = target
    return (f"Open MPI {algorithm}" + (f":reqs={requests}" if requests else ""),
            {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
             "OMPI_MCA_coll_tuned_alltoall_algorithm": str(ompi.ALGORITHM_IDS[algorithm]),
             "OMPI_MCA_coll_tuned_alltoall_algorithm_max_requests": str(requests)})


def library_of(launcher: str) -> str:
    """MPICH or Open MPI, from the tools installed beside the launcher."""
    library = launcher_library(launcher)
    if not library:
        raise HarnessError(f"bench overhead forces MPICH's or Open MPI's own algorithms; found neither "
                           f"mpichversion nor ompi_info beside {launcher}")
    return library


@main.command("overhead")
@click.option("--nprocs", default="2,4", show_default=True, help="Process counts, one launch each per twin.")
@click.option("--sizes", default="8,1K,64K,1M", show_default=True, help="Bytes per peer.")
@click.option("--iterations", default=200, show_default=True, help="Timed calls per point.")
@click.option("--repeats", default=3, show_default=True, help="Launches per twin and count; ratios are medians.")
@click.option("--mpiexec", "launcher", default=None, help="mpiexec to use [default: the one beside this Python].")
def overhead(nprocs: str, sizes: str, iterations: int, repeats: int, launcher: str | None) -> None:
    """Print ours/native median ratios with the library forced to the same algorithm (MPICH, Open MPI)."""
    launcher = launcher or mpi_tool("mpiexec")
    library = library_of(launcher)
    table = []
    with tempfile.TemporaryDirectory(prefix="a2a-overhead-") as scratch:
        for n in parse_list(nprocs, "process count", parse_count):
            for ours in OURS[library]:
                theirs, variables = twin(library, ours, n)
                ratios: dict[int, list[float]] = {}
                for repeat in range(repeats):
                    out = Path(scratch) / f"{n}-{ours}-{repeat}".replace(":", "-")
                    _launch(launcher, library, n, ours, variables, sizes, iterations, out)
                    for size, ratio in _ratios(out).items():
                        ratios.setdefault(size, []).append(ratio)
                for size, values in sorted(ratios.items()):
                    table.append([n, human_bytes(size), ours, theirs, f"{statistics.median(values):.4g}",
                                  " ".join(f"{v:.3g}" for v in values)])
    click.echo(tabulate(table, headers=["nprocs", "bytes/peer", "ours", "native forced to", "median ratio",
                                        "per launch"], disable_numparse=True))
    click.echo("ratio = our p50 / native p50 in the same launch (< 1: ours is faster)")


def _launch(launcher: str, library: str, n: int, ours: str, variables: dict[str, str], sizes: str,
            iterations: int, out: Path) -> None:
    command = [launcher, *launcher_flags(launcher), "-n", str(n), sys.executable, "-m", "bench", "run", "--algorithms",
               f"native,{ours}", "--sizes", sizes, "--nprocs", str(n), "--iterations", str(iterations),
               "--warmup", "10", "--max-time-per-point", str(POINT_SECONDS), "--output", str(out), "--quiet"]
    timeout = 120 + 2 * POINT_SECONDS * len(parse_list(sizes, "size"))  # two algorithms per size, and start-up
    run_job(command, f"{ours} against {library}'s twin on {n} ranks", timeout, variables)
    if library not in (read_meta(out).get("mpi_library") or ""):
        raise HarnessError(f"bench overhead forced {library}'s algorithms, but the run reports "
                           f"{read_meta(out).get('mpi_library')!r}")


def _ratios(out: Path) -> dict[int, float]:
    rows = read_rows(out)
    native = {r.bytes_per_peer: r.t_p50_us for r in rows if r.algorithm == NATIVE}
    return {r.bytes_per_peer: r.t_p50_us / native[r.bytes_per_peer] for r in rows if r.algorithm != NATIVE}
