"""`bench plot RESULTS [-o DIR]`: every figure of a run as PNG and SVG, and an index.html."""
from __future__ import annotations

from pathlib import Path

import click

from a2a.analysis import study
from a2a.record.outputs import writable_folder

from .group import echo, main


@main.command("plot")
@click.argument("results", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False),
              help="Directory for the figures. [default: RESULTS/plots]")
def plot_command(results: str, output: str | None) -> None:
    """Draw the run's figures, or a topology study's (needs the plot extra: pip install 'a2a-testbed[plot]')."""
    folder = writable_folder(output or Path(results) / "plots", "the figures", "bench plot")
    echo(study.draw(Path(results), folder))
