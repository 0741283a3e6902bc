"""The two published overlap figures, computed as their sources compute them, from each rank's mean times.

`means` holds one row per rank: its mean pure exchange time (start to the end of wait, nothing
between), mean overall time (start, the compute phase with its progress calls, wait), mean compute
phase (its arithmetic and its progress calls) and mean time in those calls.

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
