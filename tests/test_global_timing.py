"""--timing global: clocks synchronised to rank 0's, each sample the latest exit minus an agreed start."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np
import pytest
from support import mpiexec

from a2a.measure.clock import MIN_LEAD_SECONDS, Bounds, ClockModel, GlobalClock, fit, synchronise
from a2a.measure.timing import MAX_LEAD_SECONDS, MIN_ITERATIONS, ROOMY_TO_SHRINK, time_global
from a2a.record.results import read_rows, read_samples


def test_offset_from_the_intersection_of_bounds():
    sets = [Bounds(0.9, 1.3, t) for t in range(5)] + [Bounds(1.0, 1.6, 5.0)]
    model = fit(sets)
    assert isinstance(model, ClockModel) and (model.drift, model.offset) == (0.0, pytest.approx(1.15))


def test_drift_applied_only_where_the_fit_shows_it():
    times = np.linspace(0, 100, 10)
    drifting = [Bounds(1e-3 * t + 2 - 1e-6, 1e-3 * t + 2 + 1e-6, t) for t in times]
    model = fit(drifting)
    assert model.drift == pytest.approx(1e-3, rel=1e-3) and model.offset == pytest.approx(2, abs=1e-5)
    noise = np.random.default_rng(1).normal(0, 1e-6, times.size)
    steady = [Bounds(2 + e - 1e-6, 2 + e + 1e-6, t) for e, t in zip(noise, times)]
    assert fit(steady).drift == 0.0


def test_a_model_maps_global_times_back_to_local_readings():
    model = ClockModel(drift=1e-3, offset=2.0)
    assert model(5.0) == pytest.approx(5.0 - 2.005) and model.local(model(5.0)) == pytest.approx(5.0)


@pytest.mark.mpi
def test_synchronise_recovers_skewed_drifting_clocks_within_its_bound(comm):
    """Each rank's clock is off by 0.25 s per rank and runs fast by 1 % per rank; the model undoes both."""
    # the truth is the host's monotonic clock, one for every process here (Open MPI's MPI_Wtime is not:
    # it counts from each process's own start)
    origin = comm.bcast(time.monotonic())
    skewed = lambda: (time.monotonic() - origin) * (1 + 1e-2 * comm.rank) + 0.25 * comm.rank  # noqa: E731
    clock = synchronise(comm, fitpoints=6, exchanges=8, span=0.1, raw=skewed)
    error = abs(clock.model(skewed()) - (time.monotonic() - origin))
    report = comm.bcast(clock.report)
    assert report["offset_error_per_rank_us"][comm.rank] < 20_000  # loaded machine: still milliseconds at worst
    assert error * 1e6 <= report["offset_error_per_rank_us"][comm.rank] + 1000
    if comm.rank:
        assert clock.model.drift == pytest.approx(1e-2 * comm.rank / (1 + 1e-2 * comm.rank), rel=0.25)  # load-proof


@pytest.fixture
def clock(comm) -> GlobalClock:
    """The job's clocks synchronised to rank 0's (collective)."""
    return synchronise(comm, fitpoints=4, exchanges=8, span=0.01)


def punctual(start: float) -> float:
    """A wait that reports every start as met on time, whoever held the cores (ranks may outnumber them here).

    It sleeps where spin_until spins: 4 ranks spinning for their starts on 2 cores kept the one still to reach the
    agreement off a core for tens of ms under load, which left no rank the half of a 40 ms lead to spare that
    test_a_lead_with_room_to_spare_shrinks needs 8 times in a row (and spent the cores).
    """
    from mpi4py import MPI

    time.sleep(max(0.0, start - MPI.Wtime()))
    return start


def steady() -> int:
    """A switch count that says no rank ever lost its core."""
    return 0


@dataclass(frozen=True)
class EarlyStart(ClockModel):
    """A stand-in clock that places every start `early` seconds before the others do."""

    early: float = 0.0

    def local(self, global_time: float) -> float:
        return super().local(global_time) - self.early


@pytest.mark.mpi
def test_a_sample_is_the_latest_exit_minus_the_agreed_start(comm, clock):
    """The last rank to finish sets the sample, even when it started on time and its peers left early."""
    slow = 2e-3 if comm.rank == comm.size - 1 else 0.0
    timed = time_global(comm, lambda: time.sleep(slow), 1, 8, 60, lambda: False, clock,
                        wait_until=punctual, switches=steady)
    assert not timed.stopped and len(timed.samples) == 8  # it measures until it has its valid iterations
    assert timed.samples.min() >= 2e-3 and timed.samples.max() < 1.0


@pytest.mark.mpi
def test_the_lead_grows_until_every_rank_arrives_before_the_start(comm, clock):
    """A rank whose start comes 3 ms before the others' finds it past until the lead outgrows 3 ms."""
    early = 3e-3 if comm.rank == comm.size - 1 else 0.0
    skewed = GlobalClock(EarlyStart(clock.model.drift, clock.model.offset, early), lead=MIN_LEAD_SECONDS, report={})
    timed = time_global(comm, lambda: None, 0, 6, 60, lambda: False, skewed,
                        wait_until=punctual, switches=steady)
    assert not timed.stopped and len(timed.samples) == 6, timed.note
    if comm.size > 1:
        assert timed.starts.past >= 7 and 3e-3 < timed.starts.lead <= MAX_LEAD_SECONDS  # 20 us doubled past 3 ms
        assert f"lead {timed.starts.lead * 1e6:.0f} us" in timed.note and "found it already past" in timed.note


@pytest.mark.mpi
def test_a_lead_with_room_to_spare_shrinks(comm, clock):
    """A 40 ms lead, where every rank arrives with most of it to spare, halves after ROOMY_TO_SHRINK such iterations
    in a row: at least twice in 6 x ROOMY_TO_SHRINK, beside any doubling after a start found past (room, since on
    an oversubscribed machine a rank that loses its core starts the count again, or misses the start)."""
    generous = GlobalClock(clock.model, lead=0.04, report={})
    timed = time_global(comm, lambda: None, 0, 6 * ROOMY_TO_SHRINK, 60, lambda: False, generous,
                        wait_until=punctual, switches=steady)
    assert len(timed.samples) == 6 * ROOMY_TO_SHRINK, timed.note
    assert timed.starts.lead <= 0.04 / 4 * 2 ** timed.starts.past, timed.note  # a start found past doubles it


@pytest.mark.mpi
def test_an_iteration_begun_late_on_any_rank_is_excluded(comm, clock):
    """A rank that loses its core just as the start comes would count the scheduler into the sample."""
    if comm.size < 2:
        pytest.skip("needs two ranks")
    waits = iter(range(1 << 20))

    def descheduled(start: float) -> float:
        punctual(start)
        if comm.rank == comm.size - 1 and next(waits) % 2 == 0:
            time.sleep(0.05)  # every other start, the last rank begins 50 ms late
            return start + 0.05
        return start

    timed = time_global(comm, lambda: None, 0, 10, 60, lambda: False, clock,
                        wait_until=descheduled, switches=steady)
    starts = timed.starts
    assert len(timed.samples) == 10 and starts.late >= 1 and starts.late + starts.past >= 9, timed.note
    assert timed.samples.max() < 0.05  # no late start is in a sample
    assert f"{starts.late} began over 10 us after the agreed start on some rank" in timed.note


@pytest.mark.mpi
def test_an_iteration_in_which_a_rank_lost_its_core_is_excluded(comm, clock):
    """A rank preempted between the start and its exit would count the scheduler into the sample."""
    if comm.size < 2:
        pytest.skip("needs two ranks")
    reads = iter(range(1 << 20))

    def every_other_call_preempted() -> int:
        return (next(reads) + 1) // 4 if comm.rank == comm.size - 1 else 0  # changes within every other try

    timed = time_global(comm, lambda: None, 0, 10, 60, lambda: False, clock, wait_until=punctual,
                        switches=every_other_call_preempted)
    assert len(timed.samples) == 10 and timed.starts.preempted + timed.starts.past >= 9, timed.note
    assert timed.starts.preempted >= 1 and "lost their core before the exit on some rank" in timed.note


@pytest.mark.mpi
def test_a_point_with_too_few_valid_iterations_says_so(comm, clock):
    if comm.size < 2:
        pytest.skip("needs two ranks")

    def always_late(start: float) -> float:
        punctual(start)
        return start + (1e-3 if comm.rank == comm.size - 1 else 0.0)

    timed = time_global(comm, lambda: None, 0, 10, 0.02, lambda: False, clock,
                        wait_until=always_late, switches=steady)
    assert len(timed.samples) == 0 and not timed.enough and timed.starts.past + timed.starts.late >= MIN_ITERATIONS
    assert "0 of 10 iterations valid within the time budget: too few to summarise" in timed.note


@pytest.mark.mpi
def test_a_stop_request_ends_global_timing(comm, clock):
    timed = time_global(comm, lambda: None, 0, 50, 60, lambda: comm.rank == 0, clock)
    assert timed.stopped and timed.samples.size == 0


@pytest.mark.launches
def test_global_sweep_records_its_mode_and_the_clock(tmp_path):
    out = tmp_path / "run"
    done = mpiexec(2, "-m", "bench", "run", "--timing", "global", "--sizes", "8,64K", "--algorithms",
                   "native,pairwise", "--no-control", "--iterations", "20", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert "(global timing;" in done.stdout
    rows = read_rows(out)
    assert len(rows) == 4 and {r.timing for r in rows} == {"global"}
    # beside the suite's other worker a point's ranks may lose their cores in nearly every iteration: the protocol
    # then refuses to summarise it and says so (test_ranks_sharing_one_core_get_invalid_rows_that_say_why)
    valid = [r for r in rows if r.valid]
    assert valid and all("too few to summarise" in r.note for r in rows if not r.valid), [r.note for r in rows]
    samples = read_samples(out)
    assert all(len(samples[r.key]) == r.iterations > 0 and r.t_min_us > 0 for r in valid)
    clock = json.loads((out / "meta.json").read_text())["by_nprocs"]["2"]["clock"]
    assert 0 <= clock["offset_error_us"] < 1e5 and clock["lead_us"] > 0 and len(clock["drifts"]) == 2


@pytest.mark.launches
def test_ranks_sharing_one_core_get_invalid_rows_that_say_why(tmp_path):
    """On one core a rank is always off it at the start: no valid iteration; the row and table say so, and a
    launch with no valid point exits 1 with the cause once."""
    out = tmp_path / "run"
    done = mpiexec(2, "-m", "bench", "run", "--timing", "global", "--sizes", "8", "--algorithms", "native",
                   "--no-control", "--iterations", "10", "--max-time-per-point", "0.5", "--output", str(out),
                   cores="0")
    assert done.returncode == 1, done.stderr
    (row,) = read_rows(out)
    assert not row.valid and "iterations valid within the time budget: too few to summarise" in row.note
    assert f"INVALID (1 point): {row.note}" in done.stdout
    assert done.stderr.count("error: no point was measured: ") == 1, done.stderr
