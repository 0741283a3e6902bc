"""`bench decide`, `export`, `compare` and `validate`: choosing, applying and checking what was measured."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from a2a.analysis import decide as decision
from a2a.analysis.export.formats import export_report, formats
from a2a.analysis.validate import against_simgrid, draw_backends, render_backends, render_validation
from a2a.analysis.validate import validate as validate_records
from a2a.record.meta import backend_of
from a2a.record.outputs import writable_file
from a2a.record.results import NATIVE, read_meta
from a2a.record.verdict import MARGIN
from a2a.workflows.compare_launches import compare_command

from .group import echo, main
from .options import results_folders


def _margin(context: click.Context, parameter: click.Parameter, text: str) -> float:
    """--margin in percent as a fraction: a number at least 0 and below 100."""
    try:
        percent = float(text)
    except ValueError:
        percent = -1.0
    if not 0 <= percent < 100:
        raise click.BadParameter(f"{text!r}: accepted is a percentage, a number at least 0 and below 100 (5 is 5 %)")
    return percent / 100


@main.command("decide")
@click.argument("results", nargs=-1, required=True)
@click.option("--metric", type=click.Choice(decision.METRICS), default="mean", show_default=True,
              help="What 'best' means; mean counts the stalls applications pay for.")
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="Family-wise error rate of a cell's verdicts (Holm): a difference not shown at it is a tie.")
@click.option("--margin", type=str, default=f"{MARGIN * 100:g}", show_default=True, callback=_margin, metavar="PERCENT",
              help="The smallest difference worth a verdict, in percent (the cell's noise floor where larger).")
@click.option("--force-mix", is_flag=True, help="Pool records of different MPI libraries or dtypes.")
@click.option("--dtype", help="Use the points of this dtype (when the runs mix several).")
@click.option("--where", multiple=True, help="Only the points of this context, COLUMN=VALUE (repeatable), e.g. "
                                             "tests=10 for an overlap record: an exported file serves one.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the table as JSON (decision.json).")
def decide(results: tuple[str, ...], metric: str, alpha: float, margin: float, force_mix: bool, dtype: str | None,
           where: tuple[str, ...], output: str | None) -> None:
    """Choose the best algorithm per process count and size from one or more results directories (each a launch)."""
    table = writable_file(output, "the decision table", "bench decide") if output else None
    click.echo(decision.decided(results_folders(results), metric, alpha, dtype, table,
                                dict(w.partition("=")[::2] for w in where), margin, force_mix))


@main.command("export")
@click.argument("table", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", required=True, help=f"One of: {', '.join(formats())}.")
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="File to write (atomically); without it the file goes to stdout.")
@click.option("--libmpi", type=click.Path(dir_okay=False),
              help="mpich: the MPICH library whose built-in tree to extend [default: found beside this Python].")
@click.option("--env", "env_only", is_flag=True,
              help="Print only the KEY=VALUE lines that apply the written file (for scripts; needs -o).")
def export(table: str, fmt: str, output: str | None, libmpi: str | None, env_only: bool) -> None:
    """Write a decision table as an Open MPI, MPICH or Intel MPI tuning file."""
    written = writable_file(output, "the tuning file", "bench export") if output else None
    text, said = export_report(table, fmt, written, libmpi, env_only)
    for line in said:
        click.echo(line, err=True)
    click.echo(text)


@main.command("compare")
@click.option("--baseline", multiple=True, help="Results directory of the default run (repeatable).")
@click.option("--tuned", multiple=True, help="Results directory of the tuned run (repeatable).")
@click.option("--algorithm", default=NATIVE, show_default=True, help="The algorithm to compare.")
@click.option("--metric", type=click.Choice(decision.METRICS), default="median", show_default=True)
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="A difference counts when its (1 - alpha) interval lies wholly beyond the margin.")
@click.option("--margin", type=str, default=f"{MARGIN * 100:g}", show_default=True, callback=_margin, metavar="PERCENT",
              help="The smallest difference worth a verdict, in percent.")
@click.option("--revert-slower", "table", type=click.Path(dir_okay=False),
              help="A decision.json whose cells measured significantly slower go back to native...")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="...written here (verified table).")
@click.option("--launches", type=click.IntRange(min=1),
              help="Make the launches instead: this many pairs of launches of the library's own MPI_Alltoall, one "
                   "without and one with the tuning (--with, --env), then compare them (6 or more for a verdict).")
@click.option("--with", "with_file", type=click.Path(dir_okay=False),
              help="--launches: the tuned side's file, a deploy file or the KEY=VALUE lines `bench export -o FILE "
                   "--env` prints.")
@click.option("--env", multiple=True, metavar="KEY=VALUE", help="--launches: a variable of the tuned side "
                                                                "(repeatable); neither this nor --with: an A/A.")
@click.option("--nprocs", help="--launches: process counts. [default: 2,4]")
@click.option("--sizes", help="--launches: bytes per peer. [default: 8,1K,16K,128K,1M]")
@click.option("--iterations", type=click.IntRange(min=1), help="--launches: timed calls per point. [default: 50]")
@click.option("--launcher", help="--launches: the command prefix of each MPI job (it adds -n N). [default: the mpiexec "
                                 "beside this Python]")
@click.option("--job-timeout", type=click.FloatRange(min=1), help="--launches: seconds one launch may take.")
@click.option("--results", help="--launches: their directory; the same command again goes on there. [default: "
                                "results/compare-<UTC time>]")
def compare(baseline: tuple[str, ...], tuned: tuple[str, ...], algorithm: str, metric: str, alpha: float,
            margin: float, table: str | None, output: str | None, launches: int | None, **launching: Any) -> None:
    """Per size, the ratio tuned/baseline of one algorithm measured in two sets of launches.

    For example native with and without an exported tuning file. A launch is the unit a tuning changes: with fewer
    than 3 a side the ratio is described, not judged; launches that ran in pairs of neighbours are paired (6 pairs
    or more for a verdict). With --launches N it makes them itself (run it without mpirun).
    """
    code = compare_command(list(baseline), list(tuned), algorithm, metric, alpha, margin, table, output, launches,
                           launching, echo)
    if code is not None:
        sys.exit(code)


@main.command("validate")
@click.argument("measured")
@click.argument("simulated")
@click.option("--margin", type=str, default=f"{MARGIN * 100:g}", show_default=True, callback=_margin, metavar="PERCENT",
              help="Two simulators: SimGrid's tie set holds its best and every algorithm within this of it.")
@click.option("--figure", type=click.Path(dir_okay=False),
              help="Two simulators: also draw each point's analytical time against SimGrid's here (PNG).")
def validate(measured: str, simulated: str, margin: float, figure: str | None) -> None:
    """Set a `bench simulate` record against a measured run: relative error per point, ranking per size.

    MEASURED is a `bench run` results directory; SIMULATED is a `bench simulate` one of the same grid (the same
    algorithms, sizes and process counts: only the points both hold are compared). With a SimGrid record as
    MEASURED and an analytical one (`bench simulate --backend analytical`) as SIMULATED, the two simulators side
    by side: per point both times and their ratio, per cell whether the analytical best is in SimGrid's tie set.
    """
    results_folders((measured, simulated))
    if backend_of(read_meta(Path(measured))) == "simgrid" and backend_of(read_meta(Path(simulated))) == "analytical":
        rows = against_simgrid(Path(measured), Path(simulated))
        click.echo(render_backends(rows, margin))
        if figure:
            click.echo(f"figure: {draw_backends(rows, writable_file(figure, 'the figure', 'bench validate'))}")
        return
    click.echo(render_validation(validate_records(Path(measured), Path(simulated))))
