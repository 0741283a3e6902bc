"""A factory that makes a plan of another algorithm on the communicator it is given: working, its plan gives what
MPI_Alltoall gives in every form (blocking, start/test/wait, init, the one-shot calls) whichever executor runs the
inner plan, and starts without running the exchange; failing on one rank before making it, one PlanFailed on every
rank, naming that rank, never a rank left inside the inner plan's agreement.

Collective (`mpi`): run in-process under `mpirun -n 4 python -m pytest` on the first 2, 3 and 4 ranks; plain pytest
skips them (one rank), and tests/test_planning_failure.py launches the same failures as jobs of 2 to 4 ranks.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from support import subcommunicators

import a2a
from a2a.algos.plan import Plan, Prepared
from a2a.algos.registry import REGISTRY, register

FAILS = "RuntimeError: nested test: rank 1 cannot prepare, on purpose"
EXECUTORS = ["c", "python"]
# how a plan is made and run: called (plan), started and tested to completion (start-test), init then started and
# waited (init), and the one-shot calls
FORMS = ["plan", "start-test", "init", "ialltoall", "alltoall"]


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


def ialltoall_waited(comm: Any, send: Any, recv: Any, algorithm: str) -> None:
    """a2a.ialltoall, waited for."""
    a2a.ialltoall(comm, send, recv, algorithm).wait()


@pytest.mark.mpi
@pytest.mark.parametrize("how", ["plan", "init", "one-shot", "ialltoall"])
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
        if how in ("plan", "init"):
            said = raised(getattr(a2a.get(name), how), sub, send, recv)
        else:
            said = raised(a2a.alltoall if how == "one-shot" else ialltoall_waited, sub, send, recv, algorithm=name)
            a2a.free_cache(sub)
        assert said.startswith(f"PlanFailed: planning failed on rank 1 of {p}: {FAILS}; every rank raises"), said
        assert sub.allgather(said) == [said] * p  # the same error on every rank



def built_on_pairwise(executor: str) -> Callable[..., Any]:
    """A working plug-in's factory: alltoall by a plan of pairwise run by `executor`, made on the communicator given
    (its note says which executor the inner plan got, and the inner plan's note)."""
    def factory(comm: Any, sendbuf: Any, recvbuf: Any) -> Prepared:
        inner = a2a.get("pairwise").plan(comm, sendbuf, recvbuf, executor=executor)
        return Prepared(inner, inner.free, note=f"inner plan run by executor={inner.executor}; {inner.note}")
    return factory


def ran_by(executor: str, note: str) -> bool:
    """Whether a plug-in plan's note says its inner plan ran by `executor` (python where the C one cannot be built
    here, as the inner note says)."""
    unavailable = executor == "c" and "executor=c unavailable" in note
    return f"inner plan run by executor={'python' if unavailable else executor};" in note


def exchanged(form: str, comm: Any, name: str, send: np.ndarray, got: np.ndarray, want: np.ndarray) -> list[str]:
    """Two exchanges of plug-in `name` in `form`, `got` cleared before each: those that differ from `want`, and the
    plan's note."""
    wrong = []
    plan = a2a.get(name).init(comm, send, got) if form == "init" else a2a.get(name).plan(comm, send, got)
    with plan:
        for exchange in ("first", "second"):
            got[...] = 0
            if form == "plan":
                plan()
            elif form == "start-test":
                plan.start()
                while not plan.test():
                    pass
            elif form == "init":
                plan.start()
                plan.wait()
            elif form == "ialltoall":
                a2a.ialltoall(comm, send, got, name).wait()
            else:
                a2a.alltoall(comm, send, got, name)
            if not np.array_equal(got, want):
                wrong.append(f"{exchange} exchange differs")
        note = plan.note
    a2a.free_cache(comm)
    return [*wrong, note]


@pytest.mark.mpi
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("form", FORMS)
def test_a_plug_in_built_on_a_plan_of_pairwise_gives_mpi_alltoall_in_every_form(comm, plugin, form, executor):
    """Its inner plan is made on the communicator the engine stands in for (the C executor refused the stand-in) and
    started by the outer run: every exchange right, at every p, the inner plan run by the executor asked."""
    name = f"nested_test_on_pairwise_{executor}"
    plugin(name, built_on_pairwise(executor))
    wrong = []  # asserted after the loop: a rank that raised inside it would leave the others in its barrier
    for p, sub in subcommunicators(comm):
        if sub is None:
            continue
        send = np.arange(3 * p, dtype=np.int64) + 1000 * sub.rank
        want, got = np.empty_like(send), np.zeros_like(send)
        sub.Alltoall(send, want)
        try:
            *differ, note = exchanged(form, sub, name, send, got, want)
        except Exception as error:
            differ, note = [f"{type(error).__name__}: {error}"], ""
        wrong += [f"p={p}: {problem}" for problem in differ]
        wrong += [] if differ or ran_by(executor, note) else [f"p={p}: not run by executor={executor}: {note}"]
    assert not wrong, wrong


@pytest.mark.mpi
@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_plug_in_built_on_a_plan_starts_without_running_the_exchange(comm, plugin, executor):
    """Rank 0 only starts; the others test for a while. Rank 0's start returns with the exchange in flight (the
    inner plan started, not run whole inside the outer start), and every exchange completes right in wait(). Run by
    the Python engine, no other rank completes without rank 0 (1 MiB blocks, each rank sends rank 0 one in a round
    rank 0 has not posted); the C executor may complete rank 0's part inside MPI, where MPICH's progress hook runs."""
    if comm.size < 3:
        pytest.skip("needs three rounds or more: three ranks")
    name = f"nested_test_started_{executor}"
    plugin(name, built_on_pairwise(executor))
    send = np.arange(comm.size * (1 << 17), dtype=np.float64) + comm.rank
    want, got = np.empty_like(send), np.zeros_like(send)
    comm.Alltoall(send, want)
    with a2a.get(name).init(comm, send, got) as plan:
        plan.start()
        if comm.rank != 0:
            until = time.monotonic() + 0.3
            while time.monotonic() < until:
                plan.test()
        seen = comm.allgather(plan.progression.active)
        comm.Barrier()  # on the caller's communicator: the plan's messages travel on a private one
        plan.wait()
        assert seen[0], "rank 0's start ran the whole exchange"
        assert executor == "c" or all(seen[1:]), f"a rank completed without rank 0: {seen}"
        assert np.array_equal(got, want)
