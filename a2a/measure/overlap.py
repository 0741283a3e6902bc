"""The overlap protocol: how much of an exchange hides behind computation, timed as OSU's osu_ialltoall and IMB-NBC's
Ialltoall time it (their figures: a2a.record.overlap).

The compute phase is sized once per point, for every contestant alike, as a program has one compute phase per
step whatever algorithm it picks: `ratio` times the library's own non-blocking pure time there (CALIBRATION pure
exchanges of MPI_Ialltoall(v), start then wait at once, their median on each rank, as both sources calibrate on
each rank's own), or a given number of microseconds; in whole units of real arithmetic on a private array (Work),
not a sleep, timed at the point and rescaled to fit (IMB's calibration), since the units run slower on a loaded
machine than when they were first measured. The phase's time as the record shows it is what those units took
then (Work.seconds), the arithmetic the compute part below times again: asked 6.4 us, a unit of 3.6 us gives 7.2.
The warm-up runs the overall part below, so the path through the
tests is warm too. Per iteration, each part begun together on every rank:
- pure: start, wait;
- overall: start, the compute phase in `tests` slices as even as can be, each followed by one test() (OSU's -t:
  none when 0, a program that never polls; more tests than units spread their empty slices through the phase),
  wait; the phase's time and the time in its tests are kept apart;
- compute: the same arithmetic alone, no exchange in flight.
A sample is one iteration's max over ranks of each; the medians of those samples are the row's times, and feed
the published figures too (a2a.record.overlap), so that a figure is explained by the columns beside it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from a2a.measure.timing import MIN_ITERATIONS

CALIBRATION = 10  # pure exchanges that size the compute phase
UNIT_ELEMENTS = 2048  # float64s of Work's array: 16 KiB, in the first-level caches
QUANTITIES = ("pure", "overall", "compute", "phase", "testing")  # the columns of OverlapSamples.local


class Work:
    """Real arithmetic on a private array, measured in units of a few microseconds each."""

    def __init__(self) -> None:
        self.array = np.ones(UNIT_ELEMENTS)
        self.do(20)
        self.unit = min(self._timed(200) for _ in range(5)) / 200  # the least disturbed of five

    def do(self, units: int) -> None:
        """`units` units of arithmetic."""
        array, multiply, add = self.array, np.multiply, np.add
        for _ in range(units):
            multiply(array, 1.0000001, out=array)
            add(array, 1e-7, out=array)

    def units(self, seconds: float) -> int:
        """The units that take about `seconds`: as first measured, then timed here and rescaled."""
        units = max(0, round(seconds / self.unit))
        if units == 0:
            return 0
        return max(1, round(units * seconds / self.seconds(units)))

    def seconds(self, units: int, runs: int = 3) -> float:
        """How long `units` units take here: the median of `runs` timings after an untimed one (one timing, and a
        cold one, was off by 30 % and more at a few units)."""
        self.do(units)
        return float(np.median([self._timed(units) for _ in range(runs)]))

    def _timed(self, units: int) -> float:
        began = time.perf_counter()
        self.do(units)
        return time.perf_counter() - began


def slices(units: int, tests: int) -> list[int]:
    """The compute phase cut into `tests` slices as even as can be, each test at its share of the phase (one slice
    when there are no tests): the k-th ends at round(k x units / tests)."""
    if tests <= 0:
        return [units]
    ends = [round((k + 1) * units / tests) for k in range(tests)]
    return [end - begin for begin, end in zip([0, *ends], ends)]


def pure_seconds(comm: Any, plan: Any, warmup: int) -> float:
    """This rank's median pure time of `plan` (prepared non-blocking): start then wait at once, after `warmup`."""
    from mpi4py import MPI

    for _ in range(warmup):
        plan.start()
        plan.wait()
    times = []
    for _ in range(CALIBRATION):
        comm.Barrier()
        began = MPI.Wtime()
        plan.start()
        plan.wait()
        times.append(MPI.Wtime() - began)
    return float(np.median(times))


@dataclass(frozen=True)
class OverlapSamples:
    """What time_overlap saw: per iteration each quantity's max over ranks, and the phase's units."""

    samples: dict[str, np.ndarray]
    units: int
    stopped: bool = False


def time_overlap(comm: Any, plan: Any, work: Work, warmup: int, iterations: int, max_seconds: float,
                 stop_requested: Callable[[], bool], units: int, tests: int,
                 least: int = MIN_ITERATIONS) -> OverlapSamples:
    """Time `plan` (prepared non-blocking) by the overlap protocol on `comm` with a compute phase of `units`; see
    the module's docstring."""
    from mpi4py import MPI

    wtime, barrier = MPI.Wtime, comm.Barrier
    start, test, wait = plan.start, plan.test, plan.wait

    def pure() -> float:
        barrier()
        began = wtime()
        start()
        wait()
        return wtime() - began

    phase_slices = slices(units, tests)
    for _ in range(warmup):  # the overall part, tests and all
        start()
        for share in phase_slices:
            work.do(share)
            if tests:
                test()
        wait()
    local = np.zeros((iterations, len(QUANTITIES)))
    mine, agreed, begin, done = np.zeros(2), np.zeros(2), wtime(), 0
    while done < iterations:
        mine[0], mine[1] = wtime() - begin, stop_requested()
        comm.Allreduce(mine, agreed, MPI.MAX)  # every rank agrees to go on, or to stop
        if agreed[1]:
            return OverlapSamples({}, units, stopped=True)
        if done >= least and agreed[0] > max_seconds:
            break
        row = local[done]
        row[0] = pure()
        barrier()
        began = wtime()
        start()
        computing = wtime()
        for share in phase_slices:
            work.do(share)
            if tests:
                polled = wtime()
                test()
                row[4] += wtime() - polled
        row[3] = wtime() - computing
        wait()
        row[1] = wtime() - began
        barrier()
        began = wtime()
        work.do(units)
        row[2] = wtime() - began
        done += 1
    worst = np.empty((done, len(QUANTITIES)))
    comm.Allreduce(np.ascontiguousarray(local[:done]), worst, MPI.MAX)
    return OverlapSamples({q: worst[:, k] for k, q in enumerate(QUANTITIES)}, units)
