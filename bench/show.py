"""`bench list` and `bench show`: the algorithms, and the tables of an earlier run."""
from __future__ import annotations

import click
from tabulate import tabulate

import a2a
from a2a.record import report
from a2a.record.results import load
from a2a.sweep.session import FORMATS

from .group import main
from .options import results_folders


@main.command("list")
@click.option("--plugin", multiple=True, help="A .py file or module that registers algorithms (repeatable).")
def list_algorithms(plugin: tuple[str, ...]) -> None:
    """List the algorithms: which collective each serves (alltoall, alltoallv), what it does, options, mirrors."""
    for source in plugin:
        a2a.load_plugin(source)
    rows = [(name, collective, kind.summary, a2a.get(name).describe_options() or "-", kind.mirrors)
            for name in a2a.algorithms() for collective, kind in a2a.get(name).kinds.items()]
    click.echo(tabulate(rows, headers=["algorithm", "serves", "what it does", "options", "mirrors"],
                        maxcolwidths=[None, None, 50, 30, 40]))


@main.command("show")
@click.argument("results")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="The tables per process count as `bench run` prints them, the TPU benchmark's columns (tab-"
                   "separated; docs/record.md says what each holds), or the rows as CSV or JSON.")
def show(results: str, fmt: str) -> None:
    """Print the tables (or rows) of an earlier run, RESULTS: a `bench run` or `bench simulate` directory."""
    [folder] = results_folders((results,))
    if fmt == "tpu":
        run = load(folder)
        click.echo(report.tpu_table(run.rows, run.meta.get("option_defaults")))
        return
    click.echo(report.show(folder, fmt))
