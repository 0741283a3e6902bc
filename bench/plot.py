"""`bench plot RESULTS [-o DIR]`: every figure of a run as PNG and SVG, and an index.html."""
from __future__ import annotations

from pathlib import Path

import click

from a2a.analysis import plot, study
from a2a.record.results import load

from .group import echo, main


@main.command("plot")
@click.argument("results", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False),
              help="Directory for the figures. [default: RESULTS/plots]")
def plot_command(results: str, output: str | None) -> None:
    """Draw the run's figures, or a topology study's (needs the plot extra: pip install 'a2a-testbed[plot]')."""
    plot.pyplot()  # fail first, and clearly, when matplotlib is missing
    directory = Path(output) if output else Path(results) / "plots"
    if (Path(results) / study.STUDY_MANIFEST).is_file():  # a topology study: its own figures
        figures = study.plot_study(study.study_runs(Path(results)), directory)
    else:
        figures = plot.plot_all(load(Path(results)), directory)
    for figure in figures:
        echo(f"{directory / figure.name}.png  (.svg)  {figure.title}")
    echo(f"{directory / 'index.html'}  shows them all with the run's metadata")
