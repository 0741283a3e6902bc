"""How far a simulated record is from a measured one, point by point and in the algorithms' order."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from a2a.errors import BadResults
from a2a.record.meta import backend_of
from a2a.record.results import NATIVE, Row, load, short_label
from a2a.units import human_bytes

# the simulated native that stands for the measured library's own MPI_Alltoall
NATIVE_SELECTOR = {"MPICH": "selector=mpich", "Open MPI": "selector=ompi"}


def _series(row: Row) -> tuple:
    """What a measured and a simulated point share: the shape of the exchange, not how it was timed."""
    return (row.nprocs, row.collective, row.workload, row.mesh, row.groups, row.bytes_per_peer)


def _native_options(meta: dict[str, Any]) -> str | None:
    library = str(meta.get("mpi_library", ""))
    return next((options for name, options in NATIVE_SELECTOR.items() if library.startswith(name)), None)


def validate(measured: Path, simulated: Path) -> list[dict[str, Any]]:
    """Every point both records hold: simulated time, measured min and p50, and the relative errors; for overlap
    records (their times the overall ones), the overlap each gives too, point by point at the same test count."""
    truth, model = load(measured), load(simulated)
    if backend_of(model.meta) != "simgrid" and not any(r.timing == "simulated" for r in model.rows):
        raise BadResults(f"{simulated} is not a `bench simulate` record")
    overlap = {r.timing == "overlap" for r in truth.rows} | {r.timing == "overlap" for r in model.rows}
    if len(overlap) > 1:
        raise BadResults("one record is an overlap record and the other is not: validate an overlap simulation "
                         "(bench simulate --timing overlap) against an overlap measurement (bench run --timing "
                         "overlap --tests 0)")
    native, defaults = _native_options(truth.meta), truth.meta.get("option_defaults")
    simulated_at = {(_series(r), r.algorithm, r.options, r.tests): r for r in model.rows if r.measured}
    rows = []
    for row in (r for r in truth.rows if r.measured):
        options = native if row.algorithm == NATIVE else row.options
        twin = simulated_at.get((_series(row), row.algorithm, options, row.tests))
        if twin is None:
            continue
        sim = twin.t_p50_us
        rows.append({"nprocs": row.nprocs, "bytes_per_peer": row.bytes_per_peer, "label": short_label(row, defaults),
                     "simulated_us": sim, "min_us": row.t_min_us, "p50_us": row.t_p50_us,
                     "error_min": sim / row.t_min_us - 1, "error_p50": sim / row.t_p50_us - 1,
                     "stalls": row.stalls, "tcp_timeouts": row.tcp_timeouts,
                     **({"simulated_overlap": twin.overlap_osu_pct, "measured_overlap": row.overlap_osu_pct}
                        if row.timing == "overlap" else {})})
    if not rows:
        raise BadResults(f"no point of {measured} was simulated in {simulated}: simulate the same process counts, "
                         "sizes and algorithms (native pairs with native:selector=mpich or ompi, by the library "
                         "that measured)")
    return sorted(rows, key=lambda r: (r["nprocs"], r["bytes_per_peer"], r["label"]))


def spearman(x: list[float], y: list[float]) -> float:
    """Rank correlation of two equally long lists (average ranks for ties)."""
    if len(x) < 2:
        return math.nan
    rx, ry = (_ranks(np.asarray(v, float)) for v in (x, y))
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    order = values.argsort(kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=float)
    for value in np.unique(values):  # ties share their mean rank
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def orderings(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per process count and size: does the simulation rank the algorithms as the measurement does?"""
    cells: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row["nprocs"], row["bytes_per_peer"]), []).append(row)
    summary = []
    for (nprocs, size), cell in sorted(cells.items()):
        simulated, measured = [r["simulated_us"] for r in cell], [r["p50_us"] for r in cell]
        summary.append({"nprocs": nprocs, "bytes_per_peer": size, "algorithms": len(cell),
                        "median_abs_error_p50": float(np.median([abs(r["error_p50"]) for r in cell])),
                        "spearman": spearman(simulated, measured),
                        "simulated_best": cell[int(np.argmin(simulated))]["label"],
                        "measured_best": cell[int(np.argmin(measured))]["label"]})
    return summary


def render_validation(rows: list[dict[str, Any]]) -> str:
    """The point table, then the per-size summary of errors and orderings."""
    overlap = "simulated_overlap" in rows[0]
    points = tabulate(
        [[r["nprocs"], human_bytes(r["bytes_per_peer"]), r["label"], f"{r['simulated_us']:,.1f}",
          f"{r['min_us']:,.1f}", f"{r['p50_us']:,.1f}", f"{r['error_min']:+.0%}", f"{r['error_p50']:+.0%}",
          r["stalls"], "-" if r["tcp_timeouts"] is None else r["tcp_timeouts"],
          *([f"{r['simulated_overlap']:.0f}", f"{r['measured_overlap']:.0f}"] if overlap else [])] for r in rows],
        headers=["nprocs", "bytes/peer", "algorithm", "simulated us", "measured min us", "measured p50 us",
                 "vs min", "vs p50", "stalls", "tcp timeouts",
                 *(["simulated overlap %", "measured overlap %"] if overlap else [])], disable_numparse=True)
    summary = tabulate(
        [[s["nprocs"], human_bytes(s["bytes_per_peer"]), s["algorithms"], f"{s['median_abs_error_p50']:.0%}",
          "-" if math.isnan(s["spearman"]) else f"{s['spearman']:+.2f}", s["simulated_best"], s["measured_best"]]
         for s in orderings(rows)],
        headers=["nprocs", "bytes/peer", "algorithms", "median |error| vs p50", "rank correlation",
                 "simulated best", "measured best"], disable_numparse=True)
    said = ("; overlap: OSU's figure, simulated (messages move by themselves, rounds posted at start and wait) "
            "against measured, the times overall ones") if overlap else ""
    return f"{points}\n\n{summary}\n(error = simulated / measured - 1; rank correlation: Spearman's, over the " \
           f"algorithms of the cell, simulated against measured p50{said})"
