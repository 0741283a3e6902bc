"""Compare one algorithm across two sets of launches (a library before and after tuning), by a2a.record.verdict's
rule across launches: a launch is the unit a tuning changes; 0 B and times below the timer's floor are never judged."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from a2a.analysis.decide import Candidate, gather, timer_floor
from a2a.analysis.revert import revert_slower
from a2a.errors import BadInput, BadResults
from a2a.record import verdict
from a2a.record.decision import context_dict, read_decision, varying, write_decision
from a2a.record.results import NATIVE, read_meta
from a2a.record.verdict import ALPHA, MARGIN
from a2a.units import human_bytes


def compare(baseline: list[Path], tuned: list[Path], algorithm: str = NATIVE, metric: str = "median",
            margin: float = MARGIN, alpha: float = ALPHA) -> list[dict[str, Any]]:
    """Per process count and size, one algorithm's metric in two sets of launches (the median of the runs'), the
    ratio tuned over baseline with its interval, p and verdict, the unit compared, the launches a side, and why a row
    carries no verdict (`why`, where it does not).

    Every directory is a launch, or holds the launches its samples name. With fewer than 3 launches a side the ratio
    and its interval over rounds are described and untested; with 3 or more, launches are the unit, paired with
    their neighbours by the sign test where their start stamps say they ran in pairs (bench tune's verification,
    compare --launches).
    """
    sides = [[_points_of(directory, algorithm) for directory in side] for side in (baseline, tuned)]
    common = sorted(set.intersection(*(set(run) for side in sides for run in side)))
    if not common:
        raise BadResults(f"no valid {algorithm} points measured in every baseline and tuned run")
    meta = [read_meta(directory) for directory in (*baseline, *tuned)]
    rows = []
    for key in common:
        old, new = ([run[key] for run in side] for side in sides)
        before, after = _values(old, metric), _values(new, metric)
        judged, unit, untested = verdict.across_launches(before, after, margin, alpha)
        launches = (len(verdict.launches_of(before)), len(verdict.launches_of(after)))
        baseline_us, tuned_us = (float(np.median([p.value_us(metric) for p in side])) for side in (old, new))
        floor = timer_floor(meta, context_dict(key[0])["nprocs"], old[0].rows[0].timing if old[0].rows else "")
        why = verdict.unjudged_why(key[1], (baseline_us * 1e-6, tuned_us * 1e-6), floor)
        if why:
            judged = verdict.not_judged(judged)
        why = why or untested
        rows.append({**context_dict(key[0]), "bytes_per_peer": key[1], "baseline_us": baseline_us,
                     "tuned_us": tuned_us, "runs": (len(old), len(new)), "launches": launches, **judged.as_dict(),
                     "unit": unit, "why": why})
    return rows


def _points_of(directory: Path, algorithm: str) -> dict[tuple, Candidate]:
    return {(p.context, p.bytes_per_peer): p for p in gather([directory])[0].values() if p.algorithm == algorithm}


def _values(points: list[Candidate], metric: str) -> verdict.Values:
    """One side's per-round values, every run's (a run's launches are told apart by their stamps or directory)."""
    return {unit: value for point in points for unit, value in point.per_round(metric).items()}


def render_comparison(rows: list[dict[str, Any]], metric: str, alpha: float, margin: float = MARGIN) -> str:
    """The comparison as a table under the statistic it rests on; a ratio counts only where its interval lies
    wholly beyond the margin, and a row described or not judged says why."""
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
    found = row["verdict"]
    if found in (verdict.UNTESTED, verdict.NOT_JUDGED):
        return f"{found} ({row.get('why') or verdict.too_few_launches(min(row.get('launches') or (1,)))})"
    return {verdict.FASTER: "faster", verdict.SLOWER: "SLOWER", verdict.TIE: "same (within the margin)"}[found]


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
