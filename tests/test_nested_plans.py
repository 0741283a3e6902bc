"""A factory that makes a plan of another algorithm on the communicator it is given, and fails on one rank before
making it: one PlanFailed on every rank, naming that rank, never a rank left inside the inner plan's agreement.

Collective (`mpi`): run in-process under `mpirun -n 4 python -m pytest` on the first 2, 3 and 4 ranks; plain pytest
skips them (one rank), and tests/test_planning_failure.py launches the same failures as jobs of 2 to 4 ranks.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import pytest
from support import subcommunicators

import a2a
from a2a.algos.plan import Plan
from a2a.algos.registry import REGISTRY, register

FAILS = "RuntimeError: nested test: rank 1 cannot prepare, on purpose"


@pytest.fixture
def plugin() -> Iterator[Callable[[str, Callable[..., Any]], None]]:
    """Register test algorithms for one test, and remove them after."""
    names: list[str] = []

    def add(name: str, factory: Callable[..., Any]) -> None:
        register(name, candidate=False)(factory)
        names.append(name)

    yield add
    for name in names:
        REGISTRY.all().pop(name, None)


def on_pairwise(comm: Any, sendbuf: Any, recvbuf: Any) -> Any:
    """Alltoall by a plan of pairwise made here; rank 1 raises before making it."""
    if comm.rank == 1:
        raise RuntimeError("nested test: rank 1 cannot prepare, on purpose")
    inner = a2a.get("pairwise").plan(comm, sendbuf, recvbuf)
    return inner, inner.free


def own_allgather(comm: Any, sendbuf: Any, recvbuf: Any) -> Any:
    """Alltoall; rank 1 raises while the others are in an allgather of this factory's own."""
    if comm.rank == 1:
        raise RuntimeError("nested test: rank 1 cannot prepare, on purpose")
    comm.allgather(comm.rank)
    return lambda: comm.Alltoall(sendbuf, recvbuf)


def raised(call: Callable[..., Any], *args: Any, **options: Any) -> str:
    """What `call(*args, **options)` raised, as 'Type: message' ('' where it raised nothing; a plan made is freed)."""
    try:
        made = call(*args, **options)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    if isinstance(made, Plan):
        made.free()
    return ""


@pytest.mark.mpi
@pytest.mark.parametrize("how", ["plan", "one-shot"])
@pytest.mark.parametrize("factory", [on_pairwise, own_allgather], ids=["inner plan", "own allgather"])
def test_a_factory_failing_on_rank_1_is_one_plan_failed_naming_it_on_every_rank(comm, plugin, how, factory):
    if comm.size < 2:
        pytest.skip("needs two ranks")
    name = f"nested_test_{factory.__name__}"
    plugin(name, factory)
    for p, sub in subcommunicators(comm):
        if p < 2 or sub is None:
            continue
        send = np.arange(2 * p, dtype=np.int32)
        recv = np.zeros_like(send)
        if how == "plan":
            said = raised(a2a.get(name).plan, sub, send, recv)
        else:
            said = raised(a2a.alltoall, sub, send, recv, algorithm=name)
            a2a.free_cache(sub)
        assert said.startswith(f"PlanFailed: planning failed on rank 1 of {p}: {FAILS}; every rank raises"), said
        assert sub.allgather(said) == [said] * p  # the same error on every rank
