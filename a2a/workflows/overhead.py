"""Our Python algorithms against the MPI library's C twins, forced to the same schedule (`bench overhead`).

The twin of each of our variants is the one its file names and the exporters write, so what is
measured here is what an exported table would run. MPICH is forced through its CVARs, Open
MPI through coll_tuned's MCA variables. Each launch runs native (forced) beside ours; the
ratio of their medians is this launch's figure.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from tabulate import tabulate

from a2a.algos.facts import twin
from a2a.algos.registry import candidates
from a2a.analysis.export import mpich, ompi
from a2a.errors import HarnessError
from a2a.mpi import launcher_flags, launcher_library, mpi_tool, run_job
from a2a.record.results import NATIVE, read_meta, read_rows
from a2a.sweep.variants import parse_variant
from a2a.units import human_bytes

POINT_SECONDS = 20  # --max-time-per-point of each launch
FORCING = {"MPICH": mpich.forcing, "Open MPI": ompi.forcing}

HEADERS = ["nprocs", "bytes/peer", "ours", "native forced to", "median ratio", "per launch"]


def forced_twin(library: str, ours: str, nprocs: int) -> tuple[str, dict[str, str]] | None:
    """The library's algorithm for our variant (the twin its file names) and the variables that force it;
    None when the variant has no twin there at this process count."""
    name, given = parse_variant(ours)
    found = twin(name, "alltoall", library, given, nprocs)
    if found is None or name == NATIVE:
        return None
    assert isinstance(found, tuple)  # MPICH's and Open MPI's twins are (algorithm, its parameters...)
    return FORCING[library](found)


def with_twins(library: str, nprocs: int) -> list[str]:
    """Every algorithm that may be chosen and has a twin in `library` at its defaults: what is raced by default."""
    return [name for name in candidates("alltoall") if forced_twin(library, name, nprocs)]


def library_of(launcher: str) -> str:
    """MPICH or Open MPI, from the tools installed beside the launcher."""
    library = launcher_library(launcher)
    if not library:
        raise HarnessError(f"bench overhead forces MPICH's or Open MPI's own algorithms; found neither "
                           f"mpichversion nor ompi_info beside {launcher}")
    return library


def overhead_rows(launcher: str, counts: list[int], sizes: list[int], iterations: int, repeats: int,
                  variants: list[str] | None = None) -> list[list[str]]:
    """Per process count, variant and size: ours, its forced twin, the median ratio and each launch's.

    `variants` (NAME or NAME:KEY=VALUE) default to every algorithm with a twin in the library;
    one without a twin at a process count gets a row that says so.
    """
    library, table = library_of(launcher), []
    with tempfile.TemporaryDirectory(prefix="a2a-overhead-") as scratch:
        for n in counts:
            for ours in variants or with_twins(library, n):
                forced = forced_twin(library, ours, n)
                if forced is None:
                    table.append([str(n), "-", ours, f"no {library} twin at {n} ranks", "-", "-"])
                    continue
                theirs, variables = forced
                ratios: dict[int, list[float]] = {}
                for repeat in range(repeats):
                    out = Path(scratch) / f"{n}-{ours}-{repeat}".replace(":", "-")
                    _launch(launcher, library, n, ours, variables, sizes, iterations, out)
                    for size, ratio in _ratios(out).items():
                        ratios.setdefault(size, []).append(ratio)
                for size, values in sorted(ratios.items()):
                    table.append([str(n), human_bytes(size), ours, theirs, f"{statistics.median(values):.4g}",
                                  " ".join(f"{v:.3g}" for v in values)])
    return table


def _launch(launcher: str, library: str, n: int, ours: str, variables: dict[str, str], sizes: list[int],
            iterations: int, out: Path) -> None:
    command = [launcher, *launcher_flags(launcher), "-n", str(n), sys.executable, "-m", "bench", "run",
               "--algorithms", f"{NATIVE},{ours}", "--sizes", ",".join(map(str, sizes)), "--nprocs", str(n),
               "--iterations", str(iterations), "--warmup", "10", "--max-time-per-point", str(POINT_SECONDS),
               "--output", str(out), "--quiet"]
    timeout = 120 + 2 * POINT_SECONDS * len(sizes)  # two algorithms per size, and start-up
    run_job(command, f"{ours} against {library}'s twin on {n} ranks", timeout, variables)
    if library not in (read_meta(out).get("mpi_library") or ""):
        raise HarnessError(f"bench overhead forced {library}'s algorithms, but the run reports "
                           f"{read_meta(out).get('mpi_library')!r}")


def _ratios(out: Path) -> dict[int, float]:
    rows = read_rows(out)
    native = {r.bytes_per_peer: r.t_p50_us for r in rows if r.algorithm == NATIVE}
    return {r.bytes_per_peer: r.t_p50_us / native[r.bytes_per_peer] for r in rows if r.algorithm != NATIVE}


def overhead_report(launcher: str | None, counts: list[int], sizes: list[int], iterations: int, repeats: int,
                    algorithms: str | None) -> str:
    """`bench overhead` as one call: our variants and their forced twins launched side by side, the table."""
    chosen = [spec.strip() for spec in algorithms.split(",") if spec.strip()] if algorithms else None
    table = overhead_rows(launcher or mpi_tool("mpiexec"), counts, sizes, iterations, repeats, chosen)
    return (tabulate(table, headers=HEADERS, disable_numparse=True)
            + "\nratio = our p50 / native p50 in the same launch (< 1: ours is faster)")
