"""Timing validity: oversubscription is detected and recorded, pipelined mode, the harness's own cost."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest
from support import mpiexec

from a2a.measure.driver import Context
from a2a.measure.environment import by_machine, cores_of_this_rank, oversubscription
from a2a.measure.timing import time_imb, time_pipelined
from a2a.mpi import LOCAL_SIZE_VARIABLES, ranks_on_this_node
from a2a.record.results import read_rounds, read_rows, read_samples

CORES = len(cores_of_this_rank())


def test_namespaces_of_one_kernel_count_as_one_machine():
    two = frozenset({0, 1})
    placements = [("boot-a", "a2a-n0", two), ("boot-a", "a2a-n0", two), ("boot-a", "a2a-n1", two),
                  ("boot-b", "real-node", two)]
    assert oversubscription(by_machine(placements)) == {"a2a-n0,a2a-n1": {"ranks": 3, "cores": 2}}


def test_oversubscription_from_faked_affinity():
    two = frozenset({0, 1})
    placements = [("a", two)] * 4 + [("b", frozenset({0})), ("b", frozenset({1})), ("c", frozenset({0, 1, 2}))]
    assert oversubscription(placements) == {"a": {"ranks": 4, "cores": 2}}
    assert oversubscription([("a", frozenset({0}))] * 2) == {"a": {"ranks": 2, "cores": 1}}
    assert oversubscription([("a", frozenset({0})), ("a", frozenset({1}))]) == {}


@pytest.mark.mpi
def test_oversubscription_seen_for_real(comm):
    if comm.size == 1:
        pytest.skip("one rank cannot crowd its cores; test_oversubscribed_run_is_recorded_and_warned pins "
                    "2 ranks to 1 core with taskset")
    crowded = Context.of(comm, 0).crowded
    assert bool(crowded) == (comm.size > CORES)


@pytest.mark.launches
def test_oversubscribed_run_is_recorded_and_warned(tmp_path):
    """2 ranks pinned to one core crowd it as 4 ranks on 2 cores do, at half the start-up; the run with
    --allow-oversubscribed (no --quiet: that flag alone must silence the warning) also shows the thread level the
    crowded ranks get."""
    out = tmp_path / "run"
    done = mpiexec(2, "-m", "bench", "run", "--sizes", "8", "--algorithms", "native", "--nprocs", "2",
                   "--iterations", "3", "--output", str(out), cores="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("WARNING: 2 ranks, oversubscribed: 2 ranks on 1 core") == 1
    assert done.stdout.index("WARNING") < done.stdout.index("bytes/peer")  # above the table
    meta = json.loads((out / "meta.json").read_text())
    assert meta["oversubscribed"] and meta["by_nprocs"]["2"]["oversubscribed"]
    assert all("oversubscribed: 2 ranks on" in r.note for r in read_rows(out))

    quiet = tmp_path / "quiet"
    done = mpiexec(2, "-m", "bench", "run", "--sizes", "8", "--algorithms", "native", "--nprocs", "2",
                   "--iterations", "2", "--output", str(quiet), "--allow-oversubscribed", cores="0")
    assert done.returncode == 0 and "WARNING" not in done.stdout + done.stderr
    assert all("oversubscribed" in r.note for r in read_rows(quiet))
    assert json.loads((quiet / "meta.json").read_text())["mpi_thread_level"] == "multiple"  # ranks outnumber cores


@pytest.mark.mpi
def test_time_pipelined_gives_each_ranks_mean_without_the_warmup(comm):
    calls: list[None] = []

    def run():  # warm-up calls are slow; timed calls take (rank + 1) x 2 ms
        calls.append(None)
        time.sleep(0.3 if len(calls) <= 2 else 0.002 * (comm.rank + 1))

    means, stopped = time_pipelined(comm, run, warmup=2, iterations=5, stop_requested=lambda: False)
    assert not stopped and len(calls) == 7 and len(means) == comm.size
    for rank, mean in enumerate(means):  # with the warm-up, a mean would be >= 0.12 s
        assert 0.002 * (rank + 1) <= mean < 0.002 * (rank + 1) + 0.1, (rank, means)


@pytest.mark.mpi
def test_time_imb_starts_every_call_together_and_leaves_the_barrier_out(comm):
    """IMB's loop: a barrier after each timed call, so no rank runs ahead, and the wait in it is not timed."""
    origin = comm.bcast(time.monotonic())
    starts = []

    # steps of 10 ms, not 2: 4 ranks on 2 cores (Open MPI's barrier spins) woke a sleeper 2 ms late once
    def run():  # rank r's calls take (r + 1) x 10 ms, warm-up ones 0.3 s
        starts.append(time.monotonic() - origin)
        time.sleep(0.3 if len(starts) <= 2 else 0.01 * (comm.rank + 1))

    means, stopped = time_imb(comm, run, warmup=2, iterations=5, stop_requested=lambda: False)
    assert not stopped and len(starts) == 7 and len(means) == comm.size
    for rank, mean in enumerate(means):  # the barrier's wait for the slowest rank would add 10 ms or more
        assert 0.01 * (rank + 1) <= mean < 0.01 * (rank + 1) + 0.005, (rank, means)
    spread = np.ptp(np.array(comm.allgather(starts)), axis=0)  # back to back, the 5th would be 40 ms apart
    assert spread.max() < 0.02, spread


@pytest.mark.mpi
@pytest.mark.parametrize("timer", [time_pipelined, time_imb])
def test_a_per_rank_mean_timing_stops_on_every_rank_when_one_asks(comm, timer):
    calls: list[None] = []
    samples, stopped = timer(comm, lambda: calls.append(None), warmup=1, iterations=5,
                             stop_requested=lambda: comm.rank == comm.size - 1)
    assert stopped and len(samples) == 0 and len(calls) == 1


@pytest.mark.launches
@pytest.mark.parametrize("timing", ["pipelined", "imb"])
def test_a_per_rank_mean_run_records_its_means_and_its_mode(tmp_path, timing, small_sweep):
    out = tmp_path / "run"
    done = mpiexec(2, "-m", "bench", "run", "--timing", timing, "--sizes", "8,64K", "--algorithms",
                   "native,pairwise", "--no-control", "--iterations", "50", "--output", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert len(rows) == 4 and {r.timing for r in rows} == {timing}
    assert all(r.valid and r.iterations == 50 and r.t_min_us <= r.t_mean_us <= r.t_max_us for r in rows)
    samples, rounds = read_samples(out), read_rounds(out)
    assert all(len(samples[r.key]) == 2 * 25 for r in rows)  # one mean per rank per round (25 by default)
    assert all(sorted(round_ for _, round_, _ in rounds[r.key]) == sorted(list(range(25)) * 2) for r in rows)
    assert "timing" in (out / "results.csv").read_text().splitlines()[0].split(",")
    # the mode is part of a point's identity: the session's sync point of native at 8 B on 2 ranks is another point
    sync_row = next(r for r in read_rows(small_sweep) if r.algorithm == "native")
    assert sync_row.timing == "sync" and sync_row.key != next(r.key for r in rows if r.algorithm == "native"
                                                               and r.bytes_per_peer == 8)


@pytest.mark.launches
def test_harness_cost_is_recorded(small_sweep):
    harness = json.loads((small_sweep / "meta.json").read_text())["by_nprocs"]["2"]["harness"]
    assert 0 < harness["wtick_us"] <= 1e6 and 0 < harness["wtime_step_us"] < 1e3
    assert 0 < harness["sync_empty_timed_call_p50_us"] < harness["sync_iteration_with_synchronisation_us"]
    assert harness["pipelined_empty_call_us"] > 0


@pytest.mark.parametrize("variable,value,ranks", [
    ("MPI_LOCALNRANKS", "3", 3), ("OMPI_COMM_WORLD_LOCAL_SIZE", "16", 16),
    ("SLURM_STEP_TASKS_PER_NODE", "4(x2),2", 4), ("SLURM_STEP_TASKS_PER_NODE", "", 1),
])
def test_ranks_on_this_node_from_the_launcher(monkeypatch, variable, value, ranks):
    for name in LOCAL_SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, value)
    assert ranks_on_this_node() == ranks


@pytest.mark.launches
def test_thread_level_serialized_unless_ranks_outnumber_cores(tmp_path):
    """2 ranks on 2 cores: serialized (test_oversubscribed_run_is_recorded_and_warned sees multiple on 1 core)."""
    out = tmp_path / "run"
    done = mpiexec(2, "-m", "bench", "run", "--sizes", "8", "--algorithms", "native", "--nprocs", "2",
                   "--iterations", "2", "--output", str(out), "--quiet", "--allow-oversubscribed", cores="0,1")
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "meta.json").read_text())["mpi_thread_level"] == "serialized"
