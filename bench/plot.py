"""`bench plot RESULTS [-o DIR]`: every figure of a run as PNG and SVG, and an index.html."""
from __future__ import annotations

import click

from a2a.analysis import study
from a2a.record.outputs import writable_folder

from .group import echo, main
from .options import results_folders


@main.command("plot")
@click.argument("results")
@click.option("-o", "--output", type=click.Path(file_okay=False),
              help="Directory for the figures. [default: RESULTS/plots]")
def plot_command(results: str, output: str | None) -> None:
    """Draw the run's figures, or a topology study's (needs the plot extra: pip install 'a2a-testbed[plot]')."""
    [record] = results_folders((results,))
    folder = writable_folder(output or record / "plots", "the figures", "bench plot")
    echo(study.draw(record, folder))
