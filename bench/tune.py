"""`bench tune`: sweep, decide, export for the library in use, verify on it, and say how to keep it."""
from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import click

import a2a
from a2a.analysis.decide import METRICS
from a2a.errors import BadConfig, HarnessError
from a2a.measure.grid import variants
from a2a.measure.tune import Tune, TuneConfig, launcher_words
from a2a.mpi import launcher_size

from .group import echo, main
from .options import parse_assignments, parse_count, parse_list

DEFAULT_SIZES = "8,1K,16K,128K,1M"


@main.command("tune")
@click.option("--nprocs", help="Process counts to tune (one job of the largest runs them all). [default: 2,4]")
@click.option("--sizes", help=f"Bytes per peer. [default: {DEFAULT_SIZES}]")
@click.option("--algorithms", help="The candidates: names, NAME:KEY=VALUE variants, or all. [default: all]")
@click.option("--option", multiple=True, help="ALG.KEY=VALUE for the sweeps (repeatable).")
@click.option("--plugin", multiple=True, help="A .py file or module that registers algorithms (repeatable).")
@click.option("--iterations", type=click.IntRange(min=1), default=25, show_default=True, help="Timed calls per point "
              "of a sweep.")
@click.option("--verify-iterations", type=click.IntRange(min=1), default=50, show_default=True,
              help="Timed calls per point of a verification launch.")
@click.option("--launches", type=click.IntRange(min=1), default=3, show_default=True,
              help="Sweeps to decide from; a cell whose winner changes between them is unstable.")
@click.option("--rounds", type=click.IntRange(min=2), default=5, show_default=True,
              help="Verification launches without and with the file, alternating (5 a side reach p < 0.05).")
@click.option("--metric", type=click.Choice(METRICS), default="mean", show_default=True, help="What 'best' means.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Mann-Whitney significance level.")
@click.option("--revert-slower", is_flag=True, help="Give the cells the library ran slower back to it; verify again.")
@click.option("--keep-unstable", is_flag=True, help="Keep the winner of an unstable cell (by default: the library's).")
@click.option("--launcher", help="Command prefix of each MPI job, e.g. srun or 'srun --mpi=pmix'; the tune adds "
              "-n N. [default: the mpiexec beside this Python]")
@click.option("--job-timeout", type=click.FloatRange(min=1), default=3600, show_default=True,
              help="Seconds one launch may take.")
@click.option("--output", help="The tune's directory. [default: results/tune-<UTC time>]")
@click.option("--resume", type=click.Path(file_okay=False), help="Go on with the tune in DIR.")
def tune(nprocs: str | None, sizes: str | None, algorithms: str | None, option: tuple[str, ...],
         plugin: tuple[str, ...], iterations: int, verify_iterations: int, launches: int, rounds: int, metric: str,
         alpha: float, revert_slower: bool, keep_unstable: bool, launcher: str | None, job_timeout: float,
         output: str | None, resume: str | None) -> None:
    """Make the MPI library's MPI_Alltoall faster: sweep, decide, export, verify on the library, apply.

    Run it without mpirun: it launches its own jobs (inside a Slurm allocation: --launcher srun).
    """
    if launcher_size() > 1:
        raise HarnessError("run `python -m bench tune` without mpirun: it launches its own MPI jobs "
                           "(inside an allocation, give --launcher srun)")
    if resume:
        sys.exit(Tune.resumed(Path(resume), echo).run())
    if not 0 < alpha < 1:
        raise BadConfig(f"--alpha {alpha}; accepted: a level strictly between 0 and 1")
    counts = parse_list(nprocs or "2,4", "process count", parse_count)
    parse_list(sizes or DEFAULT_SIZES, "size")  # refused now, not in the first job
    for source in plugin:
        a2a.load_plugin(source)
    variants(algorithms or "all", parse_assignments(option, "--option"), 0)  # unknown names and options, now
    directory = Path(output or f"results/tune-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}")
    if (directory / "meta.json").exists():
        raise BadConfig(f"{directory} already holds a tune; go on with --resume {directory}, "
                        "or choose another --output")
    extra = [*(f"--option={o}" for o in option), *(f"--plugin={p}" for p in plugin)]
    config = TuneConfig(launcher_words(launcher), counts, sizes or DEFAULT_SIZES, algorithms or "all", extra,
                        iterations, verify_iterations, launches, rounds, metric, alpha, revert_slower, keep_unstable,
                        job_timeout)
    sys.exit(Tune(directory, config, echo).run())
