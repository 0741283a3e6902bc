"""`bench model RESULTS`: fit the alpha-beta model, say where it fails, predict other process counts."""
from __future__ import annotations

import click

from a2a.analysis.model_report import model_report
from a2a.errors import BadConfig
from a2a.sweep.parsing import parse_count, parse_list

from .group import echo, main
from .options import results_folders


@main.command("model")
@click.argument("results")
@click.option("--predict-nprocs", help="Process counts to predict, e.g. 256,1024 or 256:4096:x2.")
@click.option("--output", type=click.Path(dir_okay=False),
              help="Write the predicted decision table (decision.json format) here.")
def model_command(results: str, predict_nprocs: str | None, output: str | None) -> None:
    """Fit the Hockney (alpha-beta) model per algorithm; report errors, crossovers, predictions."""
    results_folders((results,))
    echo(model_report(results, predict_counts(predict_nprocs) if predict_nprocs else [], output))


def predict_counts(text: str) -> list[int]:
    """--predict-nprocs: process counts of at least 2."""
    counts = parse_list(text, "--predict-nprocs", parse=lambda t, what: parse_count(t.strip(), what))
    if counts[0] < 2:
        raise BadConfig(f"--predict-nprocs {text!r}: every process count must be at least 2")
    return counts
