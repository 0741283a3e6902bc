"""The capture records what each algorithm really sends under MPI, and refuses what it cannot answer."""
from __future__ import annotations

import dataclasses
import functools
import os

import numpy as np
import pytest
from capture_check import mismatches
from support import ROOT, mpiexec

import a2a
from a2a.algos.registry import REGISTRY, register
from a2a.algos.schedule import Among, Phases, Posted
from a2a.errors import CaptureError
from a2a.schedules import world
from a2a.schedules.bytemaps import Datatype, whole_blocks
from a2a.schedules.events import Posts, Schedule, Wait, collectives, copied, traffic
from a2a.simulate import capture as capture_module
from a2a.simulate.capture import capture, capture_scaled, capture_unit, digests, stepped


@pytest.mark.mpi
def test_capture_matches_what_mpi_sends(comm):
    problems = mismatches(comm)
    assert not problems, "\n".join(problems)


@pytest.mark.launches
def test_capture_matches_mpi_at_five_ranks():
    """Every registered algorithm at p=5 (odd, uneven nodes of 2): counts and bytes per peer pair."""
    from mpi4py import MPI

    if MPI.COMM_WORLD.size > 1:
        pytest.skip("the mpi-marked test covers this run's own size")
    done = mpiexec(5, str(ROOT / "tests" / "capture_check.py"), timeout=600, asleep=True)  # counts, not times
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every algorithm matches at p=5" in done.stdout


def test_linear_schedule_by_hand():
    s = capture("linear", {}, 4, 3, "float32")
    assert traffic(s.events[1]) == {2: (1, 12), 3: (1, 12), 0: (1, 12)}
    kinds = [e.kind for e in s.events[1]]
    assert kinds == ["copy"] + ["irecv"] * 3 + ["isend"] * 3 + ["wait"]  # own block first (as Open MPI), one Waitall
    waited = s.events[1][-1]
    assert isinstance(waited, Wait) and len(waited.requests) == 6


def test_pairwise_waits_each_step_and_copies_one_block():
    s = capture("pairwise", {}, 4, 2, "float64")
    assert [e.kind for e in s.events[0]] == ["copy"] + ["isend", "irecv", "wait"] * 3
    assert copied(s.events[0]) == 16


@pytest.mark.parametrize("name", ["bruck_zero_copy", "bine"])
def test_zero_copy_schedules_copy_only_their_own_block(name):
    """Sends from and receives into absolute addresses (MPI.BOTTOM) move data without a local copy."""
    s = capture(name, {}, 8, 5, "float32")
    assert [copied(events) for events in s.events] == [5 * 4] * 8


def test_hierarchical_logs_node_collectives_on_the_layout():
    s = capture("hierarchical", {}, 6, 1, "float32", nodes=[[0, 1, 2], [3, 4, 5]])
    assert collectives(s.events[4]) == [("gather", (3, 4, 5)), ("scatter", (3, 4, 5))]
    assert collectives(s.events[3]) == [("gather", (3, 4, 5)), ("alltoallv", (0, 3)), ("scatter", (3, 4, 5))]


def test_an_alltoallv_of_equal_packed_blocks_moves_as_whole_blocks():
    """Equal counts at packed displacements are one (n, bytes) view, as an alltoall's; any other layout is not."""
    buf, byte = np.arange(12, dtype=np.uint8), Datatype.basic(1, "BYTE")
    blocks = whole_blocks([buf, ([4, 4, 4], [0, 4, 8]), byte], 3)
    assert blocks is not None and blocks.tolist() == buf.reshape(3, 4).tolist()
    assert whole_blocks([buf, ([4, 4, 4], [0, 5, 8]), byte], 3) is None
    assert whole_blocks([buf, ([4, 4, 3], [0, 4, 8]), byte], 3) is None


def test_scaled_capture_equals_capture_at_size():
    for name in ("bruck", "hierarchical", "throttled"):
        assert capture_scaled(name, {}, 6, 40, nodes=[[0, 1], [2, 3], [4, 5]]).expanded().events == \
            capture(name, {}, 6, 40, nodes=[[0, 1], [2, 3], [4, 5]]).events, name


# Every alltoall algorithm that registers steps, at its defaults and at these process counts: a new one is checked
# with no line here (docs/adding-an-algorithm.md)...
STEPPED_SIZES = (1, 2, 5, 6, 8)
STEPPED: list[tuple[str, dict[str, object], tuple[int, ...]]] = [
    (name, {}, STEPPED_SIZES) for name in a2a.algorithms("alltoall") if a2a.get(name).kinds["alltoall"].steps]
# ... and the options that change a schedule, where they do
STEPPED += [("bine", {}, (16,)), ("bruck_zero_copy", {"radix": 3}, (4, 9)), ("pairwise", {"schedule": "xor"}, (4, 8)),
            ("throttled", {"window": 3}, (5, 7, 8)), ("node_aware", {"ppn": 2}, (5, 6)),
            ("node_aware", {"ppn": 3, "placement": "cyclic"}, (7,)), ("hierarchical", {"ppn": 2}, (5, 6)),
            ("hierarchical", {"ppn": 3, "placement": "cyclic"}, (7,)), ("multileader", {"ppn": 4}, (6, 8)),
            ("multileader", {"ppn": 4, "leaders": 3}, (9,)), ("locality_aware", {"ppn": 3}, (7,)),
            ("locality_aware", {"ppn": 4, "groups": 3, "placement": "cyclic"}, (10,)),
            ("parallel_split", {"factor": 4}, (8, 12)), ("parallel_split", {"factor": 8}, (16,)),
            ("bruck", {}, (13,)), ("bruck", {"radix": 3}, (4, 10)), ("bruck", {"radix": 4}, (7, 16)),
            ("dimensional", {}, (16,)), ("dimensional", {"dims": "2x3x2"}, (12,))]


def _steps(name: str, options: dict, p: int, nodes: list[list[int]] | None = None) -> Schedule:
    """The schedule read from `name`'s registered steps, which it must have at p."""
    schedule = stepped(name, options, p, nodes=nodes)
    assert schedule is not None, (name, options, p)
    return schedule


@pytest.mark.parametrize("name,options,sizes", STEPPED)
def test_the_simulator_reads_the_steps_the_plan_runs(name, options, sizes, monkeypatch):
    """Read from the registered steps, a schedule is event for event the capture of the real plan; and the
    simulator's schedule (capture_unit) is read, with no plan run. Where the steps are None (the factory runs
    something no schedule form describes at that p: parallel_split's odd last rank), the simulator captures."""
    sizes = [p for p in sizes if stepped(name, options, p) is not None]
    for p in sizes:
        assert _steps(name, options, p).scaled(3).expanded().events == capture(name, options, p, 3).events, (name, p)
    monkeypatch.setattr(capture_module, "capture", lambda *args, **kwargs: pytest.fail("captured, not read"))
    for p in sizes:
        assert capture_unit(name, options, p).expanded().events == _steps(name, options, p).expanded().events


@pytest.mark.parametrize("nodes", [[[0, 1, 2], [3, 4, 5]], [[0, 1], [2, 3], [4]], [[0, 2, 4], [1, 3]],
                                   [[0], [1, 2, 3]]])
@pytest.mark.parametrize("name", ["node_aware", "hierarchical", "multileader", "locality_aware"])
def test_node_algorithms_read_the_nodes_they_run_on(nodes, name):
    """Steps on the job's nodes (the default: as MPI tells) are event for event the capture there."""
    p = sum(map(len, nodes))
    assert _steps(name, {}, p, nodes=nodes).scaled(2).expanded().events == capture(name, {}, p, 2, nodes=nodes).events
    if name != "multileader" or max(map(len, nodes)) > 2:  # its two leaders a node: on two ranks, one rank a node
        assert _steps(name, {}, p, nodes=nodes).expanded().events != _steps(name, {}, p).expanded().events


def test_a_mutated_step_breaks_the_match(monkeypatch):
    """Rounds the plan does not run (one block fewer in rank 0's last round) no longer match its capture."""
    kind = a2a.get("ring").kinds["alltoall"]
    real = kind.steps

    def mutated(p, rank):
        rounds = real(p, rank)
        return dataclasses.replace(rounds, sent=rounds.sent - (np.arange(p - 1) == p - 2)) if rank == 0 else rounds

    monkeypatch.setitem(a2a.get("ring").kinds, "alltoall", dataclasses.replace(kind, steps=mutated))
    assert _steps("ring", {}, 4).events != capture("ring", {}, 4, 1).events


def test_a_mutated_batch_breaks_the_match(monkeypatch):
    """A batch the plan does not run (rank 2 of linear sends to one peer fewer) no longer matches its capture."""
    kind = a2a.get("linear").kinds["alltoall"]
    real = kind.steps
    assert _steps("linear", {}, 4).expanded().events == capture("linear", {}, 4, 1).events

    def mutated(p, rank):
        batches = real(p, rank)
        return dataclasses.replace(batches, dests=batches.dests[:-1], dest_ends=batches.dest_ends - 1) \
            if rank == 2 else batches

    monkeypatch.setitem(a2a.get("linear").kinds, "alltoall", dataclasses.replace(kind, steps=mutated))
    assert _steps("linear", {}, 4).expanded().events != capture("linear", {}, 4, 1).events


def _one_post_fewer(phases: Phases) -> Phases:
    first = phases.phases[0]
    assert isinstance(first, Posted)
    return Phases((first._replace(dests=first.dests[:-1], sent=first.sent[:-1]), *phases.phases[1:]))


def _one_leader_fewer(phases: Phases) -> Phases:
    among = [k for k, phase in enumerate(phases.phases) if isinstance(phase, Among) and phase.name == "alltoallv"][0]
    found = list(phases.phases)
    leaders = found[among]
    assert isinstance(leaders, Among)
    found[among] = leaders._replace(members=leaders.members[:-1], sent=leaders.sent[:-1],
                                    received=leaders.received[:-1])
    return Phases(tuple(found))


def _last_phase_left_out(phases: Phases) -> Phases:
    return Phases(phases.phases[:-1])


@pytest.mark.parametrize("name,mutation", [("parallel_split", _one_post_fewer), ("locality_aware", _one_post_fewer),
                                           ("hierarchical", _one_leader_fewer), ("bruck", _last_phase_left_out),
                                           ("dimensional", _last_phase_left_out)])
def test_a_mutated_phase_breaks_the_match(name, mutation, monkeypatch):
    """Phases the plan does not run (rank 2 sends one aggregate fewer, its leaders' Alltoallv leaves one out, or it
    leaves out its last phase: Bruck's last copy, dimensional's last Alltoall) no longer match its capture."""
    kind = a2a.get(name).kinds["alltoall"]
    real = kind.steps
    assert _steps(name, {}, 4).expanded().events == capture(name, {}, 4, 1).events
    @functools.wraps(real)  # its signature too: steps_for gives `nodes` to steps that declare it
    def mutated(p: int, rank: int, **options):
        return mutation(real(p, rank, **options)) if rank == 2 else real(p, rank, **options)

    monkeypatch.setitem(a2a.get(name).kinds, "alltoall", dataclasses.replace(kind, steps=mutated))
    assert _steps(name, {}, 4).expanded().events != capture(name, {}, 4, 1).events


@pytest.mark.parametrize("name,options,p", [("pairwise", {"schedule": "xor"}, 6), ("linear_sync", {"window": 2}, 6),
                                            ("parallel_split", {}, 5)])
def test_steps_are_not_read_where_the_factory_runs_something_else(name, options, p):
    """pairwise with schedule=xor at 6 ranks is refused by its factory, linear_sync's narrower window refills
    as requests complete, and parallel_split relays an odd p's last rank by blocking sends: none registers steps
    there."""
    assert stepped(name, options, p) is None


@pytest.fixture
def plugin():
    """Register test algorithms for one test, and remove them after."""
    names = []

    def add(name, factory):
        register(name)(factory)
        names.append(name)

    yield add
    for name in names:
        REGISTRY.all().pop(name, None)


def test_unknown_call_is_named(plugin):
    def polls(comm, sendbuf, recvbuf):
        """Asks for a topology the stand-in has no answer for."""
        comm.Get_topology()
        return lambda: None

    plugin("capture_test_polls", polls)
    with pytest.raises(CaptureError, match="Comm.Get_topology"):
        capture("capture_test_polls", {}, 3, 1)


def test_unknown_mpi_attribute_is_named(plugin):
    def windows(comm, sendbuf, recvbuf):
        """Asks MPI for something the stand-in module lacks."""
        from mpi4py import MPI

        MPI.Open_port()
        return lambda: None

    plugin("capture_test_port", windows)
    with pytest.raises(CaptureError, match="MPI.Open_port"):
        capture("capture_test_port", {}, 3, 1)


def test_failure_on_one_rank_ends_the_capture(plugin):
    def fails_on_two(comm, sendbuf, recvbuf):
        """Rank 2 fails while the others wait in a collective."""
        if comm.rank == 2:
            raise RuntimeError("boom on two")
        comm.allgather(comm.rank)
        return lambda: None

    plugin("capture_test_fails", fails_on_two)
    with pytest.raises(CaptureError, match="rank 2 of 4.*boom on two"):
        capture("capture_test_fails", {}, 4, 1)


@pytest.mark.parametrize("cores", [1, 2])
def test_size_dependent_schedule_is_refused(plugin, monkeypatch, cores):
    """On one core the two captures run in turn; on two, the second in a forked process, compared by digests."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))

    def by_size(comm, sendbuf, recvbuf):
        """One message per element: the message count grows with the size."""
        from mpi4py import MPI

        p, count = comm.size, sendbuf.size // comm.size

        def run():
            cells = [(j, k, slice(j * count + k, j * count + k + 1)) for j in range(p) for k in range(count)]
            MPI.Request.Waitall([comm.Irecv(recvbuf[at], j, k) for j, k, at in cells]
                                + [comm.Isend(sendbuf[at], j, k) for j, k, at in cells])
        return run

    plugin("capture_test_by_size", by_size)
    with pytest.raises(CaptureError, match="on rank 0 is not proportional"):
        capture_scaled("capture_test_by_size", {}, 3, 100)


def test_an_error_of_the_forked_capture_is_raised_here(plugin, monkeypatch):
    """The capture at 2 elements per peer runs in a child process; what fails there is told here."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})

    def fails_at_two(comm, sendbuf, recvbuf):
        """A linear exchange, but rank 1 fails to plan at two elements per peer."""
        from mpi4py import MPI

        p, count = comm.size, sendbuf.size // comm.size
        if count == 2 and comm.rank == 1:
            raise ValueError("two elements")
        blocks = [slice(j * count, (j + 1) * count) for j in range(p)]
        return lambda: MPI.Request.Waitall([comm.Irecv(recvbuf[b], j, 0) for j, b in enumerate(blocks)]
                                           + [comm.Isend(sendbuf[b], j, 0) for j, b in enumerate(blocks)])

    plugin("capture_test_fails_at_two", fails_at_two)
    with pytest.raises(CaptureError, match="failed during capture: planning failed on rank 1 of 3: ValueError: two "
                                           "elements"):
        capture_scaled("capture_test_fails_at_two", {}, 3, 1)


@pytest.mark.parametrize("cores", [1, 2])
def test_bad_option_stays_a_bad_option(monkeypatch, cores):
    """In this process, and from a forked capture."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    with pytest.raises(a2a.BadOption, match="power-of-two"):
        capture("pairwise", {"schedule": "xor"}, 6, 1)
    with pytest.raises(a2a.BadOption, match="power-of-two"):
        # a group: the plans run (a schedule read from steps would not get as far as the option)
        capture_unit("pairwise", {"schedule": "xor"}, 6, nodes=[[r] for r in range(6)], group=lambda world: world)


def test_a_packed_schedule_is_compared_whole():
    """capture_unit compares its two captures by their events' text: a Posts' text is whole, not numpy's summary."""
    many = np.arange(2000)
    posts = [Posts(many % 2 == 0, many, np.ones(2000, np.int64), many) for _ in range(2)]
    posts[1].nbytes[1500] = 2
    assert digests([[posts[0]]]) != digests([[posts[1]]])


def test_wrong_result_is_caught(plugin):
    def forgets_its_own_block(comm, sendbuf, recvbuf):
        """Exchanges with every peer but never copies its own block."""
        from mpi4py import MPI

        p, r, width = comm.size, comm.rank, sendbuf.size // comm.size
        block = lambda buf, j: buf[j * width: (j + 1) * width]  # noqa: E731
        return lambda: MPI.Request.Waitall([comm.Irecv(block(recvbuf, j), j) for j in range(p) if j != r]
                                           + [comm.Isend(block(sendbuf, j), j) for j in range(p) if j != r])

    plugin("capture_test_forgets", forgets_its_own_block)
    with pytest.raises(CaptureError, match="wrong result"):
        capture("capture_test_forgets", {}, 3, 2)


def test_deadlock_is_named(plugin):
    def waits_for_nobody(comm, sendbuf, recvbuf):
        """Every rank receives first from its left neighbour, who never sends."""
        return lambda: comm.Recv(recvbuf, (comm.rank - 1) % comm.size, 5)

    plugin("capture_test_deadlock", waits_for_nobody)
    with pytest.raises(CaptureError, match="deadlock.*tag 5"):
        capture("capture_test_deadlock", {}, 3, 1)


def test_a_capture_past_its_memory_limit_is_stopped(monkeypatch):
    """A limit below what the process holds stops the capture at its first reading."""
    monkeypatch.setattr(world, "CHECK_SECONDS", 0.0)
    with pytest.raises(CaptureError, match=r"ring: the capture of 64 ranks holds [0-9.]+ GiB, above its limit"):
        capture("ring", {}, 64, 1, memory=1)
    assert len(capture("ring", {}, 64, 1).events) == 64  # the default limit lets it through


def test_numpy_is_restored_after_capture():
    real = np.copyto
    capture("bruck", {}, 3, 1)
    assert np.copyto is real and type(np.empty(2)) is np.ndarray
