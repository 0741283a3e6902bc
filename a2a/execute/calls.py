"""The one-shot calls, with the algorithm named (a name unknown on some rank is an error on every rank): blocking,
and their non-blocking forms, which return at once a Handle of the exchange started. Both go through the
communicator's cache of plans (a2a.execute.oneshot): a call made again costs what the plan costs."""
from __future__ import annotations

from typing import Any

from a2a.algos.buffers import alltoallv_call
from a2a.algos.registry import get
from a2a.execute.oneshot import Handle, alltoall_shot, one_shot
from a2a.record.results import NATIVE


def alltoall(comm: Any, sendbuf: Any, recvbuf: Any, algorithm: str = NATIVE, **options: Any) -> None:
    """One all-to-all with the named algorithm (its plan cached for the next call alike)."""
    made = alltoall_shot(comm, sendbuf, recvbuf, algorithm, options, blocking=True)
    if made is not None:  # None: a call made before, done already
        _done(made)


def alltoallv(comm: Any, sendbuf: Any, sendcounts: Any, recvbuf: Any, recvcounts: Any, algorithm: str = NATIVE,
              sdispls: Any = None, rdispls: Any = None, **options: Any) -> None:
    """One MPI_Alltoallv-like exchange with the named algorithm (counts and displacements in elements)."""
    call = lambda: alltoallv_call(comm, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls)  # noqa: E731
    _done(one_shot(comm, lambda: get(algorithm), "alltoallv", options, call, blocking=True))


def ialltoall(comm: Any, sendbuf: Any, recvbuf: Any, algorithm: str = NATIVE, **options: Any) -> Handle:
    """Start one all-to-all with the named algorithm and return at once, as MPI_Ialltoall: test() or wait() it."""
    options = _nonblocking(algorithm, options)
    return _started(alltoall_shot(comm, sendbuf, recvbuf, algorithm, options, blocking=False))


def ialltoallv(comm: Any, sendbuf: Any, sendcounts: Any, recvbuf: Any, recvcounts: Any, algorithm: str = NATIVE,
               sdispls: Any = None, rdispls: Any = None, **options: Any) -> Handle:
    """Start one MPI_Alltoallv-like exchange with the named algorithm: MPI_Ialltoallv's."""
    call = lambda: alltoallv_call(comm, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls)  # noqa: E731
    options = _nonblocking(algorithm, options)
    return _started(one_shot(comm, lambda: get(algorithm), "alltoallv", options, call, blocking=False))


def _nonblocking(algorithm: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options of a non-blocking call: native's form MPI_Ialltoall(v) unless one is named."""
    if algorithm == NATIVE and "form" not in options:
        options["form"] = "nonblocking"  # a dict of this call's own (its **options)
    return options


def _done(made: Any) -> None:
    """Complete a blocking one-shot call: a Handle waited for, or an intercommunicator's plan run once and freed."""
    if isinstance(made, Handle):
        made.wait()
        return
    with made as plan:
        plan()


def _started(made: Any) -> Any:
    """A non-blocking one-shot call's handle (an intercommunicator's plan started, freed once complete)."""
    if isinstance(made, Handle):
        return made
    made.start()
    return OwnPlan(made)


class OwnPlan:
    """The handle of an exchange on a plan of its own (an intercommunicator's): freed once complete."""

    def __init__(self, plan: Any):
        self.plan = plan

    def test(self) -> bool:
        """Advance the exchange; whether it is complete."""
        if self.plan is not None and self.plan.test():
            self._free()
        return self.plan is None

    def wait(self) -> None:
        """Complete the exchange."""
        if self.plan is not None:
            try:
                self.plan.wait()
            finally:
                self._free()

    def _free(self) -> None:
        self.plan.free()
        self.plan = None
