"""Time one point: untimed plan and warm-up, then per iteration a synchronisation and one timed call."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

MIN_ITERATIONS = 5


def time_sync(comm: Any, run: Callable[[], Any], warmup: int, iterations: int,
              max_seconds: float, stop_requested: Callable[[], bool]) -> tuple[np.ndarray, bool]:
    """Return (samples, stopped): each sample is one iteration's time, max over ranks.

    Before each iteration every rank joins an untimed MPI_Allreduce(MAX) of (elapsed, stop):
    it synchronises like a barrier and lets all ranks agree, without another message, to
    stop after `max_seconds` (once MIN_ITERATIONS are done) or when a rank was asked to stop.
    """
    from mpi4py import MPI

    wtime, allreduce, maximum = MPI.Wtime, comm.Allreduce, MPI.MAX
    for _ in range(warmup):
        run()
    local = np.zeros(iterations)
    mine, agreed = np.zeros(2), np.zeros(2)
    begin = wtime()
    done = 0
    while done < iterations:
        mine[0], mine[1] = wtime() - begin, stop_requested()
        allreduce(mine, agreed, maximum)
        if agreed[1]:
            return np.zeros(0), True
        if done >= MIN_ITERATIONS and agreed[0] > max_seconds:
            break
        start = wtime()
        run()
        local[done] = wtime() - start
        done += 1
    samples = np.empty(done)
    allreduce(local[:done], samples, maximum)
    return samples, False
