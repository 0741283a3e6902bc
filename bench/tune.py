"""`bench tune`: sweep, decide, export for the library in use (or deploy for liba2a), verify, say how to keep it."""
from __future__ import annotations

import sys
from typing import Any

import click

from a2a.analysis.decide import METRICS
from a2a.record.outputs import writable_folder
from a2a.sweep.naming import named
from a2a.workflows.tune import tune
from a2a.workflows.tuning import COLLECTIVES, DEPLOY_SIZES, TUNE_DEFAULTS

from .group import echo, main
from .options import defaults


@main.command("tune")
@click.option("--nprocs", help=defaults("Process counts to tune (one job of the largest runs them all).",
                                        TUNE_DEFAULTS["nprocs"]))
@click.option("--sizes", help=defaults("Bytes per peer.", f"{TUNE_DEFAULTS['sizes']}; --deploy: {DEPLOY_SIZES}"))
@click.option("--algorithms", help=defaults("The candidates: names, NAME:KEY=VALUE variants, or all.",
                                            TUNE_DEFAULTS["algorithms"]))
@click.option("--option", multiple=True, help="ALG.KEY=VALUE for the sweeps (repeatable).")
@click.option("--plugin", multiple=True, help="A .py file or module that registers algorithms (repeatable).")
@click.option("--iterations", type=click.IntRange(min=1), default=TUNE_DEFAULTS["iterations"], show_default=True,
              help="Timed calls per point of a sweep.")
@click.option("--verify-iterations", type=click.IntRange(min=1), default=TUNE_DEFAULTS["verify_iterations"],
              show_default=True, help="Timed calls per point of a verification launch.")
@click.option("--launches", type=click.IntRange(min=1), default=TUNE_DEFAULTS["launches"], show_default=True,
              help="Sweeps to decide from: the launches are the top level of the verdicts.")
@click.option("--rounds", type=click.IntRange(min=2), default=TUNE_DEFAULTS["rounds"], show_default=True,
              help="Pairs of verification launches, one without and one with the file; a verdict pairs each "
                   "with-file launch with its neighbour and needs 6 such pairs at --alpha 0.05.")
@click.option("--metric", type=click.Choice(METRICS), default=TUNE_DEFAULTS["metric"], show_default=True,
              help="What 'best' means.")
@click.option("--alpha", type=float, default=TUNE_DEFAULTS["alpha"], show_default=True,
              help="The verdicts' family-wise error rate (Holm over a cell's comparisons).")
@click.option("--collective", type=click.Choice(COLLECTIVES), default=TUNE_DEFAULTS["collective"], show_default=True,
              help="ialltoall: sweep and verify by the overlap protocol, export MPICH's Ialltoall selection.")
@click.option("--tests", type=click.IntRange(min=0), default=TUNE_DEFAULTS["tests"], show_default=True,
              help="--collective ialltoall: progress calls in the compute phase.")
@click.option("--compute-ratio", type=click.FloatRange(min=0), default=TUNE_DEFAULTS["compute_ratio"],
              show_default=True, help="--collective ialltoall: the compute phase over the pure exchange time.")
@click.option("--deploy", is_flag=True, help="Tune the deploy path instead: sweep, find the crossovers, write a deploy "
              "file for liba2a, verify it with and without on an IMB-style loop, give back what it makes slower.")
@click.option("--verify-with", help="--deploy: your program as the verifier too, e.g. './program --n 512'; the file "
              "is kept only if the program is not significantly slower with it.")
@click.option("--verify-pattern", help="--verify-with: a regular expression whose first group is the number to "
              "compare (lower is better) in what the program prints. [default: its wall time]")
@click.option("--mpicc", help="--deploy: the compiler wrapper of the MPI library your program is built with, where it "
              "is not this Python's (e.g. /usr/bin/mpicc.mpich): liba2a and the verification loop are built with it "
              "and launched by the mpiexec beside it (mpiexec.mpich); the sweeps still time this Python's library.")
@click.option("--keep-ties", is_flag=True, help="--deploy: keep the sizes the verification finds not slower but no "
              "faster (by default they go back to the library).")
@click.option("--revert-slower", is_flag=True, help="Give the cells the library ran slower back to it; verify again.")
@click.option("--launcher", help="Command prefix of each MPI job, e.g. srun or 'srun --mpi=pmix'; the tune adds "
              "-n N. [default: the mpiexec beside this Python]")
@click.option("--job-timeout", type=click.FloatRange(min=1), default=TUNE_DEFAULTS["job_timeout"], show_default=True,
              help="Seconds one launch may take.")
@click.option("--output", help="The tune's directory. [default: results/tune-<UTC time>]")
@click.option("--resume", type=click.Path(file_okay=False), help="Go on with the tune in DIR.")
def tune_command(**given: Any) -> None:
    """Make the MPI library's MPI_Alltoall faster: sweep, decide, export, verify on the library, apply.

    With --deploy, make a verified deploy file instead: the winners the library cannot select, run by liba2a
    inside any program. Run it without mpirun: it launches its own jobs (inside a Slurm allocation: --launcher srun).
    """
    writable_folder(given["resume"] or named(given["output"], prefix="tune-"), "the tune", "bench tune")
    sys.exit(tune(given, echo))
