"""Run the suite as plain pytest or as `mpirun -n N python -m pytest`.

Tests marked `mpi` are collective: every rank runs them in-process on MPI.COMM_WORLD, a
failure on any rank fails the test on every rank, and a watchdog aborts the job if one hangs.
Every other test runs on rank 0 alone while the other ranks wait asleep, so tests that
launch their own `mpiexec` get the cores. Only rank 0 prints.
"""
from __future__ import annotations

import os
import sys
import threading

import pytest

from a2a.mpi import idle_barrier, world

WATCHDOG_SECONDS = float(os.environ.get("A2A_TEST_WATCHDOG", "300"))


def pytest_configure(config: pytest.Config) -> None:
    comm = world()
    if comm.size > 1 and comm.rank != 0:
        config.option.verbose = -2
        sys.stdout = open(os.devnull, "w")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    comm = world()
    if comm.size > 1:
        # every rank must meet the collective tests in the same order
        names = comm.bcast([item.nodeid for item in items] if comm.rank == 0 else None)
        if names != [item.nodeid for item in items]:
            raise pytest.UsageError("ranks collected different tests; run the same command on every rank")


@pytest.fixture
def comm():
    """MPI.COMM_WORLD, for collective (`mpi`-marked) tests."""
    return world()


@pytest.fixture(autouse=True)
def _one_rank_unless_collective(request: pytest.FixtureRequest):
    comm = world()
    if comm.size == 1 or request.node.get_closest_marker("mpi"):
        yield
        return
    if comm.rank != 0:
        idle_barrier(comm)
        pytest.skip("runs on rank 0; the other ranks wait")
    try:
        yield
    finally:
        idle_barrier(comm)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    comm = world()
    if comm.size == 1 or not item.get_closest_marker("mpi"):
        yield
        return
    timer = threading.Timer(WATCHDOG_SECONDS, _abort_hung, (comm, item.nodeid))
    timer.daemon = True
    timer.start()
    outcome = yield
    timer.cancel()
    error = outcome.excinfo
    mine = None if error is None else f"{error[0].__name__}: {error[1]}"
    failures = [(rank, text) for rank, text in enumerate(comm.allgather(mine)) if text]
    if failures and error is None:
        lines = "; ".join(f"rank {rank}: {text.splitlines()[0] if text else ''}" for rank, text in failures)
        outcome.force_exception(AssertionError(f"failed on other ranks: {lines}"))


def _abort_hung(comm, nodeid: str) -> None:
    sys.__stderr__.write(f"[rank {comm.rank}] {nodeid} did not finish within {WATCHDOG_SECONDS:.0f} s; "
                         "aborting the job\n")
    sys.__stderr__.flush()
    comm.Abort(3)
