"""How far a simulated record is from a measured one, point by point and in the algorithms' order; per cell, whether
the simulated best is one the measurement cannot tell from its best (a2a.analysis.decide's tie set)."""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from a2a.analysis.decide import Candidate, preference, ranked_and_tied
from a2a.errors import BadResults
from a2a.record.decision import parse_options
from a2a.record.meta import backend_of
from a2a.record.results import NATIVE, Row, load, point_key, short_label
from a2a.record.verdict import MARGIN
from a2a.units import human_bytes

# the simulated native that stands for the measured library's own MPI_Alltoall
NATIVE_SELECTOR = {"MPICH": "selector=mpich", "Open MPI": "selector=ompi"}
ALPHA = 0.05  # of the rank test that ties a cell's measured points, as `bench decide`'s default
TIE_METRIC = "median"  # the points of a cell are ranked by their median, the p50 the errors are taken against
TARGET_ERROR = 0.25  # the median |error| a cell should stay within (docs/simulation.md)
RESOLUTION_US = 1e-3  # of a simulated time: SMPI prints nanoseconds (a2a.simulate.platforms.TIME_SCALE)


def _series(row: Row) -> tuple:
    """What a measured and a simulated point share: the shape of the exchange, not how it was timed."""
    return (row.nprocs, row.collective, row.workload, row.mesh, row.groups, row.bytes_per_peer)


def _placed(row: Row, options: str) -> str:
    """A variant's options with its ranks per node as the job ran them: `ppn=0` (found at run time) and a `ppn` larger
    than the job (one node) both stand for the row's own, so a measurement and a simulation given --ppn pair up."""
    given = parse_options(options)
    if "ppn" not in given:
        return options
    given["ppn"] = str(min(int(given["ppn"]) or row.ppn, row.nprocs))
    return ";".join(f"{k}={v}" for k, v in sorted(given.items()))


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
    # by (series, algorithm, options: None where native's are not known, tests)
    simulated_at: dict[tuple[tuple, str, str | None, str], Row] = {
        (_series(r), r.algorithm, _placed(r, r.options), r.tests): r for r in model.rows if r.measured}
    rows = []
    for row in (r for r in truth.rows if r.measured):
        options = native if row.algorithm == NATIVE else _placed(row, row.options)
        twin = simulated_at.get((_series(row), row.algorithm, options, row.tests))
        if twin is None:
            continue
        sim = twin.t_p50_us
        rows.append({"nprocs": row.nprocs, "bytes_per_peer": row.bytes_per_peer, "label": short_label(row, defaults),
                     "simulated_us": sim, "min_us": row.t_min_us, "p50_us": row.t_p50_us,
                     "error_min": sim / row.t_min_us - 1, "error_p50": sim / row.t_p50_us - 1,
                     "stalls": row.stalls, "tcp_timeouts": row.tcp_timeouts,
                     "measured": Candidate((), row.bytes_per_peer, row.algorithm, row.options,
                                           list(truth.samples.get(point_key(row), [])), [row]),
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


def orderings(rows: list[dict[str, Any]], alpha: float = ALPHA) -> list[dict[str, Any]]:
    """Per process count and size: does the simulation rank the algorithms as the measurement does, and is its best
    one the measurement cannot tell from the measured best (Mann-Whitney on the samples at `alpha`, as `bench decide`
    ties)? The simulated best is every variant at the smallest simulated time, to the simulator's resolution (the
    same schedule replays to the same time): right if one of them is in the measured tie set."""
    cells: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row["nprocs"], row["bytes_per_peer"]), []).append(row)
    summary = []
    for (nprocs, size), cell in sorted(cells.items()):
        simulated, measured = [r["simulated_us"] for r in cell], [r["p50_us"] for r in cell]
        ranked, tied = ranked_and_tied([r["measured"] for r in cell], TIE_METRIC, alpha)
        label = {id(r["measured"]): r["label"] for r in cell}
        fastest = min(simulated)
        best = sorted((r for r in cell if r["simulated_us"] - fastest <= RESOLUTION_US),
                      key=lambda r: preference(r["measured"].algorithm, r["measured"].options))
        summary.append({"nprocs": nprocs, "bytes_per_peer": size, "algorithms": len(cell),
                        "median_abs_error_p50": float(np.median([abs(r["error_p50"]) for r in cell])),
                        "spearman": spearman(simulated, measured),
                        "simulated_best": " = ".join(r["label"] for r in best), "measured_best": label[id(ranked[0])],
                        "tie_set": [label[id(p)] for p in tied],
                        "right": any(p is r["measured"] for p in tied for r in best)})
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
    cells = orderings(rows)
    summary = tabulate(
        [[s["nprocs"], human_bytes(s["bytes_per_peer"]), s["algorithms"], f"{s['median_abs_error_p50']:.0%}",
          "-" if math.isnan(s["spearman"]) else f"{s['spearman']:+.2f}", s["simulated_best"], s["measured_best"],
          ", ".join(s["tie_set"]), "right" if s["right"] else "wrong"] for s in cells],
        headers=["nprocs", "bytes/peer", "algorithms", "median |error| vs p50", "rank correlation",
                 "simulated best", "measured best", "measured tie set", "simulated best is"], disable_numparse=True)
    said = ("; overlap: OSU's figure, simulated (messages move by themselves, rounds posted at start and wait) "
            "against measured, the times overall ones") if overlap else ""
    return f"{points}\n\n{summary}\n{verdict(cells)}\n(error = simulated / measured - 1; rank correlation: " \
           "Spearman's, over the algorithms of the cell, simulated against measured p50; tie set: the measured " \
           f"points the rank test at alpha {ALPHA} cannot tell from the best, as bench decide ties{said})"


def verdict(cells: list[dict[str, Any]]) -> str:
    """One line over every cell: how many have the simulated best in the measured tie set, and how many stay within
    TARGET_ERROR."""
    errors = [c["median_abs_error_p50"] for c in cells]
    within = sum(e <= TARGET_ERROR for e in errors)
    return (f"{sum(c['right'] for c in cells)} of {len(cells)} cells have the simulated best in the measured tie set; "
            f"{within} of {len(cells)} have a median |error| of {TARGET_ERROR:.0%} or less "
            f"(from {min(errors):.0%} to {max(errors):.0%})")


# --- one simulator against another: the analytical backend against SimGrid ---------------------------------------

DISAGREE = 2.0  # a time ratio beyond which (either way) a point is a disagreement to explain


def _shape(row: Row) -> tuple:
    """What a SimGrid point and an analytical one share: the exchange and the platform it ran on."""
    return (*_series(row), row.platform, row.algorithm, row.options)


def against_simgrid(simgrid: Path, analytical: Path, margin: float = MARGIN) -> list[dict[str, Any]]:
    """Every point both records simulated: SimGrid's time, the analytical one (and congestion-unaware's, from
    analytical.csv) and their ratio; per cell (process count and size), SimGrid's tie set (its best and every
    variant within `margin` of it, the smallest difference bench decide gives a verdict) and whether the analytical
    best is in it."""
    reference, model = load(simgrid), load(analytical)
    if backend_of(reference.meta) != "simgrid" or backend_of(model.meta) != "analytical":
        raise BadResults(f"{simgrid} must be a SimGrid record (bench simulate) and {analytical} an analytical one "
                         "(bench simulate --backend analytical)")
    unaware = {(int(r["nprocs"]), r["algorithm"], r["options"], int(r["bytes_per_peer"]), r["mesh"], r["groups"],
                r["workload"]): float(r["unaware_us"]) for r in _sidecar(analytical)}
    timed_at = {_shape(r): r for r in model.rows if r.measured}
    rows = []
    for row in (r for r in reference.rows if r.measured):
        twin = timed_at.get(_shape(row))
        if twin is None:
            continue
        rows.append({"platform": row.platform, "nprocs": row.nprocs, "bytes_per_peer": row.bytes_per_peer,
                     "label": short_label(row, reference.meta.get("option_defaults")), "algorithm": row.algorithm,
                     "options": row.options, "simgrid_us": row.t_p50_us, "analytical_us": twin.t_p50_us,
                     "ratio": twin.t_p50_us / row.t_p50_us,
                     "unaware_us": unaware.get((row.nprocs, row.algorithm, row.options, row.bytes_per_peer,
                                                row.mesh, row.groups, row.workload), math.nan)})
    if not rows:
        raise BadResults(f"no point of {simgrid} was timed in {analytical}: simulate the same platform, process "
                         "counts, sizes and algorithms with both backends")
    return sorted(rows, key=lambda r: (r["platform"], r["nprocs"], r["bytes_per_peer"], r["label"]))


def _sidecar(directory: Path) -> list[dict[str, str]]:
    """The rows of an analytical record's analytical.csv, both variants' times (a2a.simulate.analytical_run)."""
    path = Path(directory) / "analytical.csv"
    if not path.exists():
        return []
    with path.open(newline="") as source:
        return list(csv.DictReader(source))


def backend_cells(rows: list[dict[str, Any]], margin: float = MARGIN) -> list[dict[str, Any]]:
    """Per platform, process count and size: SimGrid's best and tie set, the analytical best, whether it is in it."""
    cells: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row["platform"], row["nprocs"], row["bytes_per_peer"]), []).append(row)
    found = []
    for (platform, nprocs, size), cell in sorted(cells.items()):
        fastest = min(r["simgrid_us"] for r in cell)
        tied = [r for r in cell if r["simgrid_us"] <= fastest * (1 + margin)]
        quickest = min(r["analytical_us"] for r in cell)
        best = sorted((r for r in cell if r["analytical_us"] - quickest <= RESOLUTION_US),
                      key=lambda r: preference(r["algorithm"], r["options"]))
        found.append({"platform": platform, "nprocs": nprocs, "bytes_per_peer": size, "algorithms": len(cell),
                      "median_abs_ratio": float(np.median([abs(r["ratio"] - 1) for r in cell])),
                      "spearman": spearman([r["simgrid_us"] for r in cell], [r["analytical_us"] for r in cell]),
                      "analytical_best": " = ".join(r["label"] for r in best),
                      "tie_set": [r["label"] for r in sorted(tied, key=lambda r: r["simgrid_us"])],
                      "right": any(r in tied for r in best)})
    return found


def render_backends(rows: list[dict[str, Any]], margin: float = MARGIN) -> str:
    """The point table, the cells, one line per platform, and every disagreement beyond DISAGREE."""
    points = tabulate(
        [[r["platform"], r["nprocs"], human_bytes(r["bytes_per_peer"]), r["label"], f"{r['simgrid_us']:,.1f}",
          f"{r['analytical_us']:,.1f}", f"{r['ratio']:.2f}", f"{r['unaware_us']:,.1f}"] for r in rows],
        headers=["platform", "nprocs", "bytes/peer", "algorithm", "SimGrid us", "analytical us", "ratio",
                 "unaware us"], disable_numparse=True)
    cells = backend_cells(rows, margin)
    summary = tabulate(
        [[c["platform"], c["nprocs"], human_bytes(c["bytes_per_peer"]), c["algorithms"],
          f"{c['median_abs_ratio']:.0%}", "-" if math.isnan(c["spearman"]) else f"{c['spearman']:+.2f}",
          c["analytical_best"], ", ".join(c["tie_set"]), "yes" if c["right"] else "NO"] for c in cells],
        headers=["platform", "nprocs", "bytes/peer", "algorithms", "median |ratio-1|", "rank correlation",
                 "analytical best", f"SimGrid tie set (within {margin:.0%})", "in it"], disable_numparse=True)
    far = [r for r in rows if not 1 / DISAGREE <= r["ratio"] <= DISAGREE]
    listed = "\n".join(f"  {r['platform']} {r['nprocs']} ranks {human_bytes(r['bytes_per_peer'])} {r['label']}: "
                       f"SimGrid {r['simgrid_us']:,.1f} us, analytical {r['analytical_us']:,.1f} us "
                       f"({r['ratio']:.2f}x)" for r in far)
    return (f"{points}\n\n{summary}\n{backend_verdict(rows, cells)}\n"
            f"{len(far)} points differ by more than {DISAGREE:g}x{':' if far else '.'}\n{listed}".rstrip() +
            "\n(ratio = analytical / SimGrid; unaware: the congestion-unaware analytical time, analytical.csv)")


def backend_verdict(rows: list[dict[str, Any]], cells: list[dict[str, Any]]) -> str:
    """Per platform: cells whose analytical best is in SimGrid's tie set, and the median |ratio - 1| of its points."""
    lines = []
    for platform in sorted({c["platform"] for c in cells}):
        mine = [c for c in cells if c["platform"] == platform]
        ratios = [abs(r["ratio"] - 1) for r in rows if r["platform"] == platform]
        right = sum(c["right"] for c in mine)
        lines.append(f"{platform}: analytical best in SimGrid's tie set in {right} of {len(mine)} cells "
                     f"({right / len(mine):.0%}); median |ratio - 1| {float(np.median(ratios)):.0%} over "
                     f"{len(ratios)} points")
    return "\n".join(lines)


def draw_backends(rows: list[dict[str, Any]], path: Path) -> Path:
    """One panel per platform: each point's analytical time against SimGrid's (log-log), the diagonal and the 2x band,
    a marker per size."""
    from a2a.analysis.plot import pyplot

    plt = pyplot()
    platforms = sorted({r["platform"] for r in rows})
    figure, axes = plt.subplots(1, len(platforms), figsize=(4.2 * len(platforms), 4.2), squeeze=False)
    for axis, platform in zip(axes[0], platforms):
        mine = [r for r in rows if r["platform"] == platform]
        low = min(min(r["simgrid_us"], r["analytical_us"]) for r in mine) / 2
        high = max(max(r["simgrid_us"], r["analytical_us"]) for r in mine) * 2
        axis.plot([low, high], [low, high], color="black", linewidth=0.8)
        axis.fill_between([low, high], [low / DISAGREE, high / DISAGREE], [low * DISAGREE, high * DISAGREE],
                          color="grey", alpha=0.15, label=f"within {DISAGREE:g}x")
        for marker, size in zip("os^vD", sorted({r["bytes_per_peer"] for r in mine})):
            at = [r for r in mine if r["bytes_per_peer"] == size]
            axis.scatter([r["simgrid_us"] for r in at], [r["analytical_us"] for r in at], marker=marker, s=18,
                         label=f"{human_bytes(size)} per peer")
        axis.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high), title=platform,
                 xlabel="SimGrid (us)", ylabel="analytical, congestion-aware (us)")
        axis.legend(fontsize=7)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
