"""Time one point: untimed plan and warm-up, then per iteration a synchronisation and one timed call."""
from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from a2a.measure.clock import MIN_LEAD_SECONDS, GlobalClock

MIN_ITERATIONS = 5
MAX_LEAD_SECONDS = 0.05
# A call begun this long after the agreed start lost its core: above the spin loop's own jitter in
# Python, far below a scheduler time slice (docs/timing.md has the measured distributions).
LATE_SECONDS = 10e-6
ROOMY_TO_SHRINK = 8  # iterations in a row with over half the lead to spare on every rank halve it


def time_sync(comm: Any, run: Callable[[], Any], warmup: int, iterations: int,
              max_seconds: float, stop_requested: Callable[[], bool],
              least: int = MIN_ITERATIONS) -> tuple[np.ndarray, bool]:
    """Return (samples, stopped): each sample is one iteration's time, max over ranks.

    Before each iteration every rank joins an untimed MPI_Allreduce(MAX) of (elapsed, stop):
    it synchronises like a barrier and lets all ranks agree, without another message, to
    stop after `max_seconds` (once `least` iterations are done) or when a rank was asked to stop.
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
        if done >= least and agreed[0] > max_seconds:
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
    """Return (each rank's mean time per call, stopped): calls back to back.

    One synchronisation, then `iterations` calls back to back (IMB-MPI1 with -sync off, and
    IMB before 2017); per-rank means, summarised over ranks like IMB's t_min/t_avg/t_max. A
    call can overlap the next one, and a stall inside the loop is spread over all the calls:
    that is this protocol's blind spot.
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


def time_imb(comm: Any, run: Callable[[], Any], warmup: int, iterations: int,
             stop_requested: Callable[[], bool]) -> tuple[np.ndarray, bool]:
    """Return (each rank's mean time per call, stopped): IMB-MPI1's default protocol, and OSU's.

    Two barriers, then per iteration one timed call and an untimed MPI_Barrier; each rank keeps
    the mean of its calls' times, and the min/mean/max over ranks are IMB's t_min/t_avg/t_max.
    Unlike pipelined, calls never overlap and every call begins with the ranks together.
    """
    from mpi4py import MPI

    barrier, wtime = comm.Barrier, MPI.Wtime
    for _ in range(warmup):  # IMB warms up with its own loop, barriers included
        run()
        barrier()
    if comm.allreduce(bool(stop_requested()), op=MPI.LOR):
        return np.zeros(0), True
    barrier()
    barrier()
    total = 0.0
    for _ in range(iterations):
        start = wtime()
        run()
        total += wtime() - start
        barrier()
    return np.array(comm.allgather(total / max(iterations, 1))), False


@dataclass
class Starts:
    """The verdict on each global-timing start, the iterations excluded and why, and the lead that adapts."""

    lead: float
    past: int = 0  # a rank arrived after the agreed start (excluded, as ReproMPI excludes them)
    late: int = 0  # a rank arrived in time but began its call over LATE_SECONDS after the start (excluded)
    preempted: int = 0  # a rank began in time but the scheduler took its core before its exit (excluded)
    roomy: int = 0  # iterations in a row where every rank arrived with over half the lead to spare

    def judge(self, arrival: float, late: bool, preempted: bool) -> bool:
        """Whether an iteration is valid, from its worst rank's arrival after the start (negative: early),
        late start and preemption; the lead doubles after a past start and halves after ROOMY_TO_SHRINK
        roomy ones."""
        self.roomy = self.roomy + 1 if arrival < -self.lead / 2 else 0
        if arrival > 0:
            self.past, self.lead = self.past + 1, min(2 * self.lead, MAX_LEAD_SECONDS)
            return False
        if self.roomy == ROOMY_TO_SHRINK:
            self.lead, self.roomy = max(self.lead / 2, MIN_LEAD_SECONDS), 0
        if late:
            self.late += 1
        elif preempted:
            self.preempted += 1
        return not (late or preempted)

    @property
    def excluded(self) -> int:
        """Iterations excluded, for any reason."""
        return self.past + self.late + self.preempted

    @property
    def note(self) -> str:
        """What was excluded and why, and the lead ('' when nothing was)."""
        counts = [(self.late, f"began over {LATE_SECONDS * 1e6:g} us after the agreed start on some rank"),
                  (self.preempted, "lost their core before the exit on some rank"),
                  (self.past, "found it already past on some rank")]
        why = ", ".join(f"{count} {what}" for count, what in counts if count)
        return f"{self.excluded} iterations excluded ({why}); lead {self.lead * 1e6:.0f} us" if why else ""


@dataclass(frozen=True)
class GlobalSamples:
    """What time_global saw: the valid samples and the verdicts on its starts."""

    samples: np.ndarray
    starts: Starts
    wanted: int
    stopped: bool = False

    @property
    def enough(self) -> bool:
        """Whether the point has the valid iterations a summary needs."""
        return len(self.samples) >= min(MIN_ITERATIONS, self.wanted)

    @property
    def note(self) -> str:
        """The row's note: what was excluded, the lead, and whether the budget ran out first ('' if all was clean)."""
        said = [self.starts.note] * bool(self.starts.excluded)
        if len(self.samples) < self.wanted:
            said.append(f"{len(self.samples)} of {self.wanted} iterations valid within the time budget"
                        + ("" if self.enough else f": too few to summarise (fewer than {MIN_ITERATIONS})"))
        return "; ".join(said)


def spin_until(start: float) -> float:
    """Busy-wait for local time `start`; return the time the wait ended. Ranks that slept instead woke
    together onto whichever core was idle, one behind the other (docs/timing.md has the runs)."""
    from mpi4py import MPI

    wtime = MPI.Wtime
    while (now := wtime()) < start:
        pass
    return now


def involuntary_switches() -> int:
    """How often the scheduler has taken this thread's core away (0 where the system does not count it)."""
    thread = getattr(resource, "RUSAGE_THREAD", None)
    return 0 if thread is None else resource.getrusage(thread).ru_nivcsw


def time_global(comm: Any, run: Callable[[], Any], warmup: int, iterations: int, max_seconds: float,
                stop_requested: Callable[[], bool], clock: GlobalClock,
                wait_until: Callable[[float], float] = spin_until,
                switches: Callable[[], int] = involuntary_switches, least: int = MIN_ITERATIONS,
                starts: Starts | None = None) -> GlobalSamples:
    """Time `run` on the global clock: each sample is the latest exit minus the agreed start, of a valid iteration.

    ReproMPI's protocol: before each iteration an untimed MPI_Allreduce(MAX) agrees on (latest
    global time, elapsed, stop, the last iteration's verdict); the start is that time plus the
    lead. Every rank waits for the start on its global clock (`wait_until`, which returns
    when the wait ended), calls, and keeps its exit. An iteration in which a rank arrived after
    the start, began its call more than LATE_SECONDS after it, or was preempted between its
    wait and its exit (`switches` counts it) is invalid on every rank and excluded. The lead
    adapts: it doubles when a rank arrived after the start, and halves when every rank arrived
    with over half of it to spare ROOMY_TO_SHRINK times in a row (within MIN_LEAD_SECONDS and
    MAX_LEAD_SECONDS): waits stay short, and a rank that spins for the start keeps its core
    through the call. The point goes on until it has `iterations` valid ones or has spent
    `max_seconds` (after `least` tries, however slow they are). `starts` carries the verdicts and the lead
    over from an earlier visit of the same point (an interleaved round's).
    """
    from mpi4py import MPI

    wtime, allreduce, maximum = MPI.Wtime, comm.Allreduce, MPI.MAX
    to_global, to_local, drift = clock.model, clock.model.local, clock.model.drift
    for _ in range(warmup):
        run()
    kept = np.zeros(iterations)  # this rank's exit minus start, per valid iteration
    # global now, elapsed, stop; the last iteration's arrival after the start, late start, preemption
    mine, agreed = np.zeros(6), np.zeros(6)
    starts = starts or first_starts(clock)
    begin, tried, valid, pending = wtime(), 0, 0, 0.0
    while True:
        now = wtime()
        mine[0], mine[1], mine[2] = to_global(now), now - begin, stop_requested()
        allreduce(mine, agreed, maximum)  # the last iteration's verdict travels with this agreement
        if agreed[2]:
            return GlobalSamples(np.zeros(0), starts, iterations, stopped=True)
        if tried and starts.judge(agreed[3], bool(agreed[4]), bool(agreed[5])):
            kept[valid], valid = pending, valid + 1
        if valid >= iterations or (tried >= least and agreed[1] > max_seconds):
            break
        start = to_local(agreed[0] + starts.lead)
        mine[3], switched = wtime() - start, switches()
        began = wait_until(start)
        run()
        pending = (wtime() - start) * (1 - drift)
        mine[4], mine[5] = began - start > LATE_SECONDS, switches() != switched
        tried += 1
    samples = np.empty(valid)
    allreduce(kept[:valid], samples, maximum)
    return GlobalSamples(samples, starts, iterations)


def first_starts(clock: GlobalClock) -> Starts:
    """The verdicts of a point's first global start: none yet, at the clock's lead."""
    return Starts(max(clock.lead, MIN_LEAD_SECONDS))


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
