"""Every algorithm run non-blocking through the progression engine: start, test between slices of compute, wait;
two exchanges in flight on one communicator; test() really advancing a schedule of rounds; native's three forms."""
from __future__ import annotations

import time

import numpy as np
import pytest
from support import assert_collective_tests_passed, self_comm, subcommunicators
from test_algorithms import VARIANTS, cases, counts, fits, random_buffer
from test_alltoallv import VARIANTS as V_VARIANTS
from test_alltoallv import buffers, workload_counts

import a2a
from a2a.execute.engine import Progression

NATIVE_FORMS = [("native", {"form": form}) for form in ("nonblocking", "persistent")]


def computed(slices: int) -> float:
    """A little real arithmetic between tests (a program's own work)."""
    work = np.ones(512)
    for _ in range(slices):
        work = work * 1.000001 + 1e-9
    return float(work[0])


def run_two(plans: list, polls: int) -> None:
    """Start both exchanges, test each `polls` times between slices of compute, then wait for both."""
    for plan in plans:
        plan.start()
    for _ in range(polls):
        computed(3)
        for plan in plans:
            plan.test()
    for plan in plans:
        plan.wait()


def nonblocking_cases(p: int) -> list[tuple[type, int]]:
    """Fewer (dtype, count) pairs than the blocking tests' (each runs two plans three times): at 1 and 4 ranks
    float32's every count and every other count of the rest; at 2 and 3 the blocking tests' few; above 4, where only
    the schedule's shape is new, the blocking tests' one (the large-message protocol's progress is tested to 4)."""
    if p > 4:
        return cases(p)
    return [(dtype, count) for dtype, count in cases(p) if dtype == np.float32 or count in counts(dtype)[::2]]


@pytest.mark.mpi
@pytest.mark.parametrize("name,options", VARIANTS + NATIVE_FORMS,
                         ids=[f"{n}{o or ''}" for n, o in VARIANTS + NATIVE_FORMS])
def test_start_test_wait_matches_mpi_alltoall_with_two_in_flight(comm, name, options):
    """At every p, dtype and count: two plans of the algorithm on one communicator, started together, tested
    between slices of compute (0, 1 or 5 times), waited for: each gives what MPI_Alltoall gives, call after call."""
    wrong = []
    for p, sub in subcommunicators(comm):
        if sub is None or not fits(options, p):
            continue
        for dtype, count in nonblocking_cases(p):
            sends = [random_buffer(dtype, p * count, seed=1000 * sub.rank + count + k) for k in range(2)]
            wants = [np.empty_like(send) for send in sends]
            for send, want in zip(sends, wants):
                sub.Alltoall(send, want)
            gots = [np.full_like(send, 99) for send in sends]
            plans = [a2a.get(name).init(sub, send, got, **options) for send, got in zip(sends, gots)]
            for polls in (0, 1, 5):
                for got in gots:
                    got[...] = 99
                run_two(plans, polls)
                if not all(np.array_equal(got, want) for got, want in zip(gots, wants)):
                    wrong.append((p, np.dtype(dtype).name, count, polls))
            for plan in plans:
                plan.free()
    assert not wrong, f"{name} {options} started/tested/waited differs from MPI_Alltoall at {wrong}"


@pytest.mark.mpi
@pytest.mark.parametrize("name,options", V_VARIANTS + NATIVE_FORMS, ids=[f"{n}{o or ''}" for n, o in
                                                                         V_VARIANTS + NATIVE_FORMS])
def test_alltoallv_start_test_wait_matches_mpi_alltoallv(comm, name, options, tmp_path):
    """Every alltoallv algorithm on a skewed workload with holes between blocks, through start/test/wait."""
    wrong = []
    for p, sub in subcommunicators(comm):
        if sub is None:
            continue
        matrix = workload_counts("random:spread=1", p, 3000, 8, tmp_path)
        send, sendcounts, sdispls, recvcounts, rdispls, want = buffers(matrix, sub.rank, np.float64, True)
        sub.Alltoallv([send, (sendcounts, sdispls)], [want, (recvcounts, rdispls)])
        got = np.full_like(want, -1)
        with a2a.get(name).init_v(sub, send, sendcounts, got, recvcounts, sdispls, rdispls, **options) as plan:
            for polls in (0, 3):
                got[...] = -1
                run_two([plan], polls)
                if not np.array_equal(got, want):
                    wrong.append((p, polls))
    assert not wrong, f"{name} {options} differs from MPI_Alltoallv at {wrong}"


@pytest.mark.mpi
def test_the_one_shot_forms_hand_back_a_handle(comm):
    send = random_buffer(np.float64, comm.size * 3, seed=comm.rank)
    want, got, got_v = np.empty_like(send), np.zeros_like(send), np.zeros_like(send)
    comm.Alltoall(send, want)
    handle = a2a.ialltoall(comm, send, got, "pairwise")
    while not handle.test():
        computed(1)
    counts = np.full(comm.size, 3)
    other = a2a.ialltoallv(comm, send, counts, got_v, counts, "linear")
    other.wait()
    assert np.array_equal(got, want) and np.array_equal(got_v, want)
    again = a2a.ialltoall(comm, send, got, "pairwise")  # the same call: the plan cached, bound to the same buffers
    again.wait()
    assert again.cached is handle.cached and not handle.cached.queue
    a2a.free_cache(comm)
    assert handle.cached.plan.progression is None  # freed


@pytest.mark.mpi
def test_test_advances_a_schedule_and_a_rank_that_never_tests_finishes_only_in_wait(comm):
    """Pairwise has p-1 rounds, each waiting for the last. While every rank tests, test() alone completes them (no
    wait). When rank 0 only starts, it has posted its first round until its wait() posts the rest, and no other
    rank can complete: each must send to rank 0 in some round, and 1 MiB blocks go only once rank 0 receives them
    (no eager send)."""
    if comm.size < 3:
        pytest.skip("needs three rounds or more: three ranks")
    send = random_buffer(np.float64, comm.size * (1 << 17), seed=comm.rank)
    want, got = np.empty_like(send), np.zeros_like(send)
    comm.Alltoall(send, want)
    with a2a.get("pairwise").init(comm, send, got, executor="python") as plan:  # the engine counts its rounds
        plan.start()
        while not plan.test():
            pass
        assert plan.progression.rounds == comm.size - 1 and np.array_equal(got, want)
        got[...] = 0
        comm.Barrier()
        plan.start()
        if comm.rank != 0:
            until = time.monotonic() + 0.3
            while time.monotonic() < until:
                plan.test()
        seen = comm.allgather((plan.progression.rounds, plan.progression.active))
        comm.Barrier()  # on the caller's communicator: the plan's messages travel on a private one
        plan.wait()
        assert seen[0] == (1, True), seen  # rank 0 posted its first round only; the rest come in wait
        assert all(active for _, active in seen[1:]), seen  # no other rank completed without rank 0
        assert plan.progression.rounds == comm.size - 1 and np.array_equal(got, want)


def test_one_exchange_in_flight_per_plan_and_a_blocking_form_runs_inside_wait():
    send, got = np.arange(4.0), np.zeros(4)
    with a2a.get("native").init(self_comm(), send, got, form="blocking") as plan:
        assert plan.progression.in_wait and "a blocking library call" in plan.note
        plan.start()
        with pytest.raises(a2a.BadInput, match="still in flight"):
            plan.start()
        with pytest.raises(a2a.BadInput, match="in flight"):
            plan()
        plan.wait()
        assert np.array_equal(got, send)
    with a2a.get("onesided").init(self_comm(), send, np.zeros(4)) as plan:
        assert plan.progression.in_wait and "MPI.Win has no non-blocking form" in plan.note


@pytest.mark.parametrize("form", ["nonblocking", "persistent"])
def test_native_non_blocking_forms_are_the_librarys_own_request(form):
    """No engine between the caller and MPI_Ialltoall or MPI_Start: start() leaves the library's request, test() and
    wait() are its own, and the run never parks."""
    from mpi4py import MPI

    send, got = np.arange(4.0), np.zeros(4)
    with a2a.get("native").init(self_comm(), send, got, form=form) as plan:
        begun = plan.progression.request()  # prepared on the real communicator: no engine wrapper per start
        assert isinstance(begun, MPI.Request)
        begun.Wait()
        for _ in range(2):
            got[...] = 0
            plan.start()
            assert isinstance(plan.progression._request, MPI.Request) and plan.progression._round is None
            while not plan.test():
                pass
            assert np.array_equal(got, send) and plan.progression.rounds == 0 and not plan.progression.active
        plan.start()
        plan.wait()
        assert plan.progression._request is None and np.array_equal(got, send)


def test_a_run_that_raises_ends_its_exchange_with_the_error():
    progression = Progression(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        progression.start()
    assert not progression.active


@pytest.mark.nested
def test_every_algorithm_non_blocking_above_four_ranks(above_four):
    """The start/test/wait tests above, alltoall and alltoallv, at 5 and 8 ranks in the shared nested job (`mpirun -n 4`
    runs them and the rest at 1 to 4): every variant's schedule at 5 and 8 is checked here, for test_algorithms too."""
    assert_collective_tests_passed(above_four, __file__)
