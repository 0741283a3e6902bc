"""Decision tables: the best algorithm per process count and message size, read from results.

The table is a JSON document (schema "a2a-decision/1", described in docs/decide.md). For
every process count (and any other key column results gain later) it lists byte ranges per
peer that cover 0 to infinity; each range names an algorithm with its options and keeps the
measured cells it came from, with every candidate's metric so exporters can substitute.
This module reads results files only; it never imports MPI.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from .errors import BadInput, BadResults
from .results import KEY_COLUMNS, KEY_DEFAULTS, Row, label, load, point_key, write_atomic
from .units import human_bytes

SCHEMA = "a2a-decision/1"
METRICS = ("mean", "median", "p90", "p99", "max")
ROW_COLUMN = {"mean": "t_mean_us", "median": "t_p50_us", "p90": "t_p90_us", "p99": "t_p99_us",
              "max": "t_max_us"}
# Key columns that split the table (nprocs today; e.g. a timing mode or mesh tomorrow).
CONTEXT_COLUMNS = tuple(c for c in KEY_COLUMNS if c not in ("algorithm", "options", "dtype", "bytes_per_peer"))
# `auto` replays a table's own choices: measuring it is a check, not a candidate.
EXCLUDED = ("auto",)
# Ties go to the earliest name here; algorithms not listed (plug-ins) come after, by name.
SIMPLICITY = ("native", "linear", "pairwise", "bruck", "throttled", "pairwise_inplace",
              "node_aware", "hierarchical", "padded_bruck", "two_phase_bruck", "tuna")


@dataclass
class Point:
    """One measured point merged over every run that measured it."""

    context: tuple
    bytes_per_peer: int
    algorithm: str
    options: str
    samples: list[float] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    def value_us(self, metric: str) -> float:
        """The metric in microseconds: from the samples, else from the best-sampled row."""
        if self.samples:
            return metric_of(np.asarray(self.samples), metric) * 1e6
        row = max(self.rows, key=lambda r: r.iterations)
        return float(getattr(row, ROW_COLUMN[metric]))


def metric_of(seconds: np.ndarray, metric: str) -> float:
    """mean, median, p90, p99 or max of samples."""
    if metric == "mean":
        return float(seconds.mean())
    if metric == "max":
        return float(seconds.max())
    return float(np.percentile(seconds, {"median": 50, "p90": 90, "p99": 99}[metric]))


def mann_whitney_p(x: Iterable[float], y: Iterable[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation, tie and continuity corrected)."""
    x, y = np.asarray(list(x), float), np.asarray(list(y), float)
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = np.concatenate([x, y])
    _, inverse, counts = np.unique(pooled, return_inverse=True, return_counts=True)
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0
    u = average_rank[inverse][:n1].sum() - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    ties = float((counts.astype(float) ** 3 - counts).sum())
    variance = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return 1.0
    z = max(abs(u - n1 * n2 / 2.0) - 0.5, 0.0) / math.sqrt(variance)
    return math.erfc(z / math.sqrt(2.0))


def preference(algorithm: str, options: str) -> tuple:
    """Sort key of the stable tie-break: native first, then simpler algorithms, then options."""
    rank = SIMPLICITY.index(algorithm) if algorithm in SIMPLICITY else len(SIMPLICITY)
    natural = [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", options)]
    return rank, algorithm, [(isinstance(t, int), t) for t in natural]


def parse_options(text: str) -> dict[str, str]:
    """'radix=2;window=8' -> {'radix': '2', 'window': '8'}."""
    return dict(pair.split("=", 1) for pair in text.split(";") if pair)


def lower_bounds(sizes: list[int]) -> list[int]:
    """First byte count of each measured size's range: 0, then geometric means of neighbours."""
    bounds = [0]
    for small, large in zip(sizes, sizes[1:]):
        bounds.append(min(large, max(small + 1, round(math.sqrt(small * large)))))
    return bounds


# --- reading results -------------------------------------------------------------------

def gather(directories: list[Path], dtype: str | None = None) -> tuple[dict[tuple, Point], list[dict], str]:
    """Valid points of every run, merged by key; the runs' descriptions; the dtype."""
    if not directories:
        raise BadInput("give at least one results directory")
    points: dict[tuple, Point] = {}
    wrong: set[tuple] = set()
    sources = []
    for directory in directories:
        run = load(Path(directory))
        sources.append(source(run))
        for row in run.rows:
            key = point_key(row)
            if "WRONG RESULT" in row.note:
                wrong.add(key)
            if not (row.valid and row.iterations > 0) or row.algorithm in EXCLUDED:
                continue
            point = points.get(key) or points.setdefault(key, Point(
                tuple(getattr(row, c) for c in CONTEXT_COLUMNS), row.bytes_per_peer,
                row.algorithm, row.options))
            point.rows.append(row)
            point.samples += run.samples.get(key, [])
    points = {k: p for k, p in points.items() if k not in wrong}
    names = ", ".join(str(d) for d in directories)
    timings = sorted({p.rows[0].timing for p in points.values()})
    if len(timings) > 1:
        raise BadResults(f"{names} mix timing modes ({', '.join(timings)}); a decision compares points "
                         "measured the same way: decide the runs of one --timing at a time")
    if not points:
        raise BadResults(f"no valid points in {names}: every point was skipped, refused or wrong")
    return _one_dtype(points, dtype, names), sources, _chosen_dtype(points, dtype)


def _one_dtype(points: dict[tuple, Point], dtype: str | None, names: str) -> dict[tuple, Point]:
    found = sorted({p.rows[0].dtype for p in points.values()})
    if dtype is None:
        if len(found) > 1:
            raise BadResults(f"{names} mix points of dtypes {', '.join(found)}; a table is for one "
                             "dtype: choose with --dtype")
        return points
    chosen = {k: p for k, p in points.items() if p.rows[0].dtype == dtype}
    if not chosen:
        raise BadResults(f"no valid points of dtype {dtype} in {names}; found {', '.join(found)}")
    return chosen


def _chosen_dtype(points: dict[tuple, Point], dtype: str | None) -> str:
    return dtype or next(iter(points.values())).rows[0].dtype


def source(run: Any) -> dict[str, Any]:
    """Where a table's data came from: directory, status, library, commit."""
    meta = run.meta
    return {"directory": str(Path(run.directory).resolve()), "status": meta.get("status"),
            "start": meta.get("start"), "mpi_library": meta.get("mpi_library"),
            "git_commit": meta.get("git_commit"), "points": len(run.rows)}


# --- deciding --------------------------------------------------------------------------

def decide_cell(points: list[Point], metric: str, alpha: float) -> dict[str, Any]:
    """Choose among a cell's points: the fastest, or a preferred one not significantly slower."""
    ranked = sorted(points, key=lambda p: (p.value_us(metric), preference(p.algorithm, p.options)))
    best = ranked[0]
    tied = [p for p in ranked if p is best or _tied(best, p, alpha)]
    choice = min(tied, key=lambda p: preference(p.algorithm, p.options))
    value = choice.value_us(metric)
    others = [p for p in ranked if p is not choice]
    runner = others[0] if others else None
    native = next((p for p in ranked if p.algorithm == "native" and not p.options), None)
    return {
        "bytes_per_peer": choice.bytes_per_peer,
        "algorithm": choice.algorithm, "options": choice.options, "value_us": rounded(value),
        "samples": len(choice.samples),
        "tie": choice is not best,
        "tied_with": [label(p.algorithm, p.options) for p in tied if p is not choice],
        "runner_up": label(runner.algorithm, runner.options) if runner else None,
        "runner_up_us": rounded(runner.value_us(metric)) if runner else None,
        "margin": rounded(runner.value_us(metric) / value - 1.0) if runner and value > 0 else None,
        "speedup_vs_native": rounded(native.value_us(metric) / value) if native and value > 0 else None,
        "candidates": [{"algorithm": p.algorithm, "options": p.options,
                        "value_us": rounded(p.value_us(metric))} for p in ranked],
    }


def _tied(best: Point, other: Point, alpha: float) -> bool:
    if not best.samples or not other.samples:
        return False  # no samples, no test: the metric alone decides
    return mann_whitney_p(best.samples, other.samples) >= alpha


def rounded(value: float) -> float:
    """Six significant digits, for JSON that people read."""
    return float(f"{value:.6g}")



def ranges(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge size-ordered cells with the same choice into byte ranges covering 0..infinity."""
    lows = lower_bounds([c["bytes_per_peer"] for c in cells])
    merged: list[dict[str, Any]] = []
    for low, cell in zip(lows, cells):
        if merged and (merged[-1]["algorithm"], merged[-1]["options"]) == (cell["algorithm"], cell["options"]):
            merged[-1]["cells"].append(cell)
            continue
        if merged:
            merged[-1]["bytes_max"] = low - 1
        merged.append({"bytes_min": low, "bytes_max": None, "algorithm": cell["algorithm"],
                       "options": cell["options"], "cells": [cell]})
    return merged


def decide(directories: list[Path], metric: str = "mean", alpha: float = 0.05,
           dtype: str | None = None) -> dict[str, Any]:
    """Build the decision document from one or more results directories."""
    if metric not in METRICS:
        raise BadInput(f"unknown metric {metric!r}; accepted: {', '.join(METRICS)}")
    if not 0 < alpha < 1:
        raise BadInput(f"alpha {alpha} must lie strictly between 0 and 1")
    points, sources, chosen_dtype = gather(directories, dtype)
    by_cell: dict[tuple, list[Point]] = {}
    for point in points.values():
        by_cell.setdefault((point.context, point.bytes_per_peer), []).append(point)
    tables = []
    for context in sorted({c for c, _ in by_cell}):
        sizes = sorted(size for c, size in by_cell if c == context)
        cells = [decide_cell(by_cell[context, size], metric, alpha) for size in sizes]
        tables.append({**_context_dict(context), "ranges": ranges(cells)})
    libraries = sorted({s["mpi_library"] for s in sources if s["mpi_library"]})
    return {
        "schema": SCHEMA, "metric": metric, "alpha": alpha, "dtype": chosen_dtype,
        "context_columns": list(CONTEXT_COLUMNS),
        "mpi_library": libraries[0] if len(libraries) == 1 else libraries or None,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "sources": sources, "tables": tables,
    }


def context_of(record: dict[str, Any]) -> tuple:
    """A table's or comparison row's context; columns it lacks take the results' defaults."""
    return tuple(record.get(c, KEY_DEFAULTS.get(c, "")) for c in CONTEXT_COLUMNS)


def _context_dict(context: tuple) -> dict[str, Any]:
    return {column: _plain(value) for column, value in zip(CONTEXT_COLUMNS, context)}


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


# --- the decision file -----------------------------------------------------------------

def write_decision(document: dict[str, Any], path: Path) -> None:
    """Write decision.json atomically."""
    write_atomic(Path(path), json.dumps(document, indent=1) + "\n")


def read_decision(path: Path | str) -> dict[str, Any]:
    """Read and check a decision.json; BadInput names what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"decision table {path} does not exist (make one with `python -m bench decide`)")
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"decision table {path} is not valid JSON ({exc})") from None
    problem = _schema_problem(document)
    if problem:
        raise BadInput(f"decision table {path}: {problem} (expected a file written by `bench decide`)")
    return document


def _schema_problem(document: Any) -> str | None:
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        return f"no \"schema\": \"{SCHEMA}\""
    tables = document.get("tables")
    if not isinstance(tables, list) or not tables:
        return "no tables"
    for table in tables:
        if not isinstance(table, dict) or not isinstance(table.get("nprocs"), int):
            return "a table lacks an integer nprocs"
        rows = table.get("ranges")
        if not isinstance(rows, list) or not rows or rows[0].get("bytes_min") != 0:
            return f"the ranges of {_where(table)} do not start at 0 bytes"
        for row, following in zip(rows, rows[1:] + [None]):
            if not isinstance(row.get("algorithm"), str) or not isinstance(row.get("options"), str):
                return f"a range of {_where(table)} lacks algorithm or options"
            end = None if following is None else following.get("bytes_min", -1) - 1
            if row.get("bytes_max") != end:
                return f"the ranges of {_where(table)} leave a gap or overlap at {row.get('bytes_max')}"
    return None


def _where(table: dict[str, Any]) -> str:
    """'nprocs=4', with the other context columns where they differ from their defaults."""
    return ", ".join(f"{c}={table.get(c)}" for c in CONTEXT_COLUMNS
                     if c == "nprocs" or table.get(c, KEY_DEFAULTS.get(c, "")) != KEY_DEFAULTS.get(c, ""))


def lookup(document: dict[str, Any], nprocs: int, bytes_per_peer: int,
           **context: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(table, range) for a communicator: the nearest measured process count at or below nprocs.

    None when nprocs is below every measured count. Context columns given must match exactly
    (a table without one has the results' default, e.g. collective alltoall).
    """
    fitting = [t for t in document["tables"]
               if t["nprocs"] <= nprocs and all(t.get(c, KEY_DEFAULTS.get(c, "")) == v for c, v in context.items())]
    if not fitting:
        return None
    table = max(fitting, key=lambda t: t["nprocs"])
    row = next(r for r in reversed(table["ranges"]) if r["bytes_min"] <= bytes_per_peer)
    return table, row


# --- comparing two runs ----------------------------------------------------------------

def compare(baseline: list[Path], tuned: list[Path], algorithm: str = "native",
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
        rows.append({**_context_dict(key[0]), "bytes_per_peer": key[1], "baseline_us": old_value,
                     "tuned_us": new_value, "ratio": new_value / old_value if old_value > 0 else math.nan,
                     "runs": (len(old), len(new)),
                     "p": mann_whitney_p(before, after) if before and after else None})
    return rows


def _points_of(directory: Path, algorithm: str) -> dict[tuple, Point]:
    return {(p.context, p.bytes_per_peer): p for p in gather([directory])[0].values() if p.algorithm == algorithm}


def revert_slower(document: dict[str, Any], rows: list[dict[str, Any]], alpha: float) -> list[str]:
    """Give back to `native` every cell where the tuned library measured significantly slower.

    The testbed's own implementation of an algorithm can outrun the library's (MPICH's
    scattered against our throttled, say), so a table is verified on the library itself.
    Changes `document` in place; returns what was reverted.
    """
    slower = {(context_of(row), row["bytes_per_peer"]): row["ratio"] for row in rows
              if row["p"] is not None and row["p"] < alpha and row["ratio"] > 1}
    reverted = []
    for table in document["tables"]:
        context = context_of(table)
        cells = [cell for row in table["ranges"] for cell in row["cells"]]
        for cell in cells:
            ratio = slower.get((context, cell["bytes_per_peer"]))
            if ratio is None or cell["algorithm"] == "native":
                continue
            native = next((c for c in cell["candidates"] if c["algorithm"] == "native"), None)
            reverted.append(f"{_where(table)}, {cell['bytes_per_peer']} B/peer: "
                            f"{label(cell['algorithm'], cell['options'])} ran {ratio:.2f}x slower in the library; "
                            "back to native")
            value = native["value_us"] if native else cell["value_us"]
            cell.update(reverted_from=label(cell["algorithm"], cell["options"]), library_ratio=rounded(ratio),
                        runner_up=label(cell["algorithm"], cell["options"]), runner_up_us=cell["value_us"],
                        margin=rounded(cell["value_us"] / value - 1) if value else None,
                        algorithm="native", options="", value_us=value, speedup_vs_native=1.0, tie=False,
                        tied_with=[])
        table["ranges"] = ranges(cells)
    return reverted


def render_comparison(rows: list[dict[str, Any]], metric: str, alpha: float) -> str:
    """The comparison as a table; a ratio counts only when the test says the runs differ."""
    body = [[*(row[c] for c in CONTEXT_COLUMNS), human_bytes(row["bytes_per_peer"]), f"{row['baseline_us']:,.1f}",
             f"{row['tuned_us']:,.1f}", f"{row['ratio']:.2f}",
             "-" if row["p"] is None else f"{row['p']:.3f}", _verdict(row, alpha)] for row in rows]
    headers = [*CONTEXT_COLUMNS, "bytes/peer", f"default {metric} us", f"tuned {metric} us", "tuned/default",
               "p", ""]
    return tabulate(body, headers=headers, disable_numparse=True)


def _verdict(row: dict[str, Any], alpha: float) -> str:
    if row["p"] is None or row["p"] >= alpha:
        return "same (not significant)"
    return "faster" if row["ratio"] < 1 else "SLOWER"


# --- printing --------------------------------------------------------------------------

def render(document: dict[str, Any]) -> str:
    """The table as text: one line per measured size, merged ranges marked."""
    columns = document.get("context_columns", ["nprocs"])
    body = []
    for table in document["tables"]:
        for row in table["ranges"]:
            high = "inf" if row["bytes_max"] is None else human_bytes(row["bytes_max"])
            span = f"{human_bytes(row['bytes_min'])}..{high}"
            for i, cell in enumerate(row["cells"]):
                body.append([*(table[c] if i == 0 else "" for c in columns), span if i == 0 else "",
                             human_bytes(cell["bytes_per_peer"]), label(cell["algorithm"], cell["options"]),
                             f"{cell['value_us']:,.1f}", cell["runner_up"] or "-",
                             _percent(cell["margin"]), _times(cell["speedup_vs_native"]),
                             "tie" if cell["tie"] else ""])
    headers = [*columns, "range (B/peer)", "measured", "algorithm", f"{document['metric']} us",
               "runner-up", "by", "vs native", ""]
    return tabulate(body, headers=headers, disable_numparse=True)


def _percent(margin: float | None) -> str:
    return "-" if margin is None else f"{margin * 100:+.1f}%"


def _times(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"
