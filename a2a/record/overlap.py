"""The two published overlap figures, by their sources' formulas.

`means` holds one row per rank: its pure exchange time (start to the end of wait, nothing between),
overall time (start, the compute phase with its progress calls, wait), compute phase (its
arithmetic and its progress calls) and time in those calls. The sources give each rank's means; a
measured row gives one row of the medians of per-iteration maxima over ranks, the statistic of its
time columns, so that one stall cannot move a figure that the columns beside it do not explain.

- OSU's `osu_ialltoall` (OMB 7.4, c/util/osu_util_mpi.c, print_stats_nbc, lines 868-870) averages
  each over the ranks (calculate_and_print_stats, lines 830-841), then
  overlap = max(0, 100 - (overall - (compute - test)) / pure x 100): the compute phase less its
  MPI_Test calls is what it counts as computation.
- IMB-NBC (IMB-v2021.11, src_c/IMB_output.c, line 319) takes every time from the one rank with the
  largest mean overlapped time (lines 313-320), then
  overlap = 100 x max(0, min(1, (t_pure + t_comp - t_ovrl) / max(t_pure, t_comp))); IMB's compute
  phase calls no MPI_Test, so its t_comp is the computation alone: here the phase less the calls.
"""
from __future__ import annotations

import numpy as np

PURE, OVERALL, PHASE, TESTING = range(4)  # the columns of `means`


def osu_overlap(means: np.ndarray) -> float:
    """OSU's overlap, in percent, from the ranks' mean times averaged over the ranks."""
    pure, overall, phase, testing = np.asarray(means, float).mean(axis=0)
    return float(max(0.0, 100 - (overall - (phase - testing)) / pure * 100)) if pure > 0 else float("nan")


def imb_overlap(means: np.ndarray) -> float:
    """IMB-NBC's overlap, in percent, from the rank with the largest mean overall time."""
    means = np.asarray(means, float)
    pure, overall, phase, testing = means[int(np.argmax(means[:, OVERALL]))]
    computing = phase - testing
    widest = max(pure, computing)
    return float(100 * max(0.0, min(1.0, (pure + computing - overall) / widest))) if widest > 0 else float("nan")


def overlap_figures(samples: dict[str, np.ndarray]) -> tuple[float, float]:
    """OSU's and IMB-NBC's overlap from a measured point's samples (per iteration, each quantity's max over ranks):
    by their formulas, from the medians, the statistic of the row's time columns."""
    medians = np.array([[np.median(samples[q]) for q in ("pure", "overall", "phase", "testing")]])
    return osu_overlap(medians), imb_overlap(medians)
