"""Realistic synthetic results (written with Recorder) and decision tables for the decide tests."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from a2a.record.results import Recorder, Row, read_rounds, read_rows, write_meta
from a2a.record.stats import Stats, bandwidths

# (nprocs, bytes per peer) -> {(algorithm, options): median microseconds}; every point gets
# 20 lognormal samples (5% spread) around its median in 10 rounds of 2, so clear gaps get a verdict. linear_sync
# is never the best; Open MPI, which has no twin of throttled, gets it where throttled wins.
LIBRARY_TABLE = {
    (2, 8): {("native", ""): 30, ("pairwise", "schedule=shift"): 12, ("bruck", "radix=2"): 40},
    (2, 1024): {("native", ""): 60, ("pairwise", "schedule=shift"): 25, ("bruck", "radix=2"): 80},
    (4, 8): {("native", ""): 50, ("bruck", "radix=2"): 20, ("pairwise", "schedule=shift"): 70,
             ("throttled", "window=2"): 90, ("linear_sync", "window=2"): 95},
    (4, 64): {("native", ""): 60, ("bruck", "radix=2"): 25, ("pairwise", "schedule=shift"): 80,
              ("throttled", "window=2"): 95, ("linear_sync", "window=2"): 100},
    (4, 1024): {("native", ""): 200, ("bruck", "radix=2"): 300, ("pairwise", "schedule=shift"): 90,
                ("throttled", "window=2"): 150, ("linear_sync", "window=2"): 160},
    (4, 16384): {("native", ""): 900, ("bruck", "radix=2"): 2500, ("pairwise", "schedule=shift"): 800,
                 ("throttled", "window=2"): 400, ("linear_sync", "window=2"): 450},
    (4, 262144): {("native", ""): 5000, ("bruck", "radix=2"): 40000, ("pairwise", "schedule=shift"): 9000,
                  ("throttled", "window=2"): 8000, ("linear_sync", "window=2"): 8500},
}


def samples_around(median_us: float, n: int = 20, seed: int = 0, spread: float = 0.05) -> np.ndarray:
    """n samples in seconds, lognormal around a median."""
    rng = np.random.default_rng(seed)
    return median_us * 1e-6 * np.exp(rng.normal(0.0, spread, n))


def in_rounds(n: int, rounds: int | None) -> list[int] | None:
    """The round of each of n samples split evenly over `rounds` (None: a record made before rounds)."""
    return None if rounds is None else [i * rounds // n for i in range(n)]


def record(directory: Path, points: dict, dtype: str = "float32", mpi_library: str = "MPICH Version: test",
           stall_at: dict | None = None, rounds: int | None = 10, launch: str = "") -> Path:
    """Write a results directory holding `points` (see LIBRARY_TABLE) as `bench run` would, each point's samples in
    `rounds` interleaved rounds of `launch` (its directory where '')."""
    recorder = Recorder(directory, launch=launch)
    itemsize = np.dtype(dtype).itemsize
    for i, ((nprocs, size), variants) in enumerate(sorted(points.items())):
        for j, ((algorithm, options), median) in enumerate(sorted(variants.items())):
            seconds = samples_around(median, seed=1000 * i + j)
            if stall_at and (nprocs, size, algorithm) in stall_at:
                seconds[:stall_at[nprocs, size, algorithm]] += 0.2  # TCP retransmission stalls
            recorder.add(row_for(nprocs, size, algorithm, options, dtype, itemsize, seconds), seconds,
                         in_rounds(len(seconds), rounds))
    recorder.close()
    write_meta(directory, {"status": "complete", "mpi_library": mpi_library, "start": "2026-01-01T00:00:00+00:00"})
    return directory


def row_for(nprocs: int, size: int, algorithm: str, options: str, dtype: str, itemsize: int,
            seconds: np.ndarray) -> Row:
    """A valid results row summarising the samples."""
    stats = Stats.of(seconds, 0.1)
    us = 1e6
    algbw, busbw = bandwidths(size, nprocs, stats.p50)
    return Row(nprocs, 1, nprocs, algorithm, options, dtype, size // itemsize, size, stats.n, 1,
               stats.min * us, stats.p50 * us, stats.p90 * us, stats.p95 * us, stats.p99 * us,
               stats.mean * us, stats.max * us, stats.std * us, stats.stalls, stats.outliers,
               algbw, busbw, True, "")


def two_algorithm_run(directory: Path) -> Path:
    """A complete record of native and pairwise at 8 B and 1 KiB on 2 ranks, each with one 0.3 s stall."""
    recorder = Recorder(directory)
    for size in (8, 1024):
        for algorithm in ("native", "pairwise"):
            recorder.add(Row(2, 1, 2, algorithm, "", "float32", size // 4, size, iterations=3,
                             t_p50_us=10.0 + size / 100, valid=True), [1e-5, 1.1e-5, 0.3])
    recorder.close()
    write_meta(directory, {"status": "complete"})
    return directory


def minimal_table(nprocs: int, ranges: list[tuple[int, str, str]]) -> dict:
    """A decision document by hand: ranges are (bytes_min, algorithm, options), ascending from 0."""
    rows: list[dict[str, object]] = []
    for i, (low, algorithm, options) in enumerate(ranges):
        high = ranges[i + 1][0] - 1 if i + 1 < len(ranges) else None
        rows.append({"bytes_min": low, "bytes_max": high, "algorithm": algorithm, "options": options, "cells": []})
    return {"schema": "a2a-decision/1", "metric": "mean", "alpha": 0.05, "dtype": "uint8",
            "context_columns": ["nprocs"], "tables": [{"nprocs": nprocs, "ranges": rows}]}



def as_alltoallv(directory: Path, workload: str) -> Path:
    """Turn a record() directory into an alltoallv run of `workload` (same points and samples)."""
    for name in ("results.csv", "samples.csv"):
        text = (directory / name).read_text()
        (directory / name).write_text(text.replace(",alltoall,uniform", f",alltoallv,{workload}"))
    return directory


# alltoallv at 2 and 4 ranks: pairwise wins at 2 ranks; at 4, tuna (native the best with a
# counterpart) at 64 B, linear above
ALLTOALLV_TABLE = {
    (2, 64): {("native", ""): 30, ("pairwise", "schedule=shift"): 12, ("linear", ""): 40},
    (2, 4096): {("native", ""): 60, ("pairwise", "schedule=shift"): 25, ("linear", ""): 80},
    (4, 64): {("native", ""): 25, ("tuna", "radix=2"): 15, ("linear", ""): 40, ("pairwise", "schedule=shift"): 70},
    (4, 4096): {("native", ""): 200, ("linear", ""): 90, ("pairwise", "schedule=shift"): 150},
    (4, 65536): {("native", ""): 900, ("linear", ""): 400, ("pairwise", "schedule=shift"): 800},
}


def as_overlap(directory: Path, into: Path, tests: str = "10") -> Path:
    """A record() directory as an overlap run in `into`: the same points, their times as the overall ones, measured
    with `tests` progress calls, polled, at compute ratio 1."""
    samples = read_rounds(directory)
    recorder = Recorder(into)
    for row in read_rows(directory):
        rounds = [r for _, r, _ in samples[row.key]]
        recorder.add(replace(row, timing="overlap", tests=tests, progress="poll", compute_ratio="1",
                             t_overall_us=row.t_p50_us), [s for _, _, s in samples[row.key]],
                     rounds if min(rounds) >= 0 else None)
    recorder.close()
    write_meta(into, {"status": "complete", "mpi_library": "MPICH Version: test"})
    return into
