"""Time one point: untimed plan and warm-up, then per iteration a synchronisation and one timed call."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from a2a.measure.clock import MIN_LEAD_SECONDS, GlobalClock

MIN_ITERATIONS = 5
MAX_LEAD_SECONDS = 0.05
LATE_SECONDS = 2e-6  # a call begun this long after the agreed start is counted in the row's note
SLEEP_ABOVE_SECONDS, SPIN_SECONDS = 300e-6, 200e-6  # a longer wait sleeps, then spins its last part


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


@dataclass(frozen=True)
class GlobalSamples:
    """What time_global saw: the kept samples, and how many iterations started badly."""

    samples: np.ndarray
    stopped: bool = False
    dropped: int = 0  # a rank found the start already past: dropped, as ReproMPI does
    delayed: int = 0  # kept, but a rank began its call more than LATE_SECONDS after the start

    @property
    def note(self) -> str:
        """The row's note on these counts ('' when every start was clean)."""
        said = []
        if self.dropped:
            said.append(f"{self.dropped} iterations dropped: a rank found the agreed start already past")
        if self.delayed:
            said.append(f"{self.delayed} iterations began over {LATE_SECONDS * 1e6:g} us after the agreed start on "
                        "some rank (it lost its core while waiting)")
        return "; ".join(said)


def time_global(comm: Any, run: Callable[[], Any], warmup: int, iterations: int, max_seconds: float,
                stop_requested: Callable[[], bool], clock: GlobalClock) -> GlobalSamples:
    """Time `run` on the global clock: each sample is the latest exit minus the agreed start.

    ReproMPI's protocol: before each iteration an untimed MPI_Allreduce(MAX) agrees on (latest
    global time, elapsed, stop, was the last start found past); the start is that time plus
    the clock's lead. Every rank waits for the start on its global clock (asleep for most of a
    long wait, so that ranks sharing cores let each other run), calls, and keeps its exit. An
    iteration in which a rank found the start already past is dropped, as ReproMPI drops it,
    and the lead doubles.
    """
    from mpi4py import MPI

    wtime, allreduce, maximum = MPI.Wtime, comm.Allreduce, MPI.MAX
    to_global, to_local, drift = clock.model, clock.model.local, clock.model.drift
    for _ in range(warmup):
        run()
    limit = 2 * iterations + 10
    local = np.zeros((3, limit))  # per iteration: exit minus start, start found past, call begun late
    mine, agreed = np.zeros(4), np.zeros(4)
    lead, begin, done, valid = clock.lead, wtime(), 0, 0
    while valid < iterations and done < limit:
        now = wtime()
        mine[0], mine[1], mine[2] = to_global(now), now - begin, stop_requested()
        allreduce(mine, agreed, maximum)
        if agreed[2]:
            return GlobalSamples(np.zeros(0), stopped=True)
        if agreed[3]:
            valid, lead = valid - 1, min(max(2 * lead, MIN_LEAD_SECONDS), MAX_LEAD_SECONDS)
        if valid >= MIN_ITERATIONS and agreed[1] > max_seconds:
            break
        start = to_local(agreed[0] + lead)
        wait = start - wtime()
        if wait > SLEEP_ABOVE_SECONDS:
            time.sleep(wait - SPIN_SECONDS)
        while wtime() < start:
            pass
        began = wtime()
        run()
        end = wtime()
        mine[3] = wait <= 0
        local[:, done] = (end - start) * (1 - drift), mine[3], began - start > LATE_SECONDS
        done, valid = done + 1, valid + 1
    worst = np.empty((3, done))
    allreduce(np.ascontiguousarray(local[:, :done]), worst, maximum)
    kept = worst[1] == 0
    return GlobalSamples(worst[0][kept], dropped=int(done - kept.sum()), delayed=int(worst[2][kept].sum()))


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
