"""`bench overhead`: our Python algorithms against MPICH's C twins, forced through its CVARs."""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import click
from tabulate import tabulate

from a2a.mpi import clean_launcher_env, mpi_tool
from a2a.report import human_bytes
from a2a.results import read_meta, read_rows

from .cli import main
from .options import parse_count, parse_list

# our algorithm (with options) -> MPICH's algorithm of the same schedule, and its CVARs
TWINS = {
    "pairwise": ("pairwise", {}),
    "bruck:radix=2": ("brucks", {}),
    "throttled:window=8": ("scattered", {"MPIR_CVAR_ALLTOALL_THROTTLE": "8"}),
}


@main.command("overhead")
@click.option("--nprocs", default="2,4", show_default=True, help="Process counts, one launch each per twin.")
@click.option("--sizes", default="8,1K,64K,1M", show_default=True, help="Bytes per peer.")
@click.option("--iterations", default=200, show_default=True, help="Timed calls per point.")
@click.option("--repeats", default=3, show_default=True, help="Launches per twin and count; ratios are medians.")
@click.option("--mpiexec", "launcher", default=None, help="mpiexec to use [default: the one beside this Python].")
def overhead(nprocs: str, sizes: str, iterations: int, repeats: int, launcher: str | None) -> None:
    """Print ours/native median ratios with MPICH forced to the same algorithm (MPICH only)."""
    launcher = launcher or _mpiexec()
    table = []
    with tempfile.TemporaryDirectory(prefix="a2a-overhead-") as scratch:
        for n in parse_list(nprocs, "process count", parse_count):
            for ours, (theirs, extra) in TWINS.items():
                ratios: dict[int, list[float]] = {}
                for repeat in range(repeats):
                    out = Path(scratch) / f"{n}-{theirs}-{repeat}"
                    _launch(launcher, n, ours, theirs, extra, sizes, iterations, out)
                    for size, ratio in _ratios(out).items():
                        ratios.setdefault(size, []).append(ratio)
                for size, values in sorted(ratios.items()):
                    table.append([n, human_bytes(size), ours, f"MPICH {theirs}", f"{statistics.median(values):.3f}",
                                  " ".join(f"{v:.2f}" for v in values)])
    click.echo(tabulate(table, headers=["nprocs", "bytes/peer", "ours", "native forced to", "median ratio",
                                        "per launch"], disable_numparse=True))
    click.echo("ratio = our p50 / native p50 in the same launch (< 1: ours is faster)")


def _mpiexec() -> str:
    return mpi_tool("mpiexec") or "mpiexec"


def _launch(launcher: str, n: int, ours: str, theirs: str, extra: dict[str, str], sizes: str,
            iterations: int, out: Path) -> None:
    env = clean_launcher_env()
    env.update({"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": theirs, **extra})
    command = [launcher, "-n", str(n), sys.executable, "-m", "bench", "run", "--algorithms", f"native,{ours}",
               "--sizes", sizes, "--nprocs", str(n), "--iterations", str(iterations), "--warmup", "10",
               "--max-time-per-point", "20", "--output", str(out), "--quiet"]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise click.ClickException(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    if "MPICH" not in (read_meta(out).get("mpi_library") or ""):
        raise click.ClickException("bench overhead forces algorithms through MPICH's CVARs; "
                                   "this MPI library is not MPICH")


def _ratios(out: Path) -> dict[int, float]:
    rows = read_rows(out)
    native = {r.bytes_per_peer: r.t_p50_us for r in rows if r.algorithm == "native"}
    return {r.bytes_per_peer: r.t_p50_us / native[r.bytes_per_peer] for r in rows if r.algorithm != "native"}
