"""A plan rebound to other buffers on one rank alone (Plan.rebound): where the factory prepares without a message,
and the same exchange beside the plan's own."""
from __future__ import annotations

import numpy as np
import pytest

import a2a
from a2a.execute.planning import prepares_alone


def expected(comm, send):
    want = np.empty_like(send)
    comm.Alltoall(send, want)
    return want


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
