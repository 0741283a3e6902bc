"""`bench decide` and `bench export`: the best algorithm per size, in the files MPI libraries read."""
from __future__ import annotations

from pathlib import Path

import click

from a2a import decide as decision
from a2a.export import export as export_table, formats

from .cli import main


@main.command("decide")
@click.argument("results", nargs=-1, required=True)
@click.option("--metric", type=click.Choice(decision.METRICS), default="mean", show_default=True,
              help="What 'best' means; mean counts the stalls applications pay for.")
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="Mann-Whitney significance level: slower but not significantly so is a tie.")
@click.option("--dtype", help="Use the points of this dtype (when the runs mix several).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the table as JSON (decision.json).")
def decide(results: tuple[str, ...], metric: str, alpha: float, dtype: str | None, output: str | None) -> None:
    """Choose the best algorithm per process count and size from one or more results directories."""
    document = decision.decide([Path(r) for r in results], metric, alpha, dtype)
    click.echo(decision.render(document))
    ties = sum(c["tie"] for t in document["tables"] for r in t["ranges"] for c in r["cells"])
    click.echo(f"\n{ties} cell(s) went to a simpler algorithm not significantly slower (tie, alpha={alpha}).")
    if output:
        if not Path(output).resolve().parent.is_dir():
            raise click.BadParameter(f"directory of {output} does not exist", param_hint="--output")
        decision.write_decision(document, Path(output))
        click.echo(f"wrote {output}")


@main.command("export")
@click.argument("table", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", required=True, help=f"One of: {', '.join(formats())}.")
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="File to write (atomically); without it the file goes to stdout.")
@click.option("--libmpi", type=click.Path(dir_okay=False),
              help="mpich: the MPICH library whose built-in tree to extend [default: found beside this Python].")
def export(table: str, fmt: str, output: str | None, libmpi: str | None) -> None:
    """Write a decision table as an Open MPI, MPICH or Intel MPI tuning file."""
    options = {"libmpi": libmpi} if libmpi and fmt == "mpich" else {}
    if libmpi and fmt != "mpich":
        raise click.BadParameter("only --format mpich reads a library", param_hint="--libmpi")
    exported = export_table(table, fmt, Path(output) if output else None, **options)
    for warning in exported.warnings:
        click.echo(f"warning: {warning}", err=True)
    if output:
        click.echo(f"wrote {output}; apply it with:\n  {exported.apply(str(Path(output).resolve()))}")
    else:
        click.echo(exported.text, nl=False)
        click.echo(f"apply it with:\n  {exported.apply('FILE')}", err=True)
