"""Result rows as text: the seed mail's table (avg, std, min, max, `!` on stalls), the TPU benchmark's, CSV, JSON."""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Iterable

import numpy as np
from tabulate import tabulate

from a2a.record import verdict
from a2a.record.decision import controls_native
from a2a.record.results import (
    CALL,
    COLUMNS,
    FAILED,
    NATIVE,
    Defaults,
    Row,
    load,
    point_key,
    read_rounds,
    short_label,
)
from a2a.record.stalls import explain
from a2a.units import counted, human_bytes


def _us(value: float) -> str:
    return "" if math.isnan(value) else f"{value:,.1f}" if value < 1e5 else f"{value:,.0f}"


def flag(row: Row) -> str:
    """'!' for a point that stalled, 'INVALID' for a wrong result or too few valid iterations, 'skipped' or
    'refused' as noted."""
    if row.note.startswith(("skipped", "refused")):
        return row.note.split(":")[0]
    if not row.valid:
        return "INVALID"
    return "!" if row.stalls else ""


def table(rows: Iterable[Row], defaults: Defaults | None = None, fmt: str = "simple") -> str:
    """One process count's (or any) rows as a text table, sizes ascending, algorithms by name."""
    rows = sorted(rows, key=lambda r: (r.nprocs, r.bytes_per_peer, r.workload, r.algorithm, r.options))
    show_timeouts = any(r.tcp_timeouts is not None for r in rows)
    recorded = any(r.recorded_calls is not None for r in rows)  # a replay: which call of the program, how often made
    flagged = any(flag(r) for r in rows)
    body = []
    for r in rows:
        call = [r.workload.rpartition(CALL)[2], r.recorded_calls] if recorded else []
        line = [r.nprocs, human_bytes(r.bytes_per_peer), *call, short_label(r, defaults), _us(r.t_mean_us),
                _us(r.t_std_us), _us(r.t_min_us), _us(r.t_max_us), _us(r.t_p50_us), _us(r.t_p99_us),
                "" if math.isnan(r.busbw_GBps) else f"{r.busbw_GBps:.3f}", r.stalls]
        if show_timeouts:
            line += ["" if count is None else count for count in (r.tcp_timeouts, r.tcp_loss_probes)]
        body.append(line + ([flag(r)] if flagged else []))
    tcp = ["tcp timeouts", "loss probes"] if show_timeouts else []
    headers = ["nprocs", "bytes/peer", *(["call", "made"] if recorded else []), "algorithm", "avg us", "std us",
               "min us", "max us", "p50 us", "p99 us", "busbw GB/s", "stalls"] + tcp + (["flag"] if flagged else [])
    return tabulate(body, headers=headers, tablefmt=fmt, disable_numparse=True,
                    colalign=("right",) * (4 if recorded else 2) + ("left",) + ("right",) * (len(headers) - 3))


def overlap_table(rows: Iterable[Row], defaults: Defaults | None = None, fmt: str = "simple") -> str:
    """Overlap rows: per point its tests and progress, the compute phase every contestant got, the medians of the
    three times and of the exposed time (overall less compute), and both overlap figures."""
    rows = sorted(rows, key=lambda r: (r.nprocs, r.progress, int(r.tests or 0), r.bytes_per_peer, r.algorithm,
                                       r.options))
    flagged = any(flag(r) for r in rows)
    body = [[r.nprocs, human_bytes(r.bytes_per_peer), short_label(r, defaults), r.tests, r.progress,
             _us(r.compute_phase_us), _us(r.t_pure_us), _us(r.t_overall_us), _us(r.t_compute_us),
             _us(r.t_exposed_us), _percent(r.overlap_osu_pct),
             _percent(r.overlap_imb_pct), _us(r.t_mean_us), r.stalls, *([flag(r)] if flagged else [])] for r in rows]
    headers = ["nprocs", "bytes/peer", "algorithm", "tests", "progress", "phase us", "pure us", "overall us",
               "compute us", "exposed us", "OSU %", "IMB %", "overall avg us", "stalls", *(["flag"] if flagged else [])]
    return tabulate(body, headers=headers, tablefmt=fmt, disable_numparse=True,
                    colalign=("right", "right", "left", "right", "left") + ("right",) * (len(headers) - 5))


def _percent(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.0f}"


def explained_table(rows: list[Row], defaults: Defaults | None = None, errors: Path | None = None) -> str:
    """The table (the overlap protocol's, for its rows), then why its INVALID points are invalid (where the full
    text of their errors is: `errors`) and what its stalls say (nothing when neither)."""
    shown = overlap_table(rows, defaults) if rows and rows[0].timing == "overlap" else table(rows, defaults)
    return "\n".join([shown, *invalid_reasons(rows, errors), *explain(rows, defaults)])


def invalid_reasons(rows: list[Row], errors: Path | None = None) -> list[str]:
    """One line per distinct note of the INVALID points, with how many points it covers (and, for a point that
    failed, the log with the full text: `errors`)."""
    notes: dict[str, int] = {}
    for r in rows:
        if flag(r) == "INVALID":
            notes[r.note] = notes.get(r.note, 0) + 1
    return [f"INVALID ({counted(count, 'point')}): {note}" + (f" (the full text: {errors})" if errors and
                                                                note.startswith(FAILED) else "")
            for note, count in notes.items()]


def oversubscription_warning(crowded: dict[str, dict[str, int]]) -> str:
    """Why oversubscribed timings mislead, with the numbers."""
    where = ", ".join(f"{v['ranks']} ranks on {counted(v['cores'], 'core')} of {host}" for host, v in crowded.items())
    return (f"oversubscribed: {where}. Timings then measure the OS scheduler as much as the algorithm; "
            "compare algorithms only side by side in this run (--allow-oversubscribed hides this warning).")


TPU_PERCENTILES = [("p50", "t_p50_us"), ("p90", "t_p90_us"), ("p95", "t_p95_us"), ("p99", "t_p99_us"),
                   ("avg", "t_mean_us"), ("max", "t_max_us"), ("min", "t_min_us")]


def tpu_table(rows: Iterable[Row], defaults: Defaults | None = None) -> str:
    """Rows in the TPU all-to-all benchmark's columns (tab-separated, like its CSV).

    transferred_data is what leaves each rank: (group_size - 1) x bytes_per_peer; achieved_bw
    at a percentile is transferred_data over the step time at that percentile.
    """
    headers = ["iteration", "op_type", "rank", "mesh_shape", "op_dimension", "sharding_strategy",
               "transferred_data (GB)", "dtype_bytes", "algorithm"]
    headers += [f"step_time_ms_{name}" for name, _ in TPU_PERCENTILES] + ["step_time_ms_num_runs"]
    headers += [f"achieved_bw (GB/s)_{name}" for name, _ in TPU_PERCENTILES]
    lines = ["\t".join(headers)]
    for r in sorted(rows, key=lambda r: (r.mesh, r.groups, r.algorithm, r.options, r.bytes_per_peer)):
        group = r.group_size or r.nprocs
        transferred = (group - 1) * r.bytes_per_peer / 1e9
        times_ms = [getattr(r, column) / 1e3 for _, column in TPU_PERCENTILES]
        axes = sum(1 for size in r.groups.split("x") if size != "1") if r.groups else 1
        cells = [r.count, "A2A", group, r.mesh or r.nprocs, axes, r.groups or r.nprocs, f"{transferred:.3g}",
                 np.dtype(r.dtype).itemsize, short_label(r, defaults)]
        cells += [f"{t:.6g}" for t in times_ms] + [r.iterations]
        cells += [f"{transferred / (t / 1e3):.6g}" if t > 0 else "" for t in times_ms]
        lines.append("\t".join(map(str, cells)))
    return "\n".join(lines)


def as_csv(rows: Iterable[Row]) -> str:
    """Rows as results.csv text."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    for row in rows:
        writer.writerow(row.as_csv())
    return out.getvalue()


def as_json(rows: Iterable[Row]) -> str:
    """Rows as a JSON list (NaN as null)."""
    clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(r).items()}
             for r in rows]
    return json.dumps(clean, indent=1)


def noise_floor(rows: list[Row], rounds: dict[tuple, list[verdict.Sample]], metric: str = "mean") -> str:
    """What `control` (native under a second name) differed from native by, per size, in words ('' where no cell
    has both): the floor below which no difference is called a win."""
    found = []
    for size in sorted({r.bytes_per_peer for r in rows}):
        here = [r for r in rows if r.bytes_per_peer == size and r.measured]
        native = next((r for r in here if r.algorithm == NATIVE), None)
        control = native and next((r for r in here if controls_native(r.algorithm, r.options, native.options)), None)
        if native is None or control is None:
            continue
        floor = verdict.noise_floor(verdict.per_round(rounds.get(point_key(control), []), metric),
                                    verdict.per_round(rounds.get(point_key(native), []), metric))
        if floor:
            found.append(f"{human_bytes(size)} {max(floor, 1 / floor):.2f}x")
    if not found:
        return ""
    return (f"noise floor (control, the library's own under a second name, against native; median of per-round "
            f"{metric} ratios): {', '.join(found)}; no smaller difference is called a win")


def show(directory: Path, fmt: str = "table") -> str:
    """`bench show`: an earlier record's tables per process count, or its rows as CSV or JSON."""
    run = load(directory)
    if fmt != "table":
        return as_csv(run.rows).rstrip("\n") if fmt == "csv" else as_json(run.rows)
    library = (run.meta.get("mpi_library") or "unknown MPI library").splitlines()[0]
    lines, rounds = [f"{directory}: {run.meta.get('status', 'unknown status')}; {library}"], read_rounds(directory)
    for nprocs in sorted({r.nprocs for r in run.rows}):
        rows = [r for r in run.rows if r.nprocs == nprocs]
        errors = directory / run.meta["errors_log"] if run.meta.get("errors_log") else None
        floor = noise_floor(rows, rounds)
        lines += [f"\n{nprocs} ranks (times in microseconds; ! = stalled)",
                  explained_table(rows, run.meta.get("option_defaults"), errors), *([floor] if floor else [])]
    return "\n".join(lines)
