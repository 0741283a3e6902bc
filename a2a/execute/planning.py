"""How a plan is made: one rank's call checked alone, the ranks' agreement, then the factory run on a private
duplicate of the communicator, for the C executor (executor=c) or as Python whose non-blocking form the progression
engine advances; a rank that fails to prepare its part is one error on every rank (alike), never a peer left waiting.
a2a.algos.registry names this module for Algorithm.plan, .plan_v, .init and .init_v.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import numpy as np

from a2a.algos.buffers import VBuffer, is_inter
from a2a.algos.options import EXECUTOR, schedule_options
from a2a.algos.plan import Plan, Prepared
from a2a.algos.prebuilt import copier
from a2a.errors import A2AError, BadInput, PlanFailed
from a2a.execute.agreement import Signature, agree, ended, first_failures, matched_counts
from a2a.execute.engine import EngineComm, Progression, Unprogressable, engine_module, unprogressable_names
from a2a.execute.executor import ExecutorUnavailable, executed
from a2a.record.results import NATIVE
from a2a.schedules.mpi_module import replaced_mpi

# what mpi4py.MPI does not give a factory prepared alone (prepares_alone): the process's communicators, the classes
# of communicators (a test of one), windows and files
REFUSED = ("COMM_WORLD", "COMM_SELF", "Comm", "Intracomm", "Intercomm", "Topocomm", "Cartcomm", "Graphcomm",
           "Distgraphcomm", "Win", "File", "Group")


@dataclass
class Checked:
    """One rank's call, checked alone: what it asks for, or its problem (then the rest may be missing)."""

    problem: A2AError | None
    signature: Signature | None = None  # what every rank must give alike: a2a.execute.agreement.describe reads it
    algorithm: Any = None
    kind: Any = None
    resolved: dict[str, Any] = field(default_factory=dict)
    send: Any = None
    recv: Any = None


def checked(comm: Any, find: Callable[[], Any], collective: str, options: dict[str, Any],
            call: Callable[[], tuple[Any, Any, tuple]]) -> Checked:
    """This rank's call checked on its own (`call` returns send, recv and their signature); no message moves."""
    try:
        found = find()
        kind = found.kind(collective)
        resolved = found.resolve(options)
        if is_inter(comm) and not kind.intercomm:
            raise BadInput(f"{found.name} does not serve intercommunicators; accepted: an intracommunicator, "
                           f"or {NATIVE} (the library's own {collective} between the two groups)")
        send, recv, shape = call()
    except A2AError as error:
        return Checked(error)
    signature = (found.name, tuple(sorted((k, str(v)) for k, v in resolved.items())), *shape)
    return Checked(None, signature, found, kind, resolved, send, recv)


def planned(comm: Any, find: Callable[[], Any], collective: str, options: dict[str, Any],
            call: Callable[[], tuple[Any, Any, tuple]], nonblocking: bool = False) -> Plan:
    """A plan of the algorithm `find()` gives, once every rank has checked its call (`call` returns send, recv and
    their signature) and the ranks agree: whatever is wrong on any rank, an unknown name or option included, is one
    BadInput on every rank. `nonblocking`: prepare its non-blocking form only (start, test, wait).

    On the progression engine's communicator (a factory prepared for the engine makes a plan of another algorithm),
    the plan is made on the real communicator behind it, which the C executor needs, in its non-blocking form only:
    called inside the outer run, it starts, and its wait parks that run (a2a.execute.engine.Nested)."""
    nested = isinstance(comm, EngineComm)
    comm = comm.real if nested else comm
    mine = checked(comm, find, collective, options, call)
    agree(comm, mine.problem, mine.signature)
    if collective == "alltoallv":
        matched_counts(comm, mine.send, mine.recv)
    plan = prepare(comm, mine.algorithm, mine.kind, mine.resolved, mine.send, mine.recv, nonblocking or nested)
    if nested:
        plan.run = None  # a call starts and waits (the C executor's plan is made with a blocking form as well)
    return plan


def prepare(comm: Any, algorithm: Any, kind: Any, resolved: dict[str, Any], send: Any, recv: Any,
            nonblocking: bool = False) -> Plan:
    """Run the factory of `kind` on a private duplicate of `comm` (agreed already): the plan, in its blocking form or
    (`nonblocking`) its non-blocking one; the other is made when first used."""
    private = comm.Dup()  # our point-to-point traffic cannot match the caller's
    return prepared_on(private, algorithm, kind, resolved, send, recv, nonblocking)


def prepared_on(private: Any, algorithm: Any, kind: Any, resolved: dict[str, Any], send: Any, recv: Any,
                nonblocking: bool = False) -> Plan:
    """`prepare` on `private`, a duplicate made already, which the plan then owns (and frees)."""
    note, options = "", schedule_options(resolved)
    if resolved.get(EXECUTOR) == "c":
        try:
            return _in_c(private, algorithm, kind, resolved, options, send, recv, nonblocking)
        except ExecutorUnavailable as missing:
            note = f"{algorithm.name}: executor=c unavailable, ran executor=python ({missing})"
        except BaseException:
            private.Free()
            raise
    try:
        plan = alike(private, partial(_in_python, private, algorithm, kind, resolved, options, send, recv,
                                      nonblocking, note, []), Plan.free)
    except BaseException:
        private.Free()
        raise
    if plan.progression is None:  # made at the first start, by every rank together
        plan._progressive = partial(alike, private, plan._progressive, lambda made: made.free and made.free())
    plan._comm = private
    return plan


def alike(comm: Any, make: Callable[[], Any], release: Callable[[Any], Any]) -> Any:
    """What `make()` returns on every rank of `comm`, or one error on every rank where it raised on any (collective):
    its own where every rank raised alike, else PlanFailed naming each rank that failed first and its cause (what the
    others made is released, so no rank waits on a peer that will never come). Peers inside a plan that `make` makes
    on `comm` itself are told the failure there (a2a.execute.agreement.ended)."""
    made = failure = None
    try:
        made = make()
    except Exception as error:
        failure = error
    said = ended(comm, failure)
    if not any(cause for _, cause, _ in said):
        return made
    if failure is not None and said.count(said[0]) == len(said) and not said[0][2]:
        raise failure
    if failure is None:
        release(made)
    raise PlanFailed.of(first_failures(said)) from failure


def _in_python(comm: Any, algorithm: Any, kind: Any, resolved: dict[str, Any], options: dict[str, Any], send: Any,
               recv: Any, nonblocking: bool, note: str, alone: list[bool]) -> Plan:
    """The factory's plan on `comm` (not owned), rebound by running the factory again where it prepares alone on
    this rank (`alone`: that verdict, once found)."""
    staging = None
    if send is None and not kind.in_place:  # in place: the schedule reads a copy of recvbuf
        send, staging = _staged(recv)
    progressive = partial(_progression, algorithm.name, kind.factory, comm, send, recv, options, staging)
    if nonblocking:
        progression = progressive()
        plan = Plan(algorithm, resolved, None, None, None, _joined(note, progression.note), progression, progressive)
    else:
        made = _made(kind.factory(comm, send, recv, **options))
        plan = Plan(algorithm, resolved, _after(staging, made.run), made.free, None, _joined(note, made.note), None,
                    progressive)
    plan._rebind = partial(_python_rebound, comm, algorithm, kind, resolved, options, note, alone)
    return plan


def _python_rebound(comm: Any, algorithm: Any, kind: Any, resolved: dict[str, Any], options: dict[str, Any],
                    note: str, alone: list[bool], send: Any, recv: Any) -> Plan | None:
    """The factory's plan on other buffers, on the same communicator; None where the factory communicates."""
    if not alone:
        alone.append(prepares_alone(kind, comm, send, recv, options))
    return _in_python(comm, algorithm, kind, resolved, options, send, recv, False, note, alone) if alone[0] else None


def _in_c(private: Any, algorithm: Any, kind: Any, resolved: dict[str, Any], options: dict[str, Any], send: Any,
          recv: Any, nonblocking: bool) -> Plan:
    """The plan run by the C executor (a2a.execute.executor) on `private` itself: blocking, or started as one request
    it tests and waits. In place, it reads a staged copy of recvbuf."""
    staging = None
    if send is None:
        send, staging = _staged(recv)
    collective = next(c for c, k in algorithm.kinds.items() if k is kind)
    made = executed(private, algorithm, collective, options, send, recv)
    return _run_in_c(made, private, algorithm, resolved, staging, nonblocking, private)


def _run_in_c(made: Any, comm: Any, algorithm: Any, resolved: dict[str, Any], staging: Callable[[], Any] | None,
              nonblocking: bool, owned: Any) -> Plan:
    """A Plan of the C executor's `made` on `comm` (`owned`: the communicator the plan frees, or None), rebound by
    binding the same schedule to other buffers on `comm` (no message)."""
    run = _after(staging, made.run)
    progressive = partial(Progression, run, None, made.note, request=_after(staging, made.start))
    plan = Plan(algorithm, resolved, run, made.free, owned, made.note,
                progressive() if nonblocking else None, progressive, executor="c")
    plan._rebind = partial(_c_rebound, made, comm, algorithm, resolved)
    return plan


def _c_rebound(made: Any, comm: Any, algorithm: Any, resolved: dict[str, Any], send: Any, recv: Any) -> Plan:
    """The C executor's schedule of `made` bound to other buffers on `comm`."""
    staging = None
    if send is None:
        send, staging = _staged(recv)
    return _run_in_c(made.rebound(comm, send, recv), comm, algorithm, resolved, staging, False, None)


def prepares_alone(kind: Any, comm: Any, send: Any, recv: Any, options: dict[str, Any]) -> bool:
    """Whether the factory prepares a plan on this rank without a message, a communicator made or a window: run once
    on a communicator that answers its size and rank only, under an mpi4py.MPI without communicators or windows."""
    from mpi4py import MPI

    if send is None and not kind.in_place:
        send = np.empty_like(recv)
    try:
        with replaced_mpi(_alone_module(MPI)):
            kind.factory(Alone(comm), send, recv, **options)
    except Exception:  # refused, or anything else: its preparation is not known to be local
        return False
    return True


class Communicates(Exception):
    """A factory prepared alone reached for a communicator, a window or a file."""


class Alone:
    """A communicator that answers its size and rank (and that it is one group); a call of anything else raises
    Communicates, and so does reading any other attribute."""

    def __init__(self, comm: Any):
        self.size, self.rank, self.real = comm.Get_size(), comm.Get_rank(), type(comm)

    def Get_size(self) -> int:
        return self.size

    def Get_rank(self) -> int:
        return self.rank

    def Is_inter(self) -> bool:
        return False

    def Is_intra(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        if not callable(getattr(self.real, name, None)):
            raise Communicates(f"comm.{name}")

        def refused(*args: Any, **kwargs: Any) -> None:  # bound at preparation, called by the run only: allowed
            raise Communicates(f"comm.{name}()")
        return refused


def _alone_module(mpi: types.ModuleType) -> types.ModuleType:
    """`mpi` without what reaches other ranks or names a communicator's class (REFUSED)."""
    module = types.ModuleType("mpi4py.MPI", "a factory prepared alone (a2a.execute.planning.prepares_alone)")

    def attribute(name: str) -> Any:
        if name in REFUSED:
            raise Communicates(f"MPI.{name}")
        return getattr(mpi, name)

    vars(module)["__getattr__"] = attribute  # PEP 562: every name is looked up in `mpi`
    return module


def _progression(name: str, factory: Callable[..., Any], comm: Any, send: Any, recv: Any, options: dict[str, Any],
                 staging: Callable[[], Any] | None) -> Progression:
    """The factory prepared for the progression engine; where it reaches for what has no non-blocking form (or says
    its run is a blocking library call), its plain plan, run inside wait()."""
    from mpi4py import MPI

    try:
        with replaced_mpi(engine_module(MPI)):
            made = _made(factory(EngineComm(comm, MPI), send, recv, **options))
        named = unprogressable_names(made.run)
        if named is not None:
            if made.free is not None:
                made.free()
            raise Unprogressable(named)
        if made.request is not None:  # one library request: prepared again on the real communicator, so that
            if made.free is not None:  # nothing of the engine's stands between each start and the library
                made.free()
            made = _made(factory(comm, send, recv, **options))
    except Unprogressable as missing:
        made = _made(factory(comm, send, recv, **options))
        note = f"{name}: {missing} has no non-blocking form; a start() runs the whole exchange inside wait()"
        return Progression(_after(staging, made.run), made.free, _joined(note, made.note), in_wait=True)
    note = f"{name}: a blocking library call; a start() runs it whole inside wait()" if made.in_wait else ""
    request = made.request and _after(staging, made.request)
    return Progression(_after(staging, made.run), made.free, _joined(note, made.note), in_wait=made.in_wait,
                       request=request)


def _made(made: Any) -> Prepared:
    """What a factory returned, as Prepared."""
    if isinstance(made, Prepared):
        return made
    return Prepared(*made) if isinstance(made, tuple) else Prepared(made, getattr(made, "free", None))


def _joined(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _staged(recv: Any) -> tuple[Any, Callable[[], Any]]:
    """For a call in place: a send side that is a copy of recvbuf, and the prebuilt copy that fills it."""
    if isinstance(recv, VBuffer):
        array = np.empty_like(recv.array)
        return VBuffer(array, recv.counts, recv.displs), copier(array, recv.array)
    array = np.empty_like(recv)
    return array, copier(array, recv)


def _after(first: Callable[[], Any] | None, run: Callable[[], Any]) -> Callable[[], Any]:
    """`run` (what it returns), after `first` when there is one (a call in place stages its data first)."""
    if first is None:
        return run

    def staged_run() -> Any:
        first()
        return run()
    return staged_run
