"""The topology study's tables: time per size on each topology, speedups, latency floors, winners.

Every number is a median (p50) of the timed iterations, in microseconds, from the runs of
`python -m bench topology-study` (one results directory per topology).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from statistics import median

from tabulate import tabulate

from a2a import fabric
from a2a.analysis import model
from a2a.errors import BadResults
from a2a.record.results import Row, label, read_rows
from a2a.units import human_bytes

STUDY_MANIFEST = "topology-study.json"  # in a study directory: the runs it planned, in order
FLOOR_FACTOR = 2.0  # an algorithm has left its latency floor where its p50 first exceeds this x the floor

Medians = dict[tuple[int, str], float]  # (bytes per peer, algorithm label) -> p50 us


def medians(rows: Iterable[Row]) -> Medians:
    """The p50 of every valid point, by size and algorithm."""
    return {(r.bytes_per_peer, label(r.algorithm, r.options)): r.t_p50_us
            for r in rows if r.valid and not math.isnan(r.t_p50_us)}


def sizes_of(table: Medians) -> list[int]:
    return sorted({size for size, _ in table})


def names_of(table: Medians) -> list[str]:
    return sorted({name for _, name in table})


def time_table(table: Medians) -> str:
    """Sizes down, algorithms across: p50 in microseconds."""
    names = names_of(table)
    body = [[human_bytes(s), *(table.get((s, n), math.nan) for n in names)] for s in sizes_of(table)]
    return tabulate(body, headers=["bytes/peer", *names], floatfmt=",.1f", missingval="-")


def speedup_table(base: Medians, other: Medians) -> str:
    """Per size and algorithm, base p50 / other p50 (above 1: the other topology is faster); and best vs best."""
    names = [n for n in names_of(base) if n in names_of(other)]
    body = []
    for size in sizes_of(base):
        ratios = [base.get((size, n), math.nan) / other.get((size, n), math.nan) for n in names]
        best = best_time(base, size) / best_time(other, size)
        body.append([human_bytes(size), *ratios, best])
    return tabulate(body, headers=["bytes/peer", *names, "best/best"], floatfmt=".2f", missingval="-")


def best_time(table: Medians, size: int) -> float:
    """The fastest algorithm's p50 at a size (nan if none ran)."""
    return min((t for (s, _), t in table.items() if s == size), default=math.nan)


def fastest(table: Medians, size: int) -> str | None:
    """The algorithm with the lowest p50 at a size (None if none ran)."""
    times = {n: t for (s, n), t in table.items() if s == size}
    return min(times, key=times.__getitem__) if times else None


def floor_exits(table: Medians) -> dict[str, tuple[float, int | None]]:
    """Per algorithm: its latency floor (p50 at the smallest size) and the first size above FLOOR_FACTOR x it."""
    out = {}
    for name in names_of(table):
        series = sorted((s, t) for (s, n), t in table.items() if n == name)
        floor = series[0][1]
        out[name] = (floor, next((s for s, t in series if t > FLOOR_FACTOR * floor), None))
    return out


def floor_table(tables: dict[str, Medians]) -> str:
    """Algorithms down, topologies across: the floor and where each algorithm leaves it."""
    exits = {topology: floor_exits(table) for topology, table in tables.items()}
    names = sorted({n for table in tables.values() for n in names_of(table)})
    body = []
    for name in names:
        line = [name]
        for topology in tables:
            floor, size = exits[topology].get(name, (math.nan, None))
            line.append(f"{floor:,.0f} us, leaves at {human_bytes(size)}" if size else
                        f"{floor:,.0f} us, stays" if not math.isnan(floor) else "-")
        body.append(line)
    return tabulate(body, headers=["algorithm", *tables])


def winner_table(tables: dict[str, Medians]) -> str:
    """Sizes down, topologies across: the fastest algorithm and its p50."""
    sizes = sorted({s for table in tables.values() for s in sizes_of(table)})
    body = []
    for size in sizes:
        line = [human_bytes(size)]
        for table in tables.values():
            best = fastest(table, size)
            line.append(f"{best} ({table[size, best]:,.0f})" if best else "-")
        body.append(line)
    return tabulate(body, headers=["bytes/peer", *tables])


def model_errors(runs: dict[str, list[Row]], base: str) -> dict[str, Medians]:
    """Per topology, per (size, algorithm): (predicted - measured) / measured of the p50.

    The model is fitted on the base topology's rows alone; on the others it predicts with
    the bandwidth terms scaled by the busiest-link load of their routes (a2a/analysis/contention.py).
    """
    fits = {label(f.algorithm, f.options): f for f in model.fit(runs[base]) if f.context == model.PLAIN}
    errors: dict[str, Medians] = {}
    for topology, rows in runs.items():
        valid = [r for r in rows if r.valid and r.t_p50_us > 0]
        if not valid:
            continue
        net = fabric.parse(topology, max(r.nnodes for r in valid))
        table: Medians = {}
        for row in valid:
            fit = fits.get(label(row.algorithm, row.options))
            if fit:
                predicted = fit.predict_on_fabric(model.row_placement(row), row.bytes_per_peer, net) * 1e6
                table[row.bytes_per_peer, label(row.algorithm, row.options)] = predicted / row.t_p50_us - 1
        errors[topology] = table
    return errors


def error_table(table: Medians) -> str:
    """Sizes down, algorithms across: signed relative error in percent, and the median |error| per algorithm."""
    names = names_of(table)
    body = [[human_bytes(s), *(f"{table[s, n]:+.0%}" if (s, n) in table else "-" for n in names)]
            for s in sizes_of(table)]
    typical = [f"{median(abs(t) for (_, n), t in table.items() if n == name):.0%}" for name in names]
    return tabulate(body + [["median |err|", *typical]], headers=["bytes/peer", *names])


def report(runs: dict[str, list[Row]], base: str = "switch") -> str:
    """Every table of the study; `runs` maps a topology spec to its rows, `base` is compared against."""
    tables = {topology: medians(rows) for topology, rows in runs.items()}
    parts = [f"{topology}: p50 per call, us\n{time_table(table)}" for topology, table in tables.items()]
    for topology, table in tables.items():
        if topology != base and base in tables:
            parts.append(f"speedup {topology} over {base} ({base} p50 / {topology} p50; above 1: "
                         f"{topology} is faster)\n{speedup_table(tables[base], table)}")
    parts.append(f"latency floor (p50 at the smallest size) and the first size whose p50 exceeds "
                 f"{FLOOR_FACTOR:g}x it\n{floor_table(tables)}")
    parts.append(f"fastest algorithm per size (p50 us)\n{winner_table(tables)}")
    try:
        errors = model_errors(runs, base)
    except BadResults as exc:
        return "\n\n".join(parts + [f"model check skipped: {exc}"])
    for topology, table in errors.items():
        how = "fitted here (in-sample)" if topology == base else f"fitted on {base}, busiest-link loads of {topology}"
        parts.append(f"model vs measured on {topology}, (predicted - measured) / measured of p50; "
                     f"{how}\n{error_table(table)}")
    return "\n\n".join(parts)


def study_entries(directory: Path) -> list[dict]:
    """The runs a study directory planned: name (its subdirectory), topology, title."""
    path = Path(directory) / STUDY_MANIFEST
    if not path.is_file():
        raise BadResults(f"{directory} has no {STUDY_MANIFEST}; it is not a topology-study directory")
    return json.loads(path.read_text())["runs"]


def study_runs(directory: Path) -> dict[str, list[Row]]:
    """The rows of every finished run of a study directory, by topology, in the study's order."""
    return {entry["topology"]: read_rows(Path(directory) / entry["name"]) for entry in study_entries(directory)
            if (Path(directory) / entry["name"] / "results.csv").is_file()}
