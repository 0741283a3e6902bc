"""--timing global: clocks synchronised to rank 0's, each sample the latest exit minus an agreed start."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest
from support import mpiexec

from a2a.measure.clock import Bounds, ClockModel, GlobalClock, fit, synchronise
from a2a.measure.timing import time_global
from a2a.record.results import read_rows, read_samples


def test_offset_from_the_intersection_of_bounds():
    sets = [Bounds(0.9, 1.3, t) for t in range(5)] + [Bounds(1.0, 1.6, 5.0)]
    assert fit(sets) == ClockModel(0.0, pytest.approx(1.15))


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


@pytest.mark.mpi
def test_a_sample_is_the_latest_exit_minus_the_agreed_start(comm):
    """The last rank to finish sets the sample, even when it started on time and its peers left early."""
    clock = synchronise(comm, fitpoints=4, exchanges=8, span=0.01)
    slow = 2e-3 if comm.rank == comm.size - 1 else 0.0
    timed = time_global(comm, lambda: time.sleep(slow), 1, 8, 60, lambda: False, clock)
    assert not timed.stopped and 7 <= len(timed.samples) <= 8  # a last start found past is known too late
    assert timed.samples.min() >= 2e-3 and timed.samples.max() < 1.0


@pytest.mark.mpi
def test_a_start_found_past_is_dropped_and_the_lead_grows(comm):
    clock = synchronise(comm, fitpoints=4, exchanges=8, span=0.01)
    rushed = GlobalClock(clock.model, lead=-1e-3, report={})  # every start is already past
    timed = time_global(comm, lambda: None, 0, 6, 60, lambda: False, rushed)
    assert not timed.stopped and timed.dropped >= 1 and len(timed.samples) >= 1
    assert "dropped: a rank found the agreed start already past" in timed.note


@pytest.mark.mpi
def test_a_stop_request_ends_global_timing(comm):
    clock = synchronise(comm, fitpoints=4, exchanges=8, span=0.01)
    timed = time_global(comm, lambda: None, 0, 50, 60, lambda: comm.rank == 0, clock)
    assert timed.stopped and timed.samples.size == 0


def test_global_sweep_records_its_mode_and_the_clock(tmp_path):
    out = tmp_path / "run"
    done = mpiexec(2, "-m", "bench", "run", "--timing", "global", "--sizes", "8,64K", "--algorithms",
                   "native,pairwise", "--iterations", "20", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert "(global timing;" in done.stdout
    rows = read_rows(out)
    assert len(rows) == 4 and {r.timing for r in rows} == {"global"} and all(r.valid for r in rows)
    samples = read_samples(out)
    assert all(len(samples[r.key]) == r.iterations > 0 and r.t_min_us > 0 for r in rows)
    clock = json.loads((out / "meta.json").read_text())["by_nprocs"]["2"]["clock"]
    assert 0 <= clock["offset_error_us"] < 1e5 and clock["lead_us"] > 0 and len(clock["drifts"]) == 2
