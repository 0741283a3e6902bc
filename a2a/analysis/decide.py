"""Decision tables: the best algorithm per process count and message size, read from results.

The document's schema, reading and lookup live in a2a.record.decision. This module reads results files
only; it never imports MPI.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import takewhile
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from a2a.algos.facts import library_own, shown, simplicity
from a2a.algos.registry import known
from a2a.errors import BadInput, BadResults
from a2a.record.decision import (
    CONTEXT_COLUMNS,
    SCHEMA,
    context_dict,
    context_of,
    ranges,
    rounded,
    varying,
    where,
    write_decision,
)
from a2a.record.results import KEY_COLUMNS, OVERLAP, Row, load, point_key, program_workload, read_samples
from a2a.units import counted, human_bytes

METRICS = ("mean", "median", "p90", "p99", "max")
ROW_COLUMN = {"mean": "t_mean_us", "median": "t_p50_us", "p90": "t_p90_us", "p99": "t_p99_us",
              "max": "t_max_us"}


@dataclass
class Candidate:
    """One measured point merged over every run that measured it."""

    context: tuple
    bytes_per_peer: int
    algorithm: str
    options: str
    samples: list[float] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    def value_us(self, metric: str) -> float:
        """The metric in microseconds: from the samples, else from the best-sampled row (an overlap row's exposed
        time, when it has one)."""
        if self.samples:
            return metric_of(np.asarray(self.samples), metric) * 1e6
        row = max(self.rows, key=lambda r: r.iterations)
        if row.timing == OVERLAP and not math.isnan(row.t_exposed_us):
            return float(row.t_exposed_us)
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
    """Sort key of the stable tie-break: the algorithm's registered simplicity (native first), name, options."""
    rank = simplicity(algorithm)
    natural = [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", options)]
    return rank, algorithm, [(isinstance(t, int), t) for t in natural]


def candidate(algorithm: str) -> bool:
    """Whether a decision may choose it: not one that only replays a table's choices (auto)."""
    found = known(algorithm)
    return found is None or found.candidate


# --- reading results -------------------------------------------------------------------

def gather(directories: list[Path], dtype: str | None = None, where: dict[str, str] | None = None
           ) -> tuple[dict[tuple, Candidate], list[dict], str]:
    """Valid points of every run (those whose context columns are as `where` says), merged by key; the runs'
    descriptions; the dtype."""
    if not directories:
        raise BadInput("give at least one results directory")
    stray = sorted(set(where or {}) - set(CONTEXT_COLUMNS))
    if stray:
        raise BadInput(f"--where {', '.join(stray)}: not a context column; accepted: {', '.join(CONTEXT_COLUMNS)}")
    points: dict[tuple, Candidate] = {}
    wrong: set[tuple] = set()
    sources = []
    for directory in directories:
        run = load(Path(directory))
        sources.append(source(run))
        computed = read_samples(Path(directory), "compute") if any(r.timing == OVERLAP for r in run.rows) else {}
        for row in run.rows:
            key = _program_key(row)
            if "WRONG RESULT" in row.note:
                wrong.add(key)
            if not row.measured or not candidate(row.algorithm) or \
                    any(str(getattr(row, k)) != v for k, v in (where or {}).items()):
                continue
            if key not in points:
                context = tuple(program_workload(row.workload) if c == "workload" else getattr(row, c)
                                for c in CONTEXT_COLUMNS)
                points[key] = Candidate(context, row.bytes_per_peer, row.algorithm, row.options)
            point = points[key]
            point.rows.append(row)
            point.samples += exposed(run.samples.get(point_key(row), []), computed.get(point_key(row)))
    points = {k: p for k, p in points.items() if k not in wrong}
    names = ", ".join(str(d) for d in directories)
    for column, option in (("timing", "--timing"), ("cache", "--cache")):
        modes = sorted({getattr(p.rows[0], column) for p in points.values()})
        if len(modes) > 1:
            raise BadResults(f"{names} mix {column} modes ({', '.join(modes)}); a decision compares points "
                             f"measured the same way: decide the runs of one {option} at a time")
    if not points:
        raise BadResults(f"no valid points in {names}: every point was skipped, refused or wrong")
    return _one_dtype(points, dtype, names), sources, _chosen_dtype(points, dtype)


def exposed(overall: list[float], compute: list[float] | None) -> list[float]:
    """An overlap point's samples as the decision ranks them: per iteration, the overall time less the compute
    phase's (the time the program waits for the exchange; comparable since every contestant computes the same
    phase); the overall times where no compute times were kept."""
    if not compute or len(compute) != len(overall):
        return list(overall)
    return [o - c for o, c in zip(overall, compute)]


def _program_key(row: Row) -> tuple:
    """A row's point key, a recorded call's workload as its program's: the calls of a program at one size are one
    point (their samples pooled, as the same point's over runs), so a table is per program and process count."""
    key = list(point_key(row))
    key[KEY_COLUMNS.index("workload")] = program_workload(row.workload)
    return tuple(key)


def _one_dtype(points: dict[tuple, Candidate], dtype: str | None, names: str) -> dict[tuple, Candidate]:
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


def _chosen_dtype(points: dict[tuple, Candidate], dtype: str | None) -> str:
    return dtype or next(iter(points.values())).rows[0].dtype


def source(run: Any) -> dict[str, Any]:
    """Where a table's data came from: directory, status, library, commit."""
    meta = run.meta
    crowded = {p: facts["oversubscribed"] for p, facts in meta.get("by_nprocs", {}).items()
               if facts.get("oversubscribed")}
    return {"directory": str(Path(run.directory).resolve()), "status": meta.get("status"),
            "start": meta.get("start"), "mpi_library": meta.get("mpi_library"),
            "git_commit": meta.get("git_commit"), "points": len(run.rows), "oversubscribed": crowded}


# --- deciding --------------------------------------------------------------------------

def decision_cell(bytes_per_peer: int, ranked: list[tuple[str, str, float]], chosen: int = 0, samples: int = 0,
                  tied_with: list[str] | None = None, timing: str = "", native_p: float | None = None
                  ) -> dict[str, Any]:
    """A table cell: ranked[chosen] of (algorithm, options, us) fastest first, its runner-up and its speed-up over the
    library's own under `timing` (when measured), with the rank test's p of that difference (`native_p`, when both
    have samples)."""
    algorithm, options, value = ranked[chosen]
    others = [c for i, c in enumerate(ranked) if i != chosen]
    runner = others[0] if others else None
    native = next((us for a, o, us in ranked if library_own(a, o, timing)), None)
    return {
        "bytes_per_peer": bytes_per_peer, "algorithm": algorithm, "options": options, "value_us": rounded(value),
        "samples": samples, "tie": chosen != 0, "tied_with": tied_with or [],
        "runner_up": shown(runner[0], runner[1]) if runner else None,
        "runner_up_us": rounded(runner[2]) if runner else None,
        "margin": rounded(runner[2] / value - 1.0) if runner and value > 0 else None,
        "speedup_vs_native": rounded(native / value) if native is not None and value > 0 else None,
        "native_p": None if native_p is None else rounded(native_p),
        "candidates": [{"algorithm": a, "options": o, "value_us": rounded(us)} for a, o, us in ranked],
    }


def decide_cell(points: list[Candidate], metric: str, alpha: float) -> dict[str, Any]:
    """Choose among a cell's points: the fastest, or a preferred one not significantly slower and ahead, by the
    metric, of every point that is (the rank test can tie a point whose stalls put its mean behind native's)."""
    ranked, tied = ranked_and_tied(points, metric, alpha)
    choice = min(tied, key=lambda p: preference(p.algorithm, p.options))
    timing = choice.rows[0].timing
    native = next((p for p in ranked if library_own(p.algorithm, p.options, timing)), None)
    tested = native is not None and native is not choice and choice.samples and native.samples
    cell = decision_cell(choice.bytes_per_peer, [(p.algorithm, p.options, p.value_us(metric)) for p in ranked],
                         ranked.index(choice), len(choice.samples),
                         [shown(p.algorithm, p.options) for p in tied if p is not choice], timing,
                         mann_whitney_p(choice.samples, native.samples) if tested else None)
    made = {r.workload: r.recorded_calls for p in points for r in p.rows if r.recorded_calls}  # by recorded call
    return {**cell, "recorded_calls": sum(made.values())} if made else cell


def ranked_and_tied(points: list[Candidate], metric: str, alpha: float) -> tuple[list[Candidate], list[Candidate]]:
    """A cell's points fastest first by the metric (equal ones by preference), and its tie set: the fastest and the
    points after it up to the first that the rank test finds significantly slower."""
    ranked = sorted(points, key=lambda p: (p.value_us(metric), preference(p.algorithm, p.options)))
    best = ranked[0]
    return ranked, list(takewhile(lambda p: p is best or _tied(best, p, alpha), ranked))


def _tied(best: Candidate, other: Candidate, alpha: float) -> bool:
    if not best.samples or not other.samples:
        return False  # no samples, no test: the metric alone decides
    return mann_whitney_p(best.samples, other.samples) >= alpha


def decide(directories: list[Path], metric: str = "mean", alpha: float = 0.05,
           dtype: str | None = None, where: dict[str, str] | None = None) -> dict[str, Any]:
    """Build the decision document from one or more results directories (their points in context `where`)."""
    if metric not in METRICS:
        raise BadInput(f"unknown metric {metric!r}; accepted: {', '.join(METRICS)}")
    if not 0 < alpha < 1:
        raise BadInput(f"alpha {alpha} must lie strictly between 0 and 1")
    points, sources, chosen_dtype = gather(directories, dtype, where)
    by_cell: dict[tuple, list[Candidate]] = {}
    for point in points.values():
        by_cell.setdefault((point.context, point.bytes_per_peer), []).append(point)
    tables = []
    for context in sorted({c for c, _ in by_cell}):
        sizes = sorted(size for c, size in by_cell if c == context)
        cells = [decide_cell(by_cell[context, size], metric, alpha) for size in sizes]
        tables.append({**context_dict(context), "ranges": ranges(cells)})
    libraries = sorted({s["mpi_library"] for s in sources if s["mpi_library"]})
    return {
        "schema": SCHEMA, "metric": metric, "alpha": alpha, "dtype": chosen_dtype,
        "context_columns": list(CONTEXT_COLUMNS),
        "mpi_library": libraries[0] if len(libraries) == 1 else libraries or None,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "sources": sources, "tables": tables,
    }


# --- printing --------------------------------------------------------------------------

def render(document: dict[str, Any]) -> str:
    """The table as text: one line per measured size, merged ranges marked. `vs native` is marked n.s. where the
    rank test does not find the difference; `chosen as` says why where others were within noise of the choice."""
    tables, alpha = document["tables"], document.get("alpha", 0.05)
    columns, same = varying(tables)
    noisy = any(c["tied_with"] for t in tables for r in t["ranges"] for c in r["cells"])
    body = []
    for table in document["tables"]:
        for row in table["ranges"]:
            high = "inf" if row["bytes_max"] is None else human_bytes(row["bytes_max"])
            span = f"{human_bytes(row['bytes_min'])}..{high}"
            for i, cell in enumerate(row["cells"]):
                runner = cell["runner_up"] or "-"
                body.append([*(table[c] if i == 0 else "" for c in columns), span if i == 0 else "",
                             human_bytes(cell["bytes_per_peer"]), shown(cell["algorithm"], cell["options"]),
                             f"{cell['value_us']:,.1f}",
                             runner + (" (within noise)" if runner in cell["tied_with"] else ""),
                             _percent(cell["margin"]), _versus(cell, alpha),
                             *([_chosen_as(cell)] if noisy else [])])
    overlap = any(t.get("timing") == OVERLAP for t in document["tables"])
    headers = [*columns, "range (B/peer)", "measured", "algorithm",
               f"{document['metric']} exposed us" if overlap else f"{document['metric']} us",
               "runner-up", "by", "vs native", *(["chosen as"] if noisy else [])]
    ranked = [f"Overlap tables rank by the exposed time, t_overall - t_compute per iteration ({document['metric']} "
              "over the iterations): how long the program waits for the exchange, after start, a compute phase the "
              "same for every algorithm at a point (compute_phase_us), with `tests` progress calls in it, and "
              "wait."] if overlap else []
    context = [f"Every table's {', '.join(same)}."] if same else []
    return "\n".join([*ranked, *context, tabulate(body, headers=headers, disable_numparse=True)])


def _versus(cell: dict[str, Any], alpha: float) -> str:
    said = _times(cell["speedup_vs_native"])
    p = cell.get("native_p")
    return said + (" (n.s.)" if p is not None and p >= alpha else "")


def _chosen_as(cell: dict[str, Any]) -> str:
    """Why the cell's choice, where others were within noise of it: the simplest of them, or the fastest."""
    return "" if not cell["tied_with"] else "the simplest" if cell["tie"] else "the fastest"


def _percent(margin: float | None) -> str:
    return "-" if margin is None else f"{margin * 100:+.1f}%"


def _times(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


# --- across launches, and in short ------------------------------------------------------

def winners_by_launch(directories: list[Path], metric: str = "mean", alpha: float = 0.05,
                      dtype: str | None = None) -> dict[tuple, list[str]]:
    """Each launch's winner per cell, (context, bytes per peer) -> labels in launch order (ReproMPI's point:
    one launch's ranking is one sample of the machine, not the machine)."""
    found: dict[tuple, list[str]] = {}
    for directory in directories:
        for table in decide([directory], metric, alpha, dtype)["tables"]:
            for row in table["ranges"]:
                for cell in row["cells"]:
                    found.setdefault((context_of(table), cell["bytes_per_peer"]), []).append(
                        shown(cell["algorithm"], cell["options"]))
    return found


def unstable(winners: dict[tuple, list[str]]) -> dict[tuple, Counter]:
    """The cells whose winner changed between launches, with how often each won."""
    return {cell: Counter(names) for cell, names in winners.items() if len(set(names)) > 1}


def summary(document: dict[str, Any]) -> list[str]:
    """One line per process count: each size range's choice, its speed-up over native and whether the rank test
    finds it, what is within noise of it and why it was chosen among them; an oversubscribed count says so."""
    alpha = document.get("alpha", 0.05)
    lines = []
    for table in document["tables"]:
        parts = [range_said(row, table.get("timing", ""), alpha) for row in table["ranges"]]
        crowded = crowding(document, table["nprocs"])
        lines.append(f"{where(table)}: " + "; ".join(parts) + (f" [{crowded}]" if crowded else ""))
    return lines + program_totals(document)


def range_said(row: dict[str, Any], timing: str, alpha: float) -> str:
    """A range's choice in words: `91..8191 pairwise (5.34x as fast as native, significant; within noise: bine,
    ring; chosen as the fastest; rests on one point, 1K)`."""
    label, cells = shown(row["algorithm"], row["options"]), row["cells"]
    high = "inf" if row["bytes_max"] is None else human_bytes(row["bytes_max"])
    tied = sorted({name for c in cells for name in c["tied_with"]})
    lone = [f"rests on one point, {human_bytes(cells[0]['bytes_per_peer'])}"] if one_point(row) else []
    if library_own(row["algorithm"], row["options"], timing):
        said = [f"the library's own; none of {', '.join(tied)} is significantly faster"] if tied else []
    else:
        said = [versus_native(cells, alpha)] if any(c["speedup_vs_native"] for c in cells) else []
        if tied:
            why = "the simplest of them" if any(c["tie"] for c in cells) else "the fastest"
            said.append(f"within noise: {', '.join(tied)}; chosen as {why}")
    said += lone
    return f"{human_bytes(row['bytes_min'])}..{high} {label}" + (f" ({'; '.join(said)})" if said else "")


def one_point(row: dict[str, Any], factor: float = 2.0) -> bool:
    """Whether a range rests on one measured size that it reaches more than `factor` beyond (below, down to its
    first byte above 0; above, up to its last byte below infinity): a guess `bench run --refine` can replace."""
    if len(row["cells"]) != 1:
        return False
    point = row["cells"][0]["bytes_per_peer"]
    below = 0 < row["bytes_min"] < point / factor
    above = row["bytes_max"] is not None and row["bytes_max"] > point * factor
    return below or above


def crossover_gaps(document: dict[str, Any], factor: float = 2.0) -> list[tuple[int, int]]:
    """Neighbouring measured sizes (smaller, larger) of a table whose choices differ and lie more than `factor` apart,
    where neither choice is within noise of the other at either size: where the crossover is not yet found. Gaps
    from 0 B are left out (0 B is a range of its own)."""
    gaps = set()
    for table in document["tables"]:
        cells = [c for row in table["ranges"] for c in row["cells"]]
        for small, large in zip(cells, cells[1:]):
            a, b = shown(small["algorithm"], small["options"]), shown(large["algorithm"], large["options"])
            lo, hi = small["bytes_per_peer"], large["bytes_per_peer"]
            if a != b and lo > 0 and hi > lo * factor and b not in small["tied_with"] and a not in large["tied_with"]:
                gaps.add((lo, hi))
    return sorted(gaps)


def midpoints(document: dict[str, Any], factor: float = 2.0) -> list[int]:
    """The sizes that bracket every crossover gap more closely: each gap's geometric midpoint, a whole number of
    the decision's elements, strictly inside the gap."""
    item = np.dtype(document.get("dtype") or "uint8").itemsize
    found = set()
    for lo, hi in crossover_gaps(document, factor):
        middle = int(round(math.sqrt(lo * hi) / item)) * item
        if lo < middle < hi:
            found.add(middle)
    return sorted(found)


def versus_native(cells: list[dict[str, Any]], alpha: float) -> str:
    """The range's speed-up over native and how many of its sizes the rank test finds it at."""
    gains = sorted(c["speedup_vs_native"] for c in cells if c["speedup_vs_native"])
    ratio = f"{gains[0]:.2f}x" if gains[0] == gains[-1] else f"{gains[0]:.2f}-{gains[-1]:.2f}x"
    tested = [c["native_p"] for c in cells if c.get("native_p") is not None]
    found = sum(p < alpha for p in tested)
    if not tested:
        return f"{ratio} as fast as native, untested (no samples)"
    if found == len(tested):
        return f"{ratio} as fast as native, significant"
    worst = max(tested)
    if not found:
        return f"{ratio} as fast as native by the mean, not significant (p={worst:.2g})"
    return f"{ratio} as fast as native, significant at {found} of {len(tested)} sizes"


def crowding(document: dict[str, Any], nprocs: int) -> str:
    """Where the runs of `nprocs` ranks had more ranks than cores, in words ('' where none had)."""
    hosts = {host: got for s in document.get("sources", []) for host, got in
             (s.get("oversubscribed") or {}).get(str(nprocs), {}).items()}
    if not hosts:
        return ""
    where_ = ", ".join(f"{got['ranks']} ranks on {got['cores']} cores of {host}" for host, got in sorted(hosts.items()))
    return f"oversubscribed ({where_}): these times are the scheduler's as much as the algorithms'"


def program_totals(document: dict[str, Any]) -> list[str]:
    """For a recorded program (its tables' cells carry recorded_calls), each algorithm's time in all of its calls
    (the metric x the times the program made the calls of each size, summed) fastest first, after the choices';
    an algorithm not measured at every size is left out."""
    programs: dict[str, list[dict[str, Any]]] = {}
    for table in document["tables"]:
        for row in table["ranges"]:
            programs.setdefault(table["workload"], []).extend(c for c in row["cells"] if c.get("recorded_calls"))
    lines = []
    for name, cells in ((name, cells) for name, cells in programs.items() if cells):
        totals: dict[str, float] = {}
        for label in {shown(c["algorithm"], c["options"]) for cell in cells for c in cell["candidates"]}:
            times = [cell["recorded_calls"] * c["value_us"] for cell in cells for c in cell["candidates"]
                     if shown(c["algorithm"], c["options"]) == label]
            if len(times) == len(cells):
                totals[label] = sum(times)
        chosen = sum(cell["recorded_calls"] * cell["value_us"] for cell in cells)
        ranked = ", ".join(f"{label} {us / 1e3:,.4g} ms" for label, us in sorted(totals.items(), key=lambda t: t[1]))
        lines.append(f"{name} ({counted(len(cells), 'size')}, calls made {sum(c['recorded_calls'] for c in cells)} "
                     f"times), {document['metric']} x times made: the choices {chosen / 1e3:,.4g} ms; {ranked}")
    return lines


def decided(directories: list[Path], metric: str = "mean", alpha: float = 0.05, dtype: str | None = None,
            output: Path | None = None, where: dict[str, str] | None = None) -> str:
    """`bench decide` as text: the table, how many cells went to a simpler algorithm, and the file written."""
    if output is not None and not Path(output).resolve().parent.is_dir():
        raise BadInput(f"--output {output}: its directory does not exist")
    document = decide(directories, metric, alpha, dtype, where)
    ties = sum(c["tie"] for t in document["tables"] for r in t["ranges"] for c in r["cells"])
    lines = [render(document), f"\n{counted(ties, 'cell')} went to a simpler algorithm not significantly slower "
                               f"(tie, alpha={alpha}).", *program_totals(document)]
    if output is not None:
        write_decision(document, Path(output))
        lines.append(f"wrote {output}")
    return "\n".join(lines)
