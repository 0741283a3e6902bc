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


def time_pipelined(comm: Any, run: Callable[[], Any], warmup: int, iterations: int,
                   stop_requested: Callable[[], bool]) -> tuple[np.ndarray, bool]:
    """Return (each rank's mean time per call, stopped): OSU's and IMB's protocol.

    One synchronisation, then `iterations` calls back to back; per-rank means are what OSU
    reports as Min/Avg/Max Latency and IMB as t_min/t_avg/t_max across ranks. A stall inside
    the loop is spread over all the calls: that is this protocol's blind spot.
    """
    from mpi4py import MPI

    for _ in range(warmup):
        run()
    if comm.allreduce(bool(stop_requested()), op=MPI.LOR):  # also the synchronisation
        return np.zeros(0), True
    begin = MPI.Wtime()
    for _ in range(iterations):
        run()
    mean = (MPI.Wtime() - begin) / max(iterations, 1)
    return np.array(comm.allgather(mean)), False


def harness_cost(comm: Any, iterations: int = 200) -> dict[str, float]:
    """What timing itself costs here: timer resolution and an empty timed iteration (collective)."""
    from mpi4py import MPI

    noop = lambda: None  # noqa: E731
    begin = MPI.Wtime()
    samples, _ = time_sync(comm, noop, 5, iterations, float("inf"), lambda: False)
    loop = (MPI.Wtime() - begin) / (iterations + 5)
    means, _ = time_pipelined(comm, noop, 5, iterations * 10, lambda: False)
    return {
        "wtick_us": MPI.Wtick() * 1e6,
        "wtime_step_us": smallest_wtime_step() * 1e6,
        "sync_empty_timed_call_p50_us": float(np.median(samples)) * 1e6,
        "sync_iteration_with_synchronisation_us": comm.allreduce(loop, op=MPI.MAX) * 1e6,
        "pipelined_empty_call_us": float(means.max()) * 1e6,
    }


def smallest_wtime_step(tries: int = 2000) -> float:
    """The smallest nonzero difference seen between consecutive MPI.Wtime() readings."""
    from mpi4py import MPI

    wtime, smallest, last = MPI.Wtime, float("inf"), MPI.Wtime()
    for _ in range(tries):
        now = wtime()
        if now > last:
            smallest = min(smallest, now - last)
        last = now
    return smallest
