"""Compare one algorithm across two sets of runs (a library before and after tuning), by a2a.record.verdict's
unpaired form."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from a2a.analysis.decide import Candidate, gather
from a2a.analysis.revert import revert_slower
from a2a.errors import BadInput, BadResults
from a2a.record import verdict
from a2a.record.decision import context_dict, read_decision, varying, write_decision
from a2a.record.results import NATIVE
from a2a.record.verdict import ALPHA, MARGIN
from a2a.units import human_bytes


def compare(baseline: list[Path], tuned: list[Path], algorithm: str = NATIVE, metric: str = "median",
            margin: float = MARGIN, alpha: float = ALPHA, paired: bool = False) -> list[dict[str, Any]]:
    """Per process count and size, one algorithm's metric in two sets of runs (the median of the runs'), the ratio
    tuned over baseline with its interval, p and verdict, and the unit compared.

    Launches are the unit where each side has several (timings swing from one mpirun to the next far more than
    within one): a launch's value is the median of its per-round values. Otherwise the rounds are, and the interval
    holds for these launches only; a side without them (a record made before rounds) is untested. `paired`: the runs
    alternated, so the k-th tuned run is paired with the k-th baseline run before it (bench tune's verification).
    """
    sides = [[_points_of(directory, algorithm) for directory in side] for side in (baseline, tuned)]
    common = sorted(set.intersection(*(set(run) for side in sides for run in side)))
    if not common:
        raise BadResults(f"no valid {algorithm} points measured in every baseline and tuned run")
    rows = []
    for key in common:
        old, new = ([run[key] for run in side] for side in sides)
        if paired:
            judged, unit = _alternated(old, new, metric, margin, alpha)
        else:
            judged, unit = verdict.unpaired(_values(old, metric), _values(new, metric), margin, alpha)
        rows.append({**context_dict(key[0]), "bytes_per_peer": key[1],
                     "baseline_us": float(np.median([p.value_us(metric) for p in old])),
                     "tuned_us": float(np.median([p.value_us(metric) for p in new])), "runs": (len(old), len(new)),
                     **judged.as_dict(), "unit": unit})
    return rows


def _alternated(old: list[Candidate], new: list[Candidate], metric: str, margin: float,
                alpha: float) -> tuple[verdict.Comparison, str]:
    """Runs that alternated judged in pairs: each launch's value the median of its per-round values."""
    def launches(points: list[Candidate]) -> verdict.Values:
        return {("", k): float(np.median(list(p.per_round(metric).values()))) for k, p in enumerate(points)}
    judged = verdict.family({"runs": (launches(new), launches(old))}, verdict.bound_of(margin, None), alpha)["runs"]
    return judged, verdict.LAUNCH_PAIRS


def _points_of(directory: Path, algorithm: str) -> dict[tuple, Candidate]:
    return {(p.context, p.bytes_per_peer): p for p in gather([directory])[0].values() if p.algorithm == algorithm}


def _values(points: list[Candidate], metric: str) -> verdict.Values:
    """One side's per-round values, every run's (a run's launches are told apart by their stamps or directory)."""
    return {unit: value for point in points for unit, value in point.per_round(metric).items()}


def render_comparison(rows: list[dict[str, Any]], metric: str, alpha: float, margin: float = MARGIN) -> str:
    """The comparison as a table under the statistic it rests on; a ratio counts only where its interval lies
    wholly beyond the margin."""
    columns, same = varying(rows)
    body = [[*(row[c] for c in columns), human_bytes(row["bytes_per_peer"]), f"{row['baseline_us']:,.1f}",
             f"{row['tuned_us']:,.1f}", f"{row['ratio']:.2f}",
             "-" if row["low"] is None else f"{row['low']:.2f}-{row['high']:.2f}",
             "-" if row["p"] is None else f"{row['p']:.3f}", _verdict(row)] for row in rows]
    headers = [*columns, "bytes/peer", f"default {metric} us", f"tuned {metric} us", "tuned/default", "interval", "p",
               "verdict"]
    stated = [f"Verdicts: {verdict.statistic(metric, alpha, margin, unit=unit)}."
              for unit in sorted({row["unit"] for row in rows})]
    return "\n".join([*stated, *([f"Every row's {', '.join(same)}."] if same else []),
                      tabulate(body, headers=headers, disable_numparse=True)])


def _verdict(row: dict[str, Any]) -> str:
    return {verdict.FASTER: "faster", verdict.SLOWER: "SLOWER", verdict.TIE: "same (within the margin)",
            verdict.UNTESTED: f"untested (fewer than {verdict.MIN_ROUNDS} {row['unit']}"
                              f"{'' if row['unit'] == verdict.LAUNCH_PAIRS else ' a side'})"}[row["verdict"]]


def compared(baseline: list[Path], tuned: list[Path], algorithm: str, metric: str, alpha: float,
             table: Path | None = None, output: Path | None = None, margin: float = MARGIN) -> str:
    """`bench compare` as text: the comparison, and with `table` the cells measured slower given back to the
    library in a table written to `output`."""
    if bool(table) != bool(output):
        raise BadInput("--revert-slower and --output go together")
    rows = compare(baseline, tuned, algorithm, metric, margin, alpha)
    lines = [render_comparison(rows, metric, alpha, margin)]
    if table is not None and output is not None:  # both or neither (above)
        document, reverted = revert_slower(read_decision(table), rows, alpha)
        lines += reverted or ["nothing was slower: the table stands"]
        write_decision(document, output)
        lines.append(f"wrote {output}")
    return "\n".join(lines)
