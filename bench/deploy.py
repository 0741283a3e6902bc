"""`bench deploy`: the winners written for liba2a, the PMPI library that runs them inside unmodified programs."""
from __future__ import annotations

from pathlib import Path

import click

from a2a.deploy.file import deploy as deployed
from a2a.deploy.file import shown_file
from a2a.deploy.learn import DEFAULT_CANDIDATES, DEFAULT_CANDIDATES_V, learn_file
from a2a.deploy.library import preload_library
from a2a.deploy.store import shown_store
from a2a.record.outputs import writable_file

from .group import main


@main.command("deploy")
@click.argument("decisions", nargs=-1, type=click.Path(exists=True))
@click.option("--nprocs", default="", help="Process counts to serve, e.g. 2,4,8  [default: the decisions']")
@click.option("--extrapolate", is_flag=True, help="Serve process counts the decisions never measured with the "
              "table of the nearest count below (marked unverified); without it they are refused.")
@click.option("--ranks-per-node", type=int, default=0, show_default=True,
              help="Ranks per node of the jobs to serve (block placement); 0: all on one node.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default="deploy.a2a", show_default=True)
@click.option("--library", is_flag=True, help="Print the path of liba2a.so (building it) and exit.")
@click.option("--mpicc", type=click.Path(dir_okay=False), default=None,
              help="With --library: build liba2a for the MPI library of this compiler wrapper (mpicc.mpich, "
                   "mpicc.openmpi, a module's mpicc), the one the program is built with  [default: this Python's]")
@click.option("--show", "show", type=click.Path(exists=True),
              help="Print what the deploy file FILE serves, learns and learned, and how it was verified, and exit; "
                   "given a folder (A2A_LEARN_DIR), what its jobs' evidence says per class, after compacting it.")
@click.option("--learn", is_flag=True, help="Write a learn file instead: liba2a explores --candidates against the "
              "library's own over the program's MPI_Alltoall calls on --nprocs ranks and keeps the winners "
              "(docs/learn.md).")
@click.option("--candidates", default="",
              help="With --learn: 1 to 7 algorithms whose schedule is data for each --collective, or 'control' (the "
                   f"library's own under another name: an A/A check)  [default: alltoall {','.join(DEFAULT_CANDIDATES)}"
                   f"; alltoallv {','.join(DEFAULT_CANDIDATES_V)}]")
@click.option("--collective", type=click.Choice(["alltoall", "alltoallv", "both"]), default="alltoall",
              show_default=True, help="With --learn: the calls learned, MPI_Alltoall, MPI_Alltoallv or both "
              "(docs/learn.md, Alltoallv learned).")
@click.option("--sizes", default="1:", show_default=True,
              help="With --learn: LOW:HIGH bytes per peer to learn (HIGH empty: no limit; 0 B always goes to the "
                   "library), e.g. 64K:1M.")
def deploy(decisions: tuple[str, ...], nprocs: str, extrapolate: bool, ranks_per_node: int, output: str,
           library: bool, mpicc: str | None, show: str | None, learn: bool, candidates: str, sizes: str,
           collective: str) -> None:
    """Write a deploy file: the decisions' schedules for the PMPI library to run inside any MPI program.

    DECISIONS are decision.json files (bench decide -o) or results directories, e.g. one for alltoall and one for
    alltoallv, measured with one MPI library: the file is for that library's programs. Run a program with it:
    mpiexec -n 4 env LD_PRELOAD=$(python -m bench deploy --library) A2A_DEPLOY=deploy.a2a ./program. `bench tune
    --deploy` makes one and verifies it on this machine.
    """
    refuse_usage(decisions, library, mpicc, show, learn)
    if library or show:
        click.echo(library_or_shown(library, mpicc, show))
        return
    counts = [parse_count(n) for n in nprocs.split(",") if n.strip()]
    written = writable_file(output, "the deploy file", "bench deploy")
    click.echo("\n".join(learn_file(candidates, counts, ranks_per_node, sizes, written, collective) if learn else
                         deployed([Path(d) for d in decisions], counts, ranks_per_node, written, extrapolate)))


def library_or_shown(library: bool, mpicc: str | None, show: str | None) -> str:
    """--library's path (built), else what --show's deploy file or store folder (A2A_LEARN_DIR) holds."""
    if library or show is None:
        return str(preload_library(mpicc))
    return "\n".join(shown_store(Path(show)) if Path(show).is_dir() else shown_file(Path(show)))


def refuse_usage(decisions: tuple[str, ...], library: bool, mpicc: str | None, show: str | None, learn: bool) -> None:
    """The options that do not go together, or nothing to deploy, refused in one line."""
    if mpicc and not library:
        raise click.UsageError("--mpicc goes with --library: it says which MPI library liba2a is built for")
    if learn and decisions:
        raise click.UsageError("--learn writes candidates, not a decision's winners: give it no decision")
    if not (decisions or library or show or learn):
        raise click.UsageError("give a decision.json or a results directory (or --learn, --library, or --show FILE)")


def parse_count(text: str) -> int:
    """One process count of --nprocs."""
    if not text.strip().isdigit() or int(text) < 1:
        raise click.BadParameter(f"{text!r} is not a process count (accepted: whole numbers >= 1, e.g. 2,4,8)",
                                 param_hint="--nprocs")
    return int(text)
