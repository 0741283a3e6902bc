"""Summaries of one point's samples: percentiles, stalls, outliers, bandwidths; the least time a timed call can be
told from the timer by."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

OUTLIER_IQR_FACTOR = 3.0


@dataclass(frozen=True)
class Stats:
    """Statistics of a point's samples, in seconds."""

    n: int
    min: float
    p50: float
    p90: float
    p95: float
    p99: float
    mean: float
    max: float
    std: float
    stalls: int
    outliers: int

    @classmethod
    def of(cls, samples: np.ndarray, stall_threshold: float) -> "Stats":
        """Summarise samples (seconds); a stall is a sample >= fastest + stall_threshold."""
        s = np.asarray(samples, dtype=float)
        if s.size == 0:
            nan = float("nan")
            return cls(0, nan, nan, nan, nan, nan, nan, nan, nan, 0, 0)
        p50, p90, p95, p99 = np.percentile(s, [50, 90, 95, 99])
        return cls(
            n=int(s.size), min=float(s.min()), p50=float(p50), p90=float(p90), p95=float(p95),
            p99=float(p99), mean=float(s.mean()), max=float(s.max()),
            std=float(s.std(ddof=1)) if s.size > 1 else 0.0,
            stalls=int(stall_mask(s, stall_threshold).sum()), outliers=int(outlier_mask(s).sum()),
        )


def stall_mask(samples: np.ndarray, threshold: float) -> np.ndarray:
    """Samples at least `threshold` seconds slower than the fastest one."""
    s = np.asarray(samples, dtype=float)
    return s >= s.min() + threshold if s.size else np.zeros(0, bool)


def outlier_mask(samples: np.ndarray) -> np.ndarray:
    """Samples above Q3 + 3 IQR (Tukey's far-out fence)."""
    s = np.asarray(samples, dtype=float)
    if s.size < 4:
        return np.zeros(s.size, bool)
    q1, q3 = np.percentile(s, [25, 75])
    return s > q3 + OUTLIER_IQR_FACTOR * (q3 - q1)


def bandwidths(bytes_per_peer: int, nprocs: int, seconds: float) -> tuple[float, float]:
    """(algbw, busbw) in GB/s as nccl-tests: algbw = bytes_per_peer*nprocs/t, busbw = algbw*(n-1)/n."""
    if not seconds or seconds != seconds or seconds <= 0:
        return float("nan"), float("nan")
    algbw = bytes_per_peer * nprocs / seconds / 1e9
    return algbw, algbw * (nprocs - 1) / nprocs


def call_floor(harness: dict[str, float], timing: str) -> float:
    """The least time (seconds) a timed call can be told from the timer by, as the record's harness measured it: the
    timer's resolution (MPI_Wtick, its smallest step seen), and for timings of a call what timing an empty call
    took (back to back for pipelined and imb, one after a synchronisation otherwise); 0 where nothing was
    measured."""
    pipelined, sync = "pipelined_empty_call_us", "sync_empty_timed_call_p50_us"
    empty = {"pipelined": pipelined, "imb": pipelined, "sync": sync, "global": sync}.get(timing)
    found = [harness.get(key) for key in ("wtick_us", "wtime_step_us", *([empty] if empty else []))]
    return max((float(v) for v in found if isinstance(v, (int, float)) and math.isfinite(v)), default=0.0) * 1e-6
