"""`python -m bench harness`: time MPI_Alltoall from the C reference and from the Python driver, side by side."""
from __future__ import annotations

from pathlib import Path

import click

from a2a.sweep.parsing import parse_list
from a2a.workflows.harness import harness_report

from .group import echo, main


@main.command("harness")
@click.option("--nprocs", "-n", default=2, show_default=True, type=click.IntRange(2),
              help="Ranks for both programs (keep within the cores to measure the harness, not the scheduler).")
@click.option("--sizes", default="8,1K,64K,1M", show_default=True, help="Bytes per peer (8, 1K, 64KiB, 1M).")
@click.option("--iterations", default=1000, show_default=True, type=click.IntRange(1),
              help="Timed calls per size and protocol, the same in C and Python.")
@click.option("--warmup", default=50, show_default=True, type=click.IntRange(0), help="Untimed calls first.")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1),
              help="Alternate C and Python runs this many times; report the medians.")
@click.option("--reference", default="build/alltoall_ref", show_default=True, type=click.Path(dir_okay=False),
              help="The C reference binary; built with mpicc from a2a/workflows/c/alltoall_ref.c when missing or "
                   "stale.")
@click.option("--imb", type=click.Path(exists=True, dir_okay=False),
              help="An IMB-MPI1 binary: also run its Alltoall on the same sizes and iterations, beside --timing imb.")
def harness(nprocs: int, sizes: str, iterations: int, warmup: int, repeats: int, reference: str,
            imb: str | None) -> None:
    """Compare MPI_Alltoall timed by the C reference and by `bench run` (native), in each protocol, and by
    IMB-MPI1 when given."""
    echo(harness_report(nprocs, parse_list(sizes, "size"), iterations, warmup, repeats, Path(reference),
                        Path(imb) if imb else None))
