"""Compare one algorithm across two sets of runs (a library before and after tuning)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from a2a.analysis.decide import Candidate, gather, mann_whitney_p
from a2a.analysis.revert import revert_slower
from a2a.errors import BadInput, BadResults
from a2a.record.decision import context_dict, read_decision, varying, write_decision
from a2a.record.results import NATIVE
from a2a.units import human_bytes


def compare(baseline: list[Path], tuned: list[Path], algorithm: str = NATIVE,
            metric: str = "median") -> list[dict[str, Any]]:
    """Per process count and size, one algorithm's metric in two sets of runs, their ratio and a p-value.

    With several runs a side, the launch is the unit of replication (timings swing from one
    mpirun to the next far more than within one): each run gives one metric value, the ratio
    is of their medians and Mann-Whitney compares the runs. With one run a side, the samples.
    """
    sides = [[_points_of(directory, algorithm) for directory in side] for side in (baseline, tuned)]
    common = sorted(set.intersection(*(set(run) for side in sides for run in side)))
    if not common:
        raise BadResults(f"no valid {algorithm} points measured in every baseline and tuned run")
    rows = []
    for key in common:
        old, new = ([run[key] for run in side] for side in sides)
        if len(old) > 1 and len(new) > 1:
            before, after = [p.value_us(metric) for p in old], [p.value_us(metric) for p in new]
        else:
            before, after = [v for p in old for v in p.samples], [v for p in new for v in p.samples]
        old_value = float(np.median([p.value_us(metric) for p in old]))
        new_value = float(np.median([p.value_us(metric) for p in new]))
        rows.append({**context_dict(key[0]), "bytes_per_peer": key[1], "baseline_us": old_value,
                     "tuned_us": new_value, "ratio": new_value / old_value if old_value > 0 else math.nan,
                     "runs": (len(old), len(new)),
                     "p": mann_whitney_p(before, after) if before and after else None})
    return rows


def _points_of(directory: Path, algorithm: str) -> dict[tuple, Candidate]:
    return {(p.context, p.bytes_per_peer): p for p in gather([directory])[0].values() if p.algorithm == algorithm}


def render_comparison(rows: list[dict[str, Any]], metric: str, alpha: float) -> str:
    """The comparison as a table; a ratio counts only when the test says the runs differ."""
    columns, same = varying(rows)
    body = [[*(row[c] for c in columns), human_bytes(row["bytes_per_peer"]), f"{row['baseline_us']:,.1f}",
             f"{row['tuned_us']:,.1f}", f"{row['ratio']:.2f}",
             "-" if row["p"] is None else f"{row['p']:.3f}", _verdict(row, alpha)] for row in rows]
    headers = [*columns, "bytes/peer", f"default {metric} us", f"tuned {metric} us", "tuned/default", "p", "verdict"]
    return "\n".join([*([f"Every row's {', '.join(same)}."] if same else []),
                      tabulate(body, headers=headers, disable_numparse=True)])


def _verdict(row: dict[str, Any], alpha: float) -> str:
    if row["p"] is None or row["p"] >= alpha:
        return "same (not significant)"
    return "faster" if row["ratio"] < 1 else "SLOWER"


def compared(baseline: list[Path], tuned: list[Path], algorithm: str, metric: str, alpha: float,
             table: Path | None = None, output: Path | None = None) -> str:
    """`bench compare` as text: the comparison, and with `table` the cells measured slower given back to the
    library in a table written to `output`."""
    if bool(table) != bool(output):
        raise BadInput("--revert-slower and --output go together")
    rows = compare(baseline, tuned, algorithm, metric)
    lines = [render_comparison(rows, metric, alpha)]
    if table:
        document = read_decision(table)
        lines += revert_slower(document, rows, alpha) or ["nothing was slower: the table stands"]
        write_decision(document, Path(output))
        lines.append(f"wrote {output}")
    return "\n".join(lines)
