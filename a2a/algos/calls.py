"""The one-shot calls: plan, run once, free, with the algorithm named (a name unknown on some rank is an error on
every rank)."""
from __future__ import annotations

from typing import Any

from a2a.algos.buffers import alltoall_call, alltoallv_call
from a2a.algos.plan import planned
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
