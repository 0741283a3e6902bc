"""The one-shot calls: plan, run once, free, with the algorithm named (a name unknown on some rank is an error on
every rank); and their non-blocking forms, which return a Handle of the exchange started."""
from __future__ import annotations

from typing import Any

from a2a.algos.buffers import alltoall_call, alltoallv_call
from a2a.algos.plan import Plan, planned
from a2a.algos.registry import get
from a2a.record.results import NATIVE


def alltoall(comm: Any, sendbuf: Any, recvbuf: Any, algorithm: str = NATIVE, **options: Any) -> None:
    """One all-to-all with the named algorithm (plans, runs once, frees)."""
    with planned(comm, lambda: get(algorithm), "alltoall", options,
                 lambda: alltoall_call(comm, sendbuf, recvbuf)) as plan:
        plan()


def alltoallv(comm: Any, sendbuf: Any, sendcounts: Any, recvbuf: Any, recvcounts: Any, algorithm: str = NATIVE,
              sdispls: Any = None, rdispls: Any = None, **options: Any) -> None:
    """One MPI_Alltoallv-like exchange with the named algorithm (counts and displacements in elements)."""
    call = lambda: alltoallv_call(comm, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls)  # noqa: E731
    with planned(comm, lambda: get(algorithm), "alltoallv", options, call) as plan:
        plan()


class Handle:
    """An exchange started by ialltoall or ialltoallv: test() it, wait() for it; its plan is freed once complete."""

    def __init__(self, plan: Plan):
        self.plan: Plan | None = plan

    def test(self) -> bool:
        """Advance the exchange; whether it is complete."""
        if self.plan is not None and self.plan.test():
            self._done()
        return self.plan is None

    def wait(self) -> None:
        """Complete the exchange."""
        if self.plan is not None:
            self.plan.wait()
            self._done()

    def _done(self) -> None:
        self.plan.free()
        self.plan = None


def ialltoall(comm: Any, sendbuf: Any, recvbuf: Any, algorithm: str = NATIVE, **options: Any) -> Handle:
    """Start one all-to-all with the named algorithm (planned collectively now, then started): MPI_Ialltoall's."""
    plan = planned(comm, lambda: get(algorithm), "alltoall", options, lambda: alltoall_call(comm, sendbuf, recvbuf),
                   nonblocking=True)
    plan.start()
    return Handle(plan)


def ialltoallv(comm: Any, sendbuf: Any, sendcounts: Any, recvbuf: Any, recvcounts: Any, algorithm: str = NATIVE,
               sdispls: Any = None, rdispls: Any = None, **options: Any) -> Handle:
    """Start one MPI_Alltoallv-like exchange with the named algorithm: MPI_Ialltoallv's."""
    call = lambda: alltoallv_call(comm, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls)  # noqa: E731
    plan = planned(comm, lambda: get(algorithm), "alltoallv", options, call, nonblocking=True)
    plan.start()
    return Handle(plan)
