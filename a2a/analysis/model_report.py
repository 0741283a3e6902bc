"""The model of a record as text: the fit per series, its formulas, the points it misses, and predictions."""
from __future__ import annotations

import math
from pathlib import Path

from tabulate import tabulate

from a2a.algos.cost import GENERIC
from a2a.analysis import decide, model
from a2a.record.decision import write_decision
from a2a.record.results import load
from a2a.units import human_bytes


def model_report(results: str, counts: list[int], output: str | None) -> str:
    """The fit, its errors and crossovers, and predictions at `counts` processes; the predicted decision table
    written to `output` when given."""
    run = load(Path(results))
    fits = model.fit(run.rows)
    lines = [f"Cost model of {results}: least squares on relative error of the medians (t_p50)\n",
             fit_table(fits) + "\n", formula_table(fits) + "\n", bad_points_table(fits) + "\n"]
    sizes = model.measured_sizes(run.rows)
    groups = model.predictable(fits)
    if counts and not groups:
        lines.append("Nothing to predict: every series ran in mesh groups, whose size is fixed by the mesh.")
    for context, group in sorted(groups.items()):
        for nprocs in counts:
            lines.append(f"Predicted median time at {nprocs} processes{model.context_text(context)} "
                         "(us; ranks per node as measured)")
            lines.append(prediction_table(group, nprocs, sizes) + "\n")
    if (counts or output) and groups:
        dtypes = sorted({r.dtype for r in run.rows if r.valid})
        measured = sorted({p for group in groups.values() for f in group for p in f.nprocs})
        document = model.predicted_decision(fits, counts or measured, sizes, [decide.source(run)], ",".join(dtypes))
        lines += ["Predicted decision table (from the model, not measured)", decide.render(document)]
        if output:
            write_decision(document, Path(output))
            lines.append(f"\nwrote {output}")
    return "\n".join(lines)


def fit_table(fits: list[model.Fit]) -> str:
    """One line per series: parameters, median error, crossover per measured process count."""
    body = [[f.label, "\n".join(f.describe()), len(f.residuals), f"{f.error:.0%}", len(f.bad_points()),
             "\n".join(f"p={p}: {bytes_text(f.crossover(p))}" for p in f.nprocs)] for f in fits]
    return tabulate(body, headers=["series", "fitted parameters", "points", "median\nerror",
                                   "points\noff > 50%", "crossover\n(B/peer)"], disable_numparse=True)


def bytes_text(size: float) -> str:
    """A byte count for reading: 812, 3.4K, 1.2M, inf."""
    if math.isinf(size):
        return "inf"
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.3g}{unit}"
    return f"{size:.0f}"


def formula_table(fits: list[model.Fit]) -> str:
    """The formula each series was fitted with (p ranks, m bytes per peer, N nodes, q per node)."""
    body = sorted({(f.algorithm, "generic" if f.formula is GENERIC else f.algorithm, f.formula.text) for f in fits})
    return tabulate(body, headers=["algorithm", "model", "time (p ranks, m B/peer, N nodes, q ranks/node)"])


def bad_points_table(fits: list[model.Fit]) -> str:
    """Every measured point the model misses by more than 50%."""
    body = [[f.label, r.nprocs, human_bytes(r.bytes_per_peer), f"{r.measured * 1e6:,.1f}",
             f"{r.predicted * 1e6:,.1f}", f"{r.error:.0%}"]
            for f in fits for r in f.bad_points()]
    if not body:
        return "The model is within 50% of every measured point."
    total = sum(len(f.residuals) for f in fits)
    title = f"Where the model is wrong: {len(body)} of {total} points off by more than 50%\n"
    return title + tabulate(body, headers=["series", "nprocs", "bytes/peer", "measured us", "model us",
                                           "error"], disable_numparse=True,
                            colalign=("left", "right", "right", "right", "right", "right"))


def prediction_table(fits: list[model.Fit], nprocs: int, sizes: list[int]) -> str:
    """Sizes down, series across, the fastest marked."""
    times = model.predicted_times(fits, nprocs, sizes)
    labels = list(times)
    body = []
    for i, size in enumerate(sizes):
        column = [times[label][i] for label in labels]
        best = min(range(len(labels)), key=column.__getitem__)
        body.append([human_bytes(size)] + [f"{t * 1e6:,.1f}" + ("*" if j == best else "")
                                           for j, t in enumerate(column)])
    headers = ["bytes/peer"] + [name.replace(" ", "\n").replace(";", "\n") for name in labels]
    return tabulate(body, headers=headers, disable_numparse=True,
                    colalign=("right",) * (len(labels) + 1)) + "\n* predicted fastest"
