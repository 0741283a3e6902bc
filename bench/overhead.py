"""`bench overhead`: our Python algorithms against the MPI library's C twins, forced to the same schedule."""
from __future__ import annotations

import click

from a2a.sweep.parsing import parse_counts, parse_list
from a2a.workflows.overhead import overhead_report

from .group import main


@main.command("overhead")
@click.option("--nprocs", default="2,4", show_default=True, help="Process counts, one launch each per twin.")
@click.option("--sizes", default="8,1K,64K,1M", show_default=True, help="Bytes per peer.")
@click.option("--iterations", default=200, show_default=True, help="Timed calls per point.")
@click.option("--repeats", default=3, show_default=True, help="Launches per twin and count; ratios are medians.")
@click.option("--algorithms", help="Our variants, NAME or NAME:KEY=VALUE, comma-separated (bruck_zero_copy:radix=3). "
                                   "[default: every algorithm with a twin in the library, at its defaults]")
@click.option("--mpiexec", "launcher", default=None, help="mpiexec to use [default: the one beside this Python].")
def overhead(nprocs: str, sizes: str, iterations: int, repeats: int, algorithms: str | None,
             launcher: str | None) -> None:
    """Print ours/native median ratios with the library forced to the same algorithm (MPICH, Open MPI)."""
    click.echo(overhead_report(launcher, parse_counts(nprocs, "--nprocs"), parse_list(sizes, "size"), iterations,
                               repeats, algorithms))
