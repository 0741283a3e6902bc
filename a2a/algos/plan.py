"""Plan: an algorithm prepared for given buffers; `planned` makes one once every rank agrees on the call.

A factory does all preparation and returns ``run`` (one all-to-all), ``(run, free)``, or
``Prepared(run, free, note)`` when the row should say something (a fallback schedule, say).
The plan runs it on a private duplicate of the caller's communicator, so its messages never
match the caller's; a call in place gets a staged copy of the receive buffer unless the
algorithm takes MPI.IN_PLACE itself.

A plan is blocking (call it) and non-blocking (start, test, wait): the non-blocking form is the
same factory prepared for the progression engine (a2a.algos.engine), made at plan time for a
plan from `Algorithm.init`, else by the first start() (collectively, as MPI_Alltoall_init).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import numpy as np

from a2a.algos.agreement import agree, matched_counts
from a2a.algos.buffers import VBuffer, is_inter
from a2a.algos.engine import EngineComm, Progression, Unprogressable, engine_module, unprogressable_names
from a2a.algos.executor import ExecutorUnavailable, executed
from a2a.algos.mpi_module import replaced_mpi
from a2a.algos.options import EXECUTOR, schedule_options
from a2a.algos.prebuilt import copier
from a2a.errors import A2AError, BadInput
from a2a.record.results import NATIVE


@dataclass(frozen=True)
class Prepared:
    """What a factory returns when it has more to say than `run` or `(run, free)`: a note for the row."""

    run: Callable[[], Any]
    free: Callable[[], Any] | None = None
    note: str = ""  # e.g. a fallback to another schedule at this process count
    in_wait: bool = False  # run is a blocking library call: the non-blocking form runs it whole inside wait()
    request: Callable[[], Any] | None = None  # run is one library request: this starts it (test and wait are its own)


@dataclass
class Plan:
    """A prepared all-to-all: call it for one exchange, or start() it and test() or wait(); free it (or use `with`)."""

    algorithm: Any  # the a2a.algos.registry.Algorithm it was made from
    options: dict[str, Any]
    run: Callable[[], Any] | None  # the blocking form (None: not prepared; a call then starts and waits)
    _free: Callable[[], Any] | None = field(default=None, repr=False)
    _comm: Any = field(default=None, repr=False)
    note: str = ""  # what the row should say about this plan (the factory's Prepared.note)
    progression: Progression | None = None  # the non-blocking form, once prepared
    _progressive: Callable[[], Progression] | None = field(default=None, repr=False)
    executor: str = "python"  # what runs it: "c" where the C executor runs its schedule (a2a.algos.executor)
    holder: Any = None  # the one-shot handle whose exchange is in flight on it (a2a.algos.oneshot)

    def __call__(self) -> None:
        if self.progression is not None and self.progression.active:
            raise BadInput("this plan's exchange is in flight (started, not waited for); wait() for it first")
        if self.run is None:
            self.start()
            self.wait()
        else:
            self.run()

    def ready_to_start(self) -> None:
        """Prepare the non-blocking form now if it is not (collectively, as MPI_Alltoall_init)."""
        if self.progression is None:
            if self._progressive is None:
                raise BadInput("this plan has been freed; make a new one")
            self.progression = self._progressive()

    def start(self) -> None:
        """Begin one exchange without waiting for it (the first start prepares the non-blocking form, collectively)."""
        self.ready_to_start()
        self.progression.start()

    def test(self) -> bool:
        """Advance the exchange started (post every round whose inputs arrived); whether it is complete."""
        return self.progression.test() if self.progression is not None else True

    def wait(self) -> None:
        """Complete the exchange started."""
        if self.progression is not None:
            self.progression.wait()

    def free(self) -> None:
        """Release requests, buffers and communicators the plan holds; an exchange in flight completes first (as
        every rank frees its plan, every rank completes it), so no request stays live over released buffers."""
        if self.progression is not None:
            try:
                self.progression.wait()
            finally:
                self.progression.close()
        for release in (self._free, self.progression.free if self.progression else None):
            if release is not None:
                release()
        if self._comm is not None:
            self._comm.Free()
        self._free = self._comm = self.progression = self._progressive = None
        self.run = _freed

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()


def _freed() -> None:
    raise BadInput("this plan has been freed; make a new one")


@dataclass
class Checked:
    """One rank's call, checked alone: what it asks for, or its problem (then the rest may be missing)."""

    problem: A2AError | None
    signature: Any = None  # what every rank must give alike: a2a.algos.agreement.describe reads it
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
    BadInput on every rank. `nonblocking`: prepare its non-blocking form only (start, test, wait)."""
    mine = checked(comm, find, collective, options, call)
    agree(comm, mine.problem, mine.signature)
    if collective == "alltoallv":
        matched_counts(comm, mine.send, mine.recv)
    return prepare(comm, mine.algorithm, mine.kind, mine.resolved, mine.send, mine.recv, nonblocking)


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
    staging = None
    if send is None and not kind.in_place:  # in place: the schedule reads a copy of recvbuf
        send, staging = _staged(recv)
    progressive = partial(_progression, algorithm.name, kind.factory, private, send, recv, options, staging)
    try:
        made = None if nonblocking else _made(kind.factory(private, send, recv, **options))
        progression = progressive() if nonblocking else None
    except BaseException:
        private.Free()
        raise
    if made is None:
        return Plan(algorithm, resolved, None, None, private, _joined(note, progression.note), progression, progressive)
    return Plan(algorithm, resolved, _after(staging, made.run), made.free, private, _joined(note, made.note), None,
                progressive)


def _in_c(private: Any, algorithm: Any, kind: Any, resolved: dict[str, Any], options: dict[str, Any], send: Any,
          recv: Any, nonblocking: bool) -> Plan:
    """The plan run by the C executor (a2a.algos.executor): blocking, or started as one request it tests and waits.
    In place, it reads a staged copy of recvbuf."""
    staging = None
    if send is None:
        send, staging = _staged(recv)
    collective = next(c for c, k in algorithm.kinds.items() if k is kind)
    made = executed(private, algorithm, collective, options, send, recv)
    run = _after(staging, made.run)
    progressive = partial(Progression, run, None, made.note, request=_after(staging, made.start))
    return Plan(algorithm, resolved, run, made.free, private, made.note, progressive() if nonblocking else None,
                progressive, executor="c")


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
