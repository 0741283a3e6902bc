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
