"""Decision tables: the best algorithm per process count and message size, read from results.

Every verdict is a2a.record.verdict's; the document's schema, reading and lookup live in a2a.record.decision. This
module reads results files only; it never imports MPI.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from itertools import takewhile
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from a2a.algos.facts import library_own, shown, simplicity
from a2a.algos.registry import known
from a2a.errors import BadInput, BadResults
from a2a.record import verdict
from a2a.record.decision import (
    CONTEXT_COLUMNS,
    SCHEMA,
    Cell,
    Contender,
    Decision,
    Range,
    Table,
    comparison_kept,
    context_dict,
    controls_native,
    ranges,
    rounded,
    varying,
    where,
    write_decision,
)
from a2a.record.results import (
    CONTROL,
    KEY_COLUMNS,
    OVERLAP,
    Row,
    Run,
    point_key,
    program_workload,
    read_meta,
    read_rounds,
    read_rows,
)
from a2a.record.stats import call_floor
from a2a.record.verdict import MARGIN, METRICS, Sample, metric_of
from a2a.units import counted, human_bytes

ROW_COLUMN = {"mean": "t_mean_us", "median": "t_p50_us", "p90": "t_p90_us", "p99": "t_p99_us",
              "max": "t_max_us"}


@dataclass(init=False)
class Candidate:
    """One measured point merged over every run that measured it, its samples with the launch and round of each."""

    context: tuple
    bytes_per_peer: int
    algorithm: str
    options: str
    samples: list[Sample]
    rows: list[Row]

    def __init__(self, context: tuple, bytes_per_peer: int, algorithm: str, options: str,
                 samples: Iterable[Sample | float] = (), rows: list[Row] | None = None) -> None:
        self.context, self.bytes_per_peer, self.algorithm, self.options = context, bytes_per_peer, algorithm, options
        # bare seconds (a caller that knows no rounds, such as validate) are one block of an unnamed launch
        self.samples = [s if isinstance(s, tuple) else ("", -1, float(s)) for s in samples]
        self.rows = [] if rows is None else rows

    @property
    def seconds(self) -> np.ndarray:
        """The samples' times, in seconds."""
        return np.array([s for _, _, s in self.samples], dtype=float)

    def value_us(self, metric: str) -> float:
        """The metric in microseconds: from the samples, else from the best-sampled row (an overlap row's exposed
        time, when it has one)."""
        if self.samples:
            return metric_of(self.seconds, metric) * 1e6
        row = max(self.rows, key=lambda r: r.iterations)
        if row.timing == OVERLAP and not math.isnan(row.t_exposed_us):
            return float(row.t_exposed_us)
        return float(getattr(row, ROW_COLUMN[metric]))

    def per_round(self, metric: str) -> verdict.Values:
        """The metric per (launch, round) in seconds; a point without samples is one block of its row's value."""
        return verdict.per_round(self.samples or [("", -1, self.value_us(metric) * 1e-6)], metric)


def mann_whitney_p(x: Iterable[float], y: Iterable[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation, tie and continuity corrected); kept for
    the verification of deploy files and tune until they judge by a2a.record.verdict."""
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
    """Whether a decision may choose it: not one that only replays a table's choices (auto), nor the control."""
    found = known(algorithm)
    return found is None or found.candidate


# --- reading results -------------------------------------------------------------------

def gather(directories: list[Path], dtype: str | None = None, where: dict[str, str] | None = None,
           force: bool = False) -> tuple[dict[tuple, Candidate], list[dict], str]:
    """Valid points of every run (those whose context columns are as `where` says; candidates and controls), merged
    by key, each sample with its launch (a record without launch stamps: its directory) and round; the runs'
    descriptions; the dtype. Runs of different MPI libraries or dtypes are refused unless `force` pools them."""
    if not directories:
        raise BadInput("give at least one results directory")
    stray = sorted(set(where or {}) - set(CONTEXT_COLUMNS))
    if stray:
        raise BadInput(f"--where {', '.join(stray)}: not a context column; accepted: {', '.join(CONTEXT_COLUMNS)}")
    points: dict[tuple, Candidate] = {}
    wrong: set[tuple] = set()
    sources = []
    for directory in map(Path, directories):
        run = Run(directory, read_rows(directory), meta=read_meta(directory))
        sources.append(source(run))
        timed = _launched(read_rounds(directory), str(directory))
        computed = _launched(read_rounds(directory, "compute"), str(directory)) \
            if any(r.timing == OVERLAP for r in run.rows) else {}
        for row in run.rows:
            key = _program_key(row, pooled=force and dtype is None)
            if "WRONG RESULT" in row.note:
                wrong.add(key)
            if not row.measured or not (candidate(row.algorithm) or row.algorithm == CONTROL) or \
                    any(str(getattr(row, k)) != v for k, v in (where or {}).items()):
                continue
            if key not in points:
                context = tuple(program_workload(row.workload) if c == "workload" else getattr(row, c)
                                for c in CONTEXT_COLUMNS)
                points[key] = Candidate(context, row.bytes_per_peer, row.algorithm, row.options)
            point = points[key]
            point.rows.append(row)
            point.samples += exposed(timed.get(point_key(row), []), computed.get(point_key(row)))
    points = {k: p for k, p in points.items() if k not in wrong}
    names = ", ".join(str(d) for d in directories)
    _one_library(sources, force)
    for column, option in (("timing", "--timing"), ("cache", "--cache")):
        modes = sorted({getattr(p.rows[0], column) for p in points.values()})
        if len(modes) > 1:
            raise BadResults(f"{names} mix {column} modes ({', '.join(modes)}); a decision compares points "
                             f"measured the same way: decide the runs of one {option} at a time")
    if not any(p.algorithm != CONTROL for p in points.values()):
        raise BadResults(f"no valid points in {names}: every point was skipped, refused or wrong")
    return _one_dtype(points, dtype, names, force), sources, _chosen_dtype(points, dtype)


def _launched(found: dict[tuple, list[Sample]], directory: str) -> dict[tuple, list[Sample]]:
    """Samples with their launch named: a record written before launch stamps is its directory's one launch."""
    return {key: [(launch or directory, round_, seconds) for launch, round_, seconds in samples]
            for key, samples in found.items()}


def exposed(overall: list[Sample], compute: list[Sample] | None) -> list[Sample]:
    """An overlap point's samples as the decision ranks them: per iteration, the overall time less the compute
    phase's (the time the program waits for the exchange; comparable since every contestant computes the same
    phase), in the iteration's round; the overall times where no compute times were kept."""
    if not compute or len(compute) != len(overall):
        return list(overall)
    return [(launch, round_, o - c) for (launch, round_, o), (_, _, c) in zip(overall, compute)]


def _program_key(row: Row, pooled: bool = False) -> tuple:
    """A row's point key, a recorded call's workload as its program's: the calls of a program at one size are one
    point (their samples pooled, as the same point's over runs), so a table is per program and process count;
    `pooled`: every dtype's point is one."""
    key = list(point_key(row))
    key[KEY_COLUMNS.index("workload")] = program_workload(row.workload)
    if pooled:
        key[KEY_COLUMNS.index("dtype")] = ""
    return tuple(key)


def _one_library(sources: list[dict[str, Any]], force: bool) -> None:
    """Refuse runs of different MPI libraries (their version texts' first lines) unless forced."""
    first: dict[str, str] = {}
    for found in sources:
        name = (found["mpi_library"] or "").strip().split("\n")[0]
        if name:
            first.setdefault(name, found["directory"])
    if len(first) > 1 and not force:
        (one, there), (other, here) = list(first.items())[:2]
        raise BadResults(f"{there} was measured with {one}, but {here} with {other}; decide one library's records "
                         "at a time, or give --force-mix to pool them")


def _one_dtype(points: dict[tuple, Candidate], dtype: str | None, names: str, force: bool) -> dict[tuple, Candidate]:
    found = sorted({p.rows[0].dtype for p in points.values()})
    if dtype is None:
        if len(found) > 1 and not force:
            raise BadResults(f"{names} mix points of dtypes {', '.join(found)}; a table is for one "
                             "dtype: choose with --dtype, or give --force-mix to pool them")
        return points
    chosen = {k: p for k, p in points.items() if p.rows[0].dtype == dtype}
    if not chosen:
        raise BadResults(f"no valid points of dtype {dtype} in {names}; found {', '.join(found)}")
    return chosen


def _chosen_dtype(points: dict[tuple, Candidate], dtype: str | None) -> str:
    """The dtype asked for, else the one found; pooled dtypes: the widest (a whole number of its elements is one of
    every narrower power-of-two width)."""
    return dtype or max({r.dtype for p in points.values() for r in p.rows}, key=lambda d: np.dtype(d).itemsize)


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
                  tied_with: list[str] | None = None, timing: str = "", native_p: float | None = None) -> Cell:
    """A table cell: ranked[chosen] of (algorithm, options, us) fastest first, its runner-up and its speed-up over the
    library's own under `timing` (when measured), with the Holm-adjusted p of its verdict against it (`native_p`)."""
    algorithm, options, value = ranked[chosen]
    others = [c for i, c in enumerate(ranked) if i != chosen]
    runner = others[0] if others else None
    native = next((us for a, o, us in ranked if library_own(a, o, timing)), None)
    return Cell(
        bytes_per_peer, algorithm, options, rounded(value), samples, tie=chosen != 0, tied_with=tuple(tied_with or ()),
        runner_up=shown(runner[0], runner[1]) if runner else None,
        runner_up_us=rounded(runner[2]) if runner else None,
        margin=rounded(runner[2] / value - 1.0) if runner and value > 0 else None,
        speedup_vs_native=rounded(native / value) if native is not None and value > 0 else None,
        native_p=None if native_p is None else rounded(native_p),
        candidates=tuple(Contender(a, o, rounded(us)) for a, o, us in ranked))


def decide_cell(points: list[Candidate], metric: str, alpha: float, margin: float = MARGIN,
                floor: float = 0.0) -> Cell:
    """Choose among a cell's points as a2a.record.verdict judges them: native unless a candidate is faster beyond
    the margin and the noise floor; then the simplest of those faster than native and not slower than the best.
    A cell the rule never judges (0 B, or a time below `floor`, the timer's, in seconds) keeps the library's own,
    its comparisons shown with their verdicts withheld. Candidates rank as the verdicts do (the median of their
    per-round values)."""
    timing = points[0].rows[0].timing
    contestants = [p for p in points if p.algorithm != CONTROL]
    native = next((p for p in contestants if library_own(p.algorithm, p.options, timing)), None)
    control = _control_of(points, native)
    values: dict[Hashable, verdict.Values] = {_name(p): p.per_round(metric) for p in contestants}
    judged = verdict.judge_cell(values, None if native is None else _name(native),
                                lambda name: preference(*_named(name)),
                                None if control is None else control.per_round(metric), margin, alpha)
    if verdict.unjudged_why(points[0].bytes_per_peer, map(verdict.level, values.values()), floor):
        judged = withheld(judged, None if native is None else _name(native))
    ranked = sorted(contestants, key=lambda p: (verdict.level(values[_name(p)]), preference(p.algorithm, p.options)))
    choice = next(p for p in ranked if _name(p) == judged.choice)
    against = judged.vs_native.get(judged.choice)
    cell = decision_cell(choice.bytes_per_peer, [(p.algorithm, p.options, p.value_us(metric)) for p in ranked],
                         ranked.index(choice), len(choice.samples), [shown(*_named(name)) for name in judged.tied_with],
                         timing, against.p if against and against.verdict != verdict.NOT_JUDGED else None)
    cell = with_verdicts(cell, judged, [_name(p) for p in ranked])
    made = {r.workload: r.recorded_calls for p in points for r in p.rows if r.recorded_calls}  # by recorded call
    return replace(cell, recorded_calls=sum(made.values())) if made else cell


def withheld(judged: verdict.CellVerdict, native: Hashable | None) -> verdict.CellVerdict:
    """A cell the rule never judges: the library's own kept (without it, the best), nothing within noise of it, every
    comparison shown with its verdict withheld."""
    return replace(judged, choice=judged.best if native is None else native, tied_with=[],
                   vs_best={k: verdict.not_judged(c) for k, c in judged.vs_best.items()},
                   vs_native={k: verdict.not_judged(c) for k, c in judged.vs_native.items()})


def with_verdicts(cell: Cell, judged: verdict.CellVerdict, names: list[tuple[str, str]]) -> Cell:
    """The cell with its verdicts (its candidates named in order, the verdicts' fastest first): each candidate's
    against the best and native, the choice's against native (its speed-up the verdict's ratio where tested), the
    runner-up's margin by the same ratios, the noise floor, rounds, launches; a cell never judged is no tie."""
    candidates = tuple(replace(e, vs_best=_said(judged.vs_best.get(name)), vs_native=_said(judged.vs_native.get(name)))
                       for e, name in zip(cell.candidates, names))
    against = judged.vs_native.get(judged.choice)
    cell = replace(cell, candidates=candidates, vs_native=_said(against),
                   noise_floor=None if judged.floor is None else rounded(judged.floor), rounds=judged.rounds,
                   launches=judged.launches)
    if against and against.verdict not in (verdict.UNTESTED, verdict.NOT_JUDGED):  # the verdict's, not the metric's
        cell = replace(cell, speedup_vs_native=rounded(1 / against.ratio))
    runner = next((name for name in names if name != judged.choice), None)
    if runner is not None:
        cell = replace(cell, margin=rounded(_over_best(judged, runner) / _over_best(judged, judged.choice) - 1))
    return replace(cell, tie=False) if never_judged(cell) else cell


def _over_best(judged: verdict.CellVerdict, name: Hashable) -> float:
    """A candidate's time over the cell's best as its verdict measured it (the median of per-round ratios)."""
    return 1.0 if name == judged.best else judged.vs_best[name].ratio


def never_judged(cell: Cell) -> bool:
    """Whether the rule withheld the cell's verdicts (0 B, or times below the timer's floor)."""
    return any(said is not None and said.verdict == verdict.NOT_JUDGED
               for e in cell.candidates for said in (e.vs_best, e.vs_native))


def unjudged_reason(cell: Cell) -> str:
    """Why a cell was never judged, in words: the rule's (a2a.record.verdict.unjudged_why) for 0 B and times no
    timer resolves; else the record's timer floor (the document keeps no floor to name)."""
    times = [e.value_us * 1e-6 for e in cell.candidates]
    return verdict.unjudged_why(cell.bytes_per_peer, times) or TIMER_FLOOR


TIMER_FLOOR = "below the timer's floor, as the record's harness measured it"  # why a cell of bytes is not judged


def timer_floor(metas: Iterable[dict[str, Any]], nprocs: int, timing: str) -> float:
    """The timer's floor (seconds) at `nprocs` ranks for `timing`: the largest by the harness each record (and each
    launch of it) measured (a2a.record.stats.call_floor); 0 where none measured it."""
    measured = [found for meta in metas for found in (meta.get("by_nprocs") or {}, *(
        (launch.get("by_nprocs") or {}) for launch in meta.get("launches", [])))]
    return max((call_floor(found[str(nprocs)].get("harness") or {}, timing) for found in measured
                if str(nprocs) in found), default=0.0)


def _name(point: Candidate) -> tuple[str, str]:
    return point.algorithm, point.options


def _named(name: Hashable) -> tuple[str, str]:
    """A candidate's name as a verdict hands it back (typed Hashable there): the (algorithm, options) of _name."""
    assert isinstance(name, tuple), name
    return name


def _said(comparison: verdict.Comparison | None) -> verdict.Comparison | None:
    return comparison_kept(comparison) if comparison else None


def _control_of(points: list[Candidate], native: Candidate | None) -> Candidate | None:
    """The cell's control of native in native's own form: its ratio to native is the cell's noise floor."""
    if native is None:
        return None
    return next((p for p in points if controls_native(p.algorithm, p.options, native.options)), None)


def ranked_and_tied(points: list[Candidate], metric: str, alpha: float) -> tuple[list[Candidate], list[Candidate]]:
    """A cell's points fastest first by the metric (equal ones by preference), and the rank test's tie set (the
    fastest and the points after it up to the first significantly slower): what a2a.analysis.validate reads until it
    judges by a2a.record.verdict."""
    ranked = sorted(points, key=lambda p: (p.value_us(metric), preference(p.algorithm, p.options)))
    best = ranked[0]
    return ranked, list(takewhile(lambda p: p is best or _tied(best, p, alpha), ranked))


def _tied(best: Candidate, other: Candidate, alpha: float) -> bool:
    if not best.samples or not other.samples:
        return False  # no samples, no test: the metric alone decides
    return mann_whitney_p(best.seconds, other.seconds) >= alpha


def decide(directories: list[Path], metric: str = "mean", alpha: float = 0.05, dtype: str | None = None,
           where: dict[str, str] | None = None, margin: float = MARGIN, force: bool = False) -> Decision:
    """Build the decision document from one or more results directories (their points in context `where`); each
    directory is a launch, or holds the launches its samples name."""
    if metric not in METRICS:
        raise BadInput(f"unknown metric {metric!r}; accepted: {', '.join(METRICS)}")
    if not 0 < alpha < 1:
        raise BadInput(f"alpha {alpha} must lie strictly between 0 and 1")
    if not 0 <= margin < 1:
        raise BadInput(f"margin {margin} must be at least 0 and below 1 (a fraction: 0.05 is 5 %)")
    points, sources, chosen_dtype = gather(directories, dtype, where, force)
    metas = [read_meta(Path(directory)) for directory in directories]
    by_cell: dict[tuple, list[Candidate]] = {}
    for point in points.values():
        by_cell.setdefault((point.context, point.bytes_per_peer), []).append(point)
    by_cell = {cell: found for cell, found in by_cell.items() if any(p.algorithm != CONTROL for p in found)}
    tables = []
    for context in sorted({c for c, _ in by_cell}):
        sizes = sorted(size for c, size in by_cell if c == context)
        floor = timer_floor(metas, context_dict(context)["nprocs"], by_cell[context, sizes[0]][0].rows[0].timing)
        cells = [decide_cell(by_cell[context, size], metric, alpha, margin, floor) for size in sizes]
        tables.append(Table(context_dict(context), ranges(cells)))
    libraries = sorted({s["mpi_library"] for s in sources if s["mpi_library"]})
    launches = max(c.launches or 0 for t in tables for c in t.cells)
    return Decision(
        SCHEMA, metric, alpha, tuple(tables), chosen_dtype, margin, verdict.statistic(metric, alpha, margin, launches),
        CONTEXT_COLUMNS, libraries[0] if len(libraries) == 1 else libraries or None,
        datetime.now(timezone.utc).isoformat(timespec="seconds"), tuple(sources))


# --- printing --------------------------------------------------------------------------

def render(document: Decision) -> str:
    """The table as text: one line per measured size, merged ranges marked; the verdicts' statistic once, the choice's
    speed over native with its interval, the cell's noise floor where it has a control, and why the choice where
    others were within noise of it."""
    tables, metric = document.tables, document.metric
    columns, same = varying([t.columns for t in tables])
    cells = document.cells
    noisy, floored = any(c.tied_with or c.tie for c in cells), any(c.noise_floor for c in cells)
    body = []
    for table in tables:
        for row in table.ranges:
            high = "inf" if row.bytes_max is None else human_bytes(row.bytes_max)
            span = f"{human_bytes(row.bytes_min)}..{high}"
            for i, cell in enumerate(row.cells):
                runner = cell.runner_up or "-"
                body.append([*(table.column(c) if i == 0 else "" for c in columns), span if i == 0 else "",
                             human_bytes(cell.bytes_per_peer), shown(cell.algorithm, cell.options),
                             f"{cell.value_us:,.1f}",
                             runner + (" (within noise)" if runner in cell.tied_with else ""),
                             _percent(cell.margin), _versus(cell),
                             *([_times(_spread(cell.noise_floor))] if floored else []),
                             *([_chosen_as(cell, table.column("timing"))] if noisy else [])])
    overlap = any(t.column("timing") == OVERLAP for t in tables)
    headers = [*columns, "range (B/peer)", "measured", "algorithm",
               f"{metric} exposed us" if overlap else f"{metric} us", "runner-up", "by", "vs native",
               *(["noise floor"] if floored else []), *(["chosen as"] if noisy else [])]
    ranked = [f"Overlap tables rank by the exposed time, t_overall - t_compute per iteration ({metric} "
              "over the iterations): how long the program waits for the exchange, after start, a compute phase the "
              "same for every algorithm at a point (compute_phase_us), with `tests` progress calls in it, and "
              "wait."] if overlap else []
    context = [f"Every table's {', '.join(same)}."] if same else []
    return "\n".join([*ranked, *context, tabulate(body, headers=headers, disable_numparse=True),
                      *_stated(document, floored)])


def _stated(document: Decision, floored: bool) -> list[str]:
    """The verdicts' statistic, and where no cell had a control, that the margin alone applies."""
    if document.statistic is None:
        return []
    floor = [] if floored else ["No cell has a control (the library's own under a second name): the noise floor is "
                                "not known, and the margin alone separates a verdict from a tie."]
    return [f"Verdicts: {document.statistic}.", *floor]


def _versus(cell: Cell) -> str:
    """The choice against native in the table: its speed and interval, untested where it has no verdict, and why
    where the rule never judges the cell."""
    if never_judged(cell):
        return f"not judged ({unjudged_reason(cell)})"
    said = cell.vs_native
    if not said:
        return "-" if not cell.speedup_vs_native else pace(1 / cell.speedup_vs_native)
    if said.verdict == verdict.UNTESTED:
        return f"{pace(said.ratio)} untested"
    return f"{pace(said.ratio)} ({_interval(said)})"


def pace(ratio: float) -> str:
    """A time over native's as speed: '1.31x' where faster, '2.30x slower' where slower (never a gain below 1)."""
    return f"{1 / ratio:.2f}x" if ratio <= 1 else f"{ratio:.2f}x slower"


def _interval(said: verdict.Comparison) -> str:
    """A comparison's interval as its words read it: speeds where faster or tied, times where slower."""
    low, high = _bounds(said)
    if said.verdict == verdict.SLOWER:
        return f"{low:.2f}-{high:.2f}"
    return f"{1 / high:.2f}-{1 / low:.2f}"


def _bounds(said: verdict.Comparison) -> tuple[float, float]:
    """A tested comparison's interval (only an untested one has none)."""
    assert said.low is not None and said.high is not None, f"an untested comparison has no interval: {said}"
    return said.low, said.high


def against_native(said: verdict.Comparison, metric: str) -> str:
    """A comparison with native in words: '1.31x as fast as native (1.22-1.41)', 'within noise of native
    (0.97-1.06)', '2.30x slower than native (2.10-2.52)', or by the metric alone, untested."""
    ratio, found = said.ratio, said.verdict
    pace = f"{1 / ratio:.2f}x as fast as native" if ratio <= 1 else f"{ratio:.2f}x slower than native"
    if found in (verdict.UNTESTED, verdict.NOT_JUDGED):
        return f"{pace} by the {metric}, {found}"
    return f"within noise of native ({_interval(said)})" if found == verdict.TIE else f"{pace} ({_interval(said)})"


def _spread(floor: float | None) -> float | None:
    """A noise floor as the factor identical schedules differed by (control faster or slower alike)."""
    return None if not floor else max(floor, 1 / floor)


LIBRARY_KEPT = "the library's own"


def _chosen_as(cell: Cell, timing: str) -> str:
    """Why the cell's choice, where others were within noise of it (or one faster by the metric was not chosen):
    the library's own, the simplest of them, or the fastest."""
    if not cell.tied_with and not cell.tie:
        return ""
    return LIBRARY_KEPT if library_own(cell.algorithm, cell.options, timing) else \
        "the simplest" if cell.tie else "the fastest"


def _percent(margin: float | None) -> str:
    return "-" if margin is None else f"{margin * 100:+.1f}%"


def _times(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


# --- across launches, and in short ------------------------------------------------------

def winners_by_launch(directories: list[Path], metric: str = "mean", alpha: float = 0.05,
                      dtype: str | None = None, margin: float = MARGIN) -> dict[tuple, list[str]]:
    """Each launch's winner per cell, (context, bytes per peer) -> labels in launch order (ReproMPI's point:
    one launch's ranking is one sample of the machine, not the machine)."""
    found: dict[tuple, list[str]] = {}
    for directory in directories:
        for table in decide([directory], metric, alpha, dtype, margin=margin).tables:
            for cell in table.cells:
                found.setdefault((table.context, cell.bytes_per_peer), []).append(shown(cell.algorithm, cell.options))
    return found


def unstable(winners: dict[tuple, list[str]]) -> dict[tuple, Counter]:
    """The cells whose winner changed between launches, with how often each won."""
    return {cell: Counter(names) for cell, names in winners.items() if len(set(names)) > 1}


def summary(document: Decision) -> list[str]:
    """One line per process count: each size range's choice, its speed over native with the interval, what is within
    noise of it and why it was chosen among them, the noise floor; an oversubscribed count says so. Then the program
    totals and the verdicts' statistic."""
    lines = []
    for table in document.tables:
        parts = [range_said(row, table.column("timing"), document.metric) for row in table.ranges]
        floors = [spread for c in table.cells if (spread := _spread(c.noise_floor))]
        notes = [f"noise floor up to {max(floors):.2f}x"] if floors else []
        notes += [crowded] if (crowded := crowding(document, table.nprocs)) else []
        lines.append(f"{where(table)}: " + "; ".join(parts) + "".join(f" [{note}]" for note in notes))
    stated = [f"verdicts: {document.statistic}"] if document.statistic is not None else []
    return lines + program_totals(document) + stated


def range_said(row: Range, timing: str, metric: str) -> str:
    """A range's choice in words: `91..8191 pairwise (1.31x as fast as native (1.22-1.41); within noise: bine, ring;
    chosen as the fastest; rests on one point, 1K)`."""
    label, cells = shown(row.algorithm, row.options), row.cells
    high = "inf" if row.bytes_max is None else human_bytes(row.bytes_max)
    tied = sorted({name for c in cells for name in c.tied_with})
    lone = [f"rests on one point, {human_bytes(cells[0].bytes_per_peer)}"] if one_point(row) else []
    if library_own(row.algorithm, row.options, timing):
        said = [why] if (why := kept(cells)) else []
    else:
        said = [versus_native(cells, metric)] if any(c.speedup_vs_native for c in cells) else []
        if tied:
            why = "the simplest of them" if any(c.tie for c in cells) else "the fastest"
            said.append(f"within noise: {', '.join(tied)}; chosen as {why}")
    said += lone
    return f"{human_bytes(row.bytes_min)}..{high} {label}" + (f" ({'; '.join(said)})" if said else "")


def kept(cells: Sequence[Cell]) -> str:
    """Why the library's own stays, in words: never judged (and why), untested (and why), or what is within noise
    of it ('' where every other candidate is slower)."""
    if cells and all(never_judged(c) for c in cells):
        return f"the library's own; not judged: {'; '.join(sorted({unjudged_reason(c) for c in cells}))}"
    if untested_why(cells):
        return f"the library's own; untested: {untested_why(cells)}"
    near: dict[str, list[verdict.Comparison]] = {}
    for cell in cells:
        for entry in cell.candidates:
            if entry.vs_native and entry.vs_native.verdict == verdict.TIE:
                near.setdefault(shown(entry.algorithm, entry.options), []).append(entry.vs_native)
    if not near:
        return ""
    named = [name + (f" ({_interval(said[0])})" if len(cells) == 1 else "") for name, said in sorted(near.items())]
    return f"the library's own; within noise of it: {', '.join(named)}"


def untested_why(cells: Sequence[Cell]) -> str:
    """Why none of these cells' comparisons has a verdict ('' where some has one)."""
    said = [e.vs_native for c in cells for e in c.candidates if e.vs_native]
    if not said or any(s.verdict != verdict.UNTESTED for s in said):
        return ""
    if all(not c.rounds for c in cells):
        return "no interleaved rounds (a record made before them): nothing is called faster, native stays"
    return f"fewer than {verdict.MIN_ROUNDS} rounds shared: nothing is called faster, native stays"


def one_point(row: Range, factor: float = 2.0) -> bool:
    """Whether a range rests on one measured size that it reaches more than `factor` beyond (below, down to its
    first byte above 0; above, up to its last byte below infinity): a guess `bench run --refine` can replace."""
    if len(row.cells) != 1:
        return False
    point = row.cells[0].bytes_per_peer
    below = 0 < row.bytes_min < point / factor
    above = row.bytes_max is not None and row.bytes_max > point * factor
    return below or above


def crossover_gaps(document: Decision, factor: float = 2.0) -> list[tuple[int, int]]:
    """Neighbouring measured sizes (smaller, larger) of a table whose choices differ and lie more than `factor` apart,
    where neither choice is within noise of the other at either size: where the crossover is not yet found. Gaps
    from 0 B are left out (0 B is a range of its own)."""
    gaps = set()
    for table in document.tables:
        cells = table.cells
        for small, large in zip(cells, cells[1:]):
            a, b = shown(small.algorithm, small.options), shown(large.algorithm, large.options)
            lo, hi = small.bytes_per_peer, large.bytes_per_peer
            if a != b and lo > 0 and hi > lo * factor and b not in small.tied_with and a not in large.tied_with:
                gaps.add((lo, hi))
    return sorted(gaps)


def midpoints(document: Decision, factor: float = 2.0) -> list[int]:
    """The sizes that bracket every crossover gap more closely: each gap's geometric midpoint, a whole number of
    the decision's elements, strictly inside the gap."""
    item = np.dtype(document.dtype or "uint8").itemsize
    found = set()
    for lo, hi in crossover_gaps(document, factor):
        middle = int(round(math.sqrt(lo * hi) / item)) * item
        if lo < middle < hi:
            found.add(middle)
    return sorted(found)


def versus_native(cells: Sequence[Cell], metric: str) -> str:
    """The range's speed over native with its intervals: one cell's in words, several cells' speeds and intervals
    from the lowest to the highest; by the metric alone where the verdict is untested (or the table predates
    verdicts)."""
    said = [c.vs_native for c in cells if c.vs_native]
    tested = [s for s in said if s.verdict not in (verdict.UNTESTED, verdict.NOT_JUDGED)]
    if len(said) == 1:
        return against_native(said[0], metric)
    if not tested:
        gains = sorted(c.speedup_vs_native for c in cells if c.speedup_vs_native)
        return f"{_speeds(gains[0], gains[-1])} by the {metric}" + (", untested" if said else "")
    speeds = sorted(1 / s.ratio for s in tested)
    lows, highs = (1 / _bounds(s)[1] for s in tested), (1 / _bounds(s)[0] for s in tested)
    untested_ = f", untested at {len(said) - len(tested)} of {len(said)} sizes" if len(tested) < len(said) else ""
    return f"{_speeds(speeds[0], speeds[-1])} (intervals from {min(lows):.2f} to {max(highs):.2f}){untested_}"


def _speeds(low: float, high: float) -> str:
    """Speeds over native from `low` to `high` in words, a slower one as its time: '1.20-1.31x as fast as native',
    '4.40x slower than native', 'from 2.00x slower than native to 1.20x as fast as native'."""
    def said(speed: float) -> str:
        return pace(1 / speed) + (" as fast as native" if speed >= 1 else " than native")

    if low == high:
        return said(low)
    if low >= 1:
        return f"{low:.2f}-{high:.2f}x as fast as native"
    if high < 1:
        return f"{1 / high:.2f}-{1 / low:.2f}x slower than native"
    return f"from {said(low)} to {said(high)}"


def crowding(document: Decision, nprocs: int) -> str:
    """Where the runs of `nprocs` ranks had more ranks than cores, in words ('' where none had)."""
    hosts = {host: got for s in document.sources for host, got in
             (s.get("oversubscribed") or {}).get(str(nprocs), {}).items()}
    if not hosts:
        return ""
    where_ = ", ".join(f"{got['ranks']} ranks on {counted(got['cores'], 'core')} of {host}"
                       for host, got in sorted(hosts.items()))
    return f"oversubscribed ({where_}): these times are the scheduler's as much as the algorithms'"


def program_totals(document: Decision) -> list[str]:
    """For a recorded program (its tables' cells carry recorded_calls), each algorithm's time in all of its calls
    (the metric x the times the program made the calls of each size, summed) fastest first, after the choices';
    an algorithm not measured at every size is left out."""
    programs: dict[str, list[Cell]] = {}
    for table in document.tables:
        programs.setdefault(table.column("workload"), []).extend(c for c in table.cells if c.recorded_calls)
    lines = []
    for name, cells in ((name, cells) for name, cells in programs.items() if cells):
        totals: dict[str, float] = {}
        for label in {shown(c.algorithm, c.options) for cell in cells for c in cell.candidates}:
            times = [(cell.recorded_calls or 0) * c.value_us for cell in cells for c in cell.candidates
                     if shown(c.algorithm, c.options) == label]
            if len(times) == len(cells):
                totals[label] = sum(times)
        chosen = sum((cell.recorded_calls or 0) * cell.value_us for cell in cells)
        ranked = ", ".join(f"{label} {us / 1e3:,.4g} ms" for label, us in sorted(totals.items(), key=lambda t: t[1]))
        lines.append(f"{name} ({counted(len(cells), 'size')}, calls made {sum(c.recorded_calls or 0 for c in cells)} "
                     f"times), {document.metric} x times made: the choices {chosen / 1e3:,.4g} ms; {ranked}")
    return lines


def decided(directories: list[Path], metric: str = "mean", alpha: float = 0.05, dtype: str | None = None,
            output: Path | None = None, where: dict[str, str] | None = None, margin: float = MARGIN,
            force: bool = False) -> str:
    """`bench decide` as text: the table, how many cells went to a simpler algorithm or stayed untested, and the
    file written."""
    if output is not None and not Path(output).resolve().parent.is_dir():
        raise BadInput(f"--output {output}: its directory does not exist")
    document = decide(directories, metric, alpha, dtype, where, margin, force)
    cells = document.cells
    why = Counter(_chosen_as(c, t.column("timing")) for t in document.tables for c in t.cells)
    lines = [render(document), f"\n{counted(why['the simplest'], 'cell')} went to a simpler algorithm and "
                               f"{counted(why[LIBRARY_KEPT], 'cell')} kept the library's own, within noise of the "
                               f"fastest (alpha {alpha}, margin {margin * 100:g} %)."]
    blind = [c for c in cells if untested_why([c])]
    if blind:
        lines.append(f"{counted(len(blind), 'cell')} untested: {untested_why(blind)}.")
    withheld_ = [c for c in cells if never_judged(c)]
    if withheld_:
        lines.append(f"{counted(len(withheld_), 'cell')} not judged, the library's own kept: "
                     f"{'; '.join(sorted({unjudged_reason(c) for c in withheld_}))}.")
    lines += program_totals(document)
    if output is not None:
        write_decision(document, Path(output))
        lines.append(f"wrote {output}")
    return "\n".join(lines)
