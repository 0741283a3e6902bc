"""The one-shot calls: ialltoall(v) returns at once (two communicators started in opposite orders complete), a
wrong call is one error on every rank, and a call made again takes its cached plan."""
from __future__ import annotations

import time

import numpy as np
import pytest

import a2a
from a2a.algos.registry import algorithms

DEADLINE = 60.0  # seconds for every exchange of one algorithm; the conftest watchdog ends a job stuck longer


def opposite_order(comm, start, expect) -> list[tuple]:
    """Start an exchange on A then B (odd ranks: B then A), test both to the end (odd ranks testing B's first),
    wait in the reverse order: each (got, expected) pair, as the library's own call on `comm` gives it."""
    A, B = comm.Dup(), comm.Dup()
    try:
        order = [A, B] if comm.rank % 2 == 0 else [B, A]
        exchanges = [start(c, 0 if c is A else 7) for c in order]
        handles = [h for h, _, _ in exchanges]
        began = time.monotonic()
        while not all([h.test() for h in handles]):
            assert time.monotonic() - began < DEADLINE, "the exchanges did not complete"
            time.sleep(1e-4)  # ranks may outnumber the cores: the peers these tests wait on get them sooner
        for h in reversed(handles):
            h.wait()
        return [(got, expect(comm, call)) for _, got, call in sorted(exchanges, key=lambda e: e[2][-1])]
    finally:
        a2a.free_cache(A), a2a.free_cache(B)
        A.Free(), B.Free()


def alltoall_on(name):
    def start(c, shift):
        p, r = c.size, c.rank
        send = np.arange(3 * p, dtype=np.int32) + 100 * r + shift
        got = np.zeros_like(send)
        return a2a.ialltoall(c, send, got, name), got, (send, shift)
    return start


def alltoall_expected(comm, call):
    expected = np.empty_like(call[0])
    comm.Alltoall(call[0], expected)
    return expected


def alltoallv_on(name):
    def start(c, shift):
        p, r = c.size, c.rank
        sendcounts = np.array([(r + j) % 3 + 1 for j in range(p)])
        recvcounts = np.array([(j + r) % 3 + 1 for j in range(p)])
        send = np.arange(sendcounts.sum(), dtype=np.float64) + 100 * r + shift
        got = np.zeros(recvcounts.sum())
        return a2a.ialltoallv(c, send, sendcounts, got, recvcounts, name), got, (send, sendcounts, recvcounts, shift)
    return start


def alltoallv_expected(comm, call):
    send, sendcounts, recvcounts, _ = call
    expected = np.empty(recvcounts.sum())
    comm.Alltoallv([send, sendcounts], [expected, recvcounts])
    return expected


@pytest.mark.mpi
@pytest.mark.parametrize("collective", ["alltoall", "alltoallv"])
def test_two_communicators_started_in_opposite_orders_complete_with_every_algorithm(comm, collective):
    """On every p from 2 to the job's size (sub-communicators of it), every algorithm, twice (a miss, then a hit)."""
    on, expect = (alltoall_on, alltoall_expected) if collective == "alltoall" else (alltoallv_on, alltoallv_expected)
    for p in range(2, comm.size + 1):
        sub = comm.Split(0 if comm.rank < p else 1, comm.rank)
        for name in algorithms(collective):
            if name == "auto" or comm.rank >= p:
                continue
            for _ in range(2):
                for got, expected in opposite_order(sub, on(name), expect):
                    assert np.array_equal(got, expected), f"{name} at p={p}"
        sub.Free()


class Counting:
    """The agreeing duplicate, counting the digests posted on it."""

    def __init__(self, real):
        self.real, self.posted = real, 0

    def Iallreduce(self, *args):
        self.posted += 1
        return self.real.Iallreduce(*args)

    def __getattr__(self, name):
        return getattr(self.real, name)


def caller_counting(comm):
    """The communicator's one-shot Caller (made by a first call), its digests counted from now on."""
    from a2a.execute.oneshot import caller_of

    caller = caller_of(comm)
    caller.agreeing = Counting(caller.agreeing)
    return caller


@pytest.mark.mpi
def test_an_alltoall_agrees_on_a_miss_only_and_its_buffers_may_change_on_one_rank(comm):
    """A hit posts no digest, whatever each rank's buffers: rank 0 gives new arrays (and in place) at every call,
    the others the same ones; every result is the library's."""
    mine = comm.Dup()
    try:
        caller = caller_counting(mine)
        send = np.arange(4 * mine.size, dtype=np.int64) + 1000 * mine.rank
        want = np.empty_like(send)
        mine.Alltoall(send, want)
        kept = np.zeros_like(send)
        for call in range(6):
            fresh = mine.rank == 0 and call % 2 == 1
            got = np.zeros_like(send) if fresh else kept
            a2a.alltoall(mine, send.copy() if fresh else send, got, "pairwise")
            assert np.array_equal(got, want), call
            a2a.ialltoall(mine, send, got, "pairwise").wait()
            assert np.array_equal(got, want), call
        assert caller.agreeing.posted == 1  # the first call: a miss (the non-blocking one shares the plan)
        inplace = send.copy()
        a2a.alltoall(mine, MPI_IN_PLACE(), inplace, "pairwise")
        assert np.array_equal(inplace, want) and caller.agreeing.posted == 2  # in place: another key, a miss
        half, want_half = send[:2 * mine.size].copy(), np.empty(2 * mine.size, np.int64)
        mine.Alltoall(half, want_half)
        got_half = np.zeros_like(half)
        a2a.alltoall(mine, half, got_half, "pairwise")
        assert np.array_equal(got_half, want_half) and caller.agreeing.posted == 3  # another count: a miss
    finally:
        a2a.free_cache(mine)
        mine.Free()


def MPI_IN_PLACE():
    from mpi4py import MPI

    return MPI.IN_PLACE


@pytest.mark.mpi
def test_two_exchanges_on_one_cached_plan_into_two_buffers_both_complete_right(comm):
    """Double buffering: two ialltoall of the same call into two receive buffers, in flight together (the second
    starts once the first completes, as one plan runs one exchange at a time), waited in reverse order."""
    send = np.arange(3 * comm.size, dtype=np.float64) + 10 * comm.rank
    want = np.empty_like(send)
    comm.Alltoall(send, want)
    first, second = np.zeros_like(send), np.zeros_like(send)
    a2a.ialltoall(comm, send, first, "pairwise").wait()  # the plan cached
    handles = [a2a.ialltoall(comm, send, got, "pairwise") for got in (first, second)]
    for handle in reversed(handles):
        handle.wait()
    assert np.array_equal(first, want) and np.array_equal(second, want)
    a2a.free_cache(comm)


@pytest.mark.mpi
def test_the_cache_keeps_its_stated_number_of_plans(comm):
    from a2a.execute.oneshot import CACHE_PLANS, caller_of

    for count in range(1, CACHE_PLANS + 5):
        send = np.arange(count * comm.size, dtype=np.int32) + comm.rank
        got, want = np.zeros_like(send), np.empty_like(send)
        comm.Alltoall(send, want)
        a2a.alltoall(comm, send, got, "pairwise")
        assert np.array_equal(got, want)
    assert len(caller_of(comm).plans) == CACHE_PLANS
    a2a.free_cache(comm)
    assert not caller_of(comm).plans
