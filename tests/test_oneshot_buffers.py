"""The one-shot alltoall on the caller's own buffers: a pair of arrays given again runs on a plan bound to them (no
copy), rebound on each rank alone; whatever each rank gives (new contents, another array at the same address, memory
given again, in place, new arrays at every call, a call while one is in flight), every result is the library's and
no rank waits on another's cache."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import a2a
from a2a.execute.oneshot import BOUND_ARRAYS, caller_of
from a2a.execute.planning import prepares_alone

# (algorithm, options, whether its plan is rebound to the arrays): in C; Python whose factory prepares alone; Python
# whose factory makes communicators (hierarchical) or a window (onesided), which go through the plan's own buffers
VARIANTS = [("pairwise", {}, True), ("native", {}, True), ("bruck", {"executor": "python"}, True),
            ("hierarchical", {"executor": "python", "ppn": 2}, False), ("onesided", {}, False)]


def expected(comm, send):
    want = np.empty_like(send)
    comm.Alltoall(send, want)
    return want


def cached_of(comm, name):
    """The one plan the one-shot calls on `comm` keep for `name`."""
    found = [cached for cached in caller_of(comm).plans.values() if cached.plan.algorithm.name == name]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def mine(comm):
    """A duplicate of the job's communicator, its one-shot cache freed after the test."""
    dup = comm.Dup()
    yield dup
    a2a.free_cache(dup)
    dup.Free()


@pytest.mark.mpi
@pytest.mark.parametrize("name,options,rebinds", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_arrays_given_again_run_on_a_plan_of_their_own_and_new_contents_come_through(mine, name, options, rebinds):
    """Nothing is kept from the contents: the same arrays with new data at every call give the new data's result;
    from the second call on, the arrays have a plan of their own where the plan can be rebound."""
    send, got = np.zeros(5 * mine.size, np.int64), np.zeros(5 * mine.size, np.int64)
    for call in range(4):
        send[:] = np.arange(send.size) + 1000 * mine.rank + 100_000 * call
        got[:] = -1
        a2a.alltoall(mine, send, got, name, **options)
        assert np.array_equal(got, expected(mine, send)), call
    cached = cached_of(mine, name)
    assert (len(cached.direct), cached.rebinds) == ((1, True) if rebinds else (0, False))


@pytest.mark.mpi
def test_another_array_at_the_same_address_is_another_call(mine):
    """Views of one memory: another dtype is another plan; another shape of the same dtype and count is the same call
    on the same plan; a non-contiguous view (at the same address as a cached pair) is refused on every rank, at a
    first call too when one rank gives it, and the calls go on after it."""
    p = mine.size
    base, out = np.zeros(8 * p), np.zeros(8 * p)
    base[:] = np.arange(8 * p) + 100 * mine.rank
    for _ in range(2):
        a2a.alltoall(mine, base, out, "pairwise")
    as_ints, out_ints = base.view(np.int32), out.view(np.int32)
    for _ in range(2):
        out[:] = 0
        a2a.alltoall(mine, as_ints, out_ints, "pairwise")
        assert np.array_equal(out_ints, expected(mine, as_ints))
    assert len(caller_of(mine).plans) == 2  # float64 x 8 and int32 x 16 per peer
    out[:] = 0
    a2a.alltoall(mine, base.reshape(p, 8), out.reshape(p, 8), "pairwise")
    assert np.array_equal(out, expected(mine, base))
    float_plans = [c for c in caller_of(mine).plans.values() if c.recv.dtype == np.float64]
    assert len(float_plans) == 1 and len(float_plans[0].direct) == 1  # the same plan, on the same memory
    wide = np.zeros(16 * p)
    with pytest.raises(a2a.BadInput, match="contiguous"):  # every rank: each one's check, then the digests
        a2a.alltoall(mine, wide[::2], out, "pairwise")
    odd = np.zeros(14 * p)
    with pytest.raises(a2a.BadInput, match="rank 0"):  # a first call (a miss on every rank): one rank's problem
        a2a.alltoall(mine, odd[::2] if mine.rank == 0 else odd[:7 * p], np.zeros(7 * p), "pairwise")
    out[:] = 0
    a2a.alltoall(mine, base, out, "pairwise")
    assert np.array_equal(out, expected(mine, base))


@pytest.mark.mpi
def test_memory_given_again_by_new_arrays_and_released_once_its_plan_goes(mine):
    """New array objects over the same memory at every call (as memory freed and allocated again) run on the plan
    bound to that memory, with their new contents; a plan bound to arrays keeps them alive, and lets them go once it
    is pushed out by BOUND_ARRAYS others."""
    n = 3 * mine.size
    pool, out_pool = np.zeros(2 * n, np.int32), np.zeros(2 * n, np.int32)
    for call in range(4):
        send, got = pool[:n], out_pool[:n]  # new objects, the same addresses
        send[:] = np.arange(n) + 10 * mine.rank + 1000 * call
        a2a.alltoall(mine, send, got, "pairwise")
        assert np.array_equal(got, expected(mine, send)), call
    cached = cached_of(mine, "pairwise")
    assert len(cached.direct) == 1
    held = np.arange(n, dtype=np.int32) + mine.rank
    alive = weakref.ref(held)
    for _ in range(2):
        a2a.alltoall(mine, held, np.zeros(n, np.int32), "pairwise")  # a new recvbuf each call: met, not bound
        a2a.alltoall(mine, held, out_pool[n:], "pairwise")
    del held
    gc.collect()
    assert alive() is not None  # its plan holds it: its memory cannot be given to another array meanwhile
    others = [(np.full(n, k, np.int32), np.zeros(n, np.int32)) for k in range(BOUND_ARRAYS + 1)]
    for send, got in others * 2:
        a2a.alltoall(mine, send, got, "pairwise")
        assert np.array_equal(got, expected(mine, send))
    gc.collect()
    assert alive() is None and len(cached.direct) == BOUND_ARRAYS


@pytest.mark.mpi
@pytest.mark.parametrize("name", ["pairwise", "native", "bruck"])
def test_in_place_calls_on_one_and_on_two_buffers(mine, name):
    buffers = [np.zeros(4 * mine.size, np.float32) for _ in range(2)]
    for call in range(6):
        buf = buffers[call % 2 if call >= 2 else 0]
        buf[:] = np.arange(buf.size) + 100 * mine.rank + 10_000 * call
        want = expected(mine, buf)
        a2a.alltoall(mine, a2a_in_place(), buf, name)
        assert np.array_equal(buf, want), call
    assert len(cached_of(mine, name).direct) == 2


def a2a_in_place():
    from mpi4py import MPI

    return MPI.IN_PLACE


@pytest.mark.mpi
def test_ranks_on_different_routes_agree_without_a_message(mine):
    """Even ranks keep one pair of arrays (their own plan), odd ranks give new arrays at every call (through the
    plan's buffers, or a plan of their own when the memory comes back): one digest, at the first call, and every
    result right."""
    from test_oneshot import caller_counting

    caller = caller_counting(mine)
    n = 4 * mine.size
    kept_send, kept_got = np.zeros(n), np.zeros(n)
    for call in range(2 * BOUND_ARRAYS + 3):
        fresh = mine.rank % 2 == 1
        send, got = (np.empty(n), np.empty(n)) if fresh else (kept_send, kept_got)
        send[:] = np.arange(n) + 100 * mine.rank + 1000 * call
        if call % 3 == 2:
            a2a.ialltoall(mine, send, got, "pairwise").wait()
        else:
            a2a.alltoall(mine, send, got, "pairwise")
        assert np.array_equal(got, expected(mine, send)), call
    assert caller.agreeing.posted == 1
    if mine.rank % 2 == 0:
        assert len(cached_of(mine, "pairwise").direct) == 1


@pytest.mark.mpi
def test_calls_on_buffers_in_flight_wait_their_turn_and_a_plan_in_flight_stays(mine):
    """An ialltoall in flight on the arrays' own plan; the same arrays again, another recvbuf, and more pairs than a
    plan keeps bound (which push plans out) meanwhile: the plan in flight is not freed, and every result is right."""
    n = 2 * mine.size
    send = np.arange(n, dtype=np.int64) + 10 * mine.rank
    want = expected(mine, send)
    got, other = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for _ in range(2):
        a2a.alltoall(mine, send, got, "pairwise")
    got[:] = 0
    first = a2a.ialltoall(mine, send, got, "pairwise")
    again = a2a.ialltoall(mine, send, got, "pairwise")
    a2a.alltoall(mine, send, other, "pairwise")
    pairs = [(send + k, np.zeros(n, np.int64)) for k in range(BOUND_ARRAYS + 2)]
    handles = [a2a.ialltoall(mine, s, g, "pairwise") for s, g in pairs * 2]
    for handle in reversed([first, again, *handles]):
        handle.wait()
    assert np.array_equal(got, want) and np.array_equal(other, want)
    for s, g in pairs:
        assert np.array_equal(g, expected(mine, s))


@pytest.mark.mpi
def test_a_rank_whose_rebinding_fails_goes_through_the_copies(mine):
    """A rebinding that fails on rank 0 alone: that rank goes through the plan's own buffers, the others on plans of
    their own, and the messages still match."""
    send, got = np.arange(3 * mine.size, dtype=np.float64) + mine.rank, np.zeros(3 * mine.size)
    a2a.alltoall(mine, send, got, "pairwise")
    cached = cached_of(mine, "pairwise")
    if mine.rank == 0:
        cached.plan._rebind = broken
    for call in range(3):
        got[:] = 0
        a2a.alltoall(mine, send, got, "pairwise")
        assert np.array_equal(got, expected(mine, send)), call
    assert (len(cached.direct), cached.rebinds) == ((0, False) if mine.rank == 0 else (1, True))


def broken(send, recv):
    raise RuntimeError("a rebinding that fails")


@pytest.mark.mpi
def test_alltoallv_with_counts_that_change_from_call_to_call(mine):
    """The same arrays, counts from a matrix that changes at every call (on all ranks, then on ranks 0 and 1 only)."""
    p, r = mine.size, mine.rank
    send, got = np.arange(8 * p, dtype=np.float64) + 100 * r, np.zeros(8 * p)
    for call in range(5):
        counts = np.random.default_rng(call if call < 3 else 3).integers(0, 8, (p, p))
        counts[0, p - 1] = call  # ranks 0 and p-1 only, at calls 3 and 4
        got[:] = -1
        a2a.alltoallv(mine, send, counts[r], got, counts[:, r], "pairwise")
        want = np.full(8 * p, -1.0)
        mine.Alltoallv([send, counts[r]], [want, counts[:, r]])
        assert np.array_equal(got, want), call


@pytest.mark.mpi
@pytest.mark.parametrize("name,options,alone", [
    ("native", {"form": "blocking"}, True), ("native", {"form": "nonblocking"}, True),
    ("native", {"form": "persistent"}, False), ("pairwise", {"schedule": "shift"}, True),
    ("hierarchical", {"ppn": 2}, False),
    ("onesided", {"sync": "fence", "op": "put"}, False), ("auto", {}, False)])
def test_which_factories_prepare_alone(comm, name, options, alone):
    """The probe that decides whether a Python plan may be rebound on one rank: no message, communicator or window."""
    kind = a2a.get(name).kinds["alltoall"]
    options = {k: v for k, v in a2a.get(name).resolve(options).items() if k != "executor"}
    send = np.zeros(2 * comm.size)
    assert prepares_alone(kind, comm, send, np.zeros_like(send), options) is alone


@pytest.mark.mpi
@pytest.mark.parametrize("executor", ["c", "python"])
@pytest.mark.parametrize("in_place", [False, True])
def test_a_plan_rebound_to_other_buffers_runs_beside_its_own(comm, executor, in_place):
    """Plan.rebound: the same exchange on other buffers, on the plan's communicator, called in turn with the plan."""
    from mpi4py import MPI

    n = 3 * comm.size
    send, got = np.arange(n, dtype=np.int32) + 10 * comm.rank, np.zeros(n, np.int32)
    send2, got2 = send + 1000, np.zeros(n, np.int32)
    given = (MPI.IN_PLACE, MPI.IN_PLACE) if in_place else (send, send2)
    if in_place:
        got[:], got2[:] = send, send2
    want, want2 = expected(comm, send), expected(comm, send2)
    with a2a.get("bruck").plan(comm, given[0], got, executor=executor) as plan:
        other = plan.rebound(None if in_place else send2, got2)
        assert other is not None and other.executor == plan.executor == executor
        try:
            other()
            plan()
            assert np.array_equal(got, want) and np.array_equal(got2, want2)
        finally:
            other.free()
