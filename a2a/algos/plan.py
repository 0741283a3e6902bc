"""Plan: an algorithm prepared for given buffers; `planned` makes one once every rank agrees on the call.

A factory does all preparation and returns ``run`` (one all-to-all), ``(run, free)``, or
``Prepared(run, free, note)`` when the row should say something (a fallback schedule, say).
The plan runs it on a private duplicate of the caller's communicator, so its messages never
match the caller's; a call in place gets a staged copy of the receive buffer unless the
algorithm takes MPI.IN_PLACE itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from a2a.algos.agreement import agree, matched_counts
from a2a.algos.buffers import VBuffer, is_inter
from a2a.algos.prebuilt import copier
from a2a.errors import A2AError, BadInput
from a2a.record.results import NATIVE


@dataclass(frozen=True)
class Prepared:
    """What a factory returns when it has more to say than `run` or `(run, free)`: a note for the row."""

    run: Callable[[], Any]
    free: Callable[[], Any] | None = None
    note: str = ""  # e.g. a fallback to another schedule at this process count


@dataclass
class Plan:
    """A prepared all-to-all: call it for one exchange; free it (or use `with`) when done."""

    algorithm: Any  # the a2a.algos.registry.Algorithm it was made from
    options: dict[str, Any]
    run: Callable[[], Any]
    _free: Callable[[], Any] | None = field(default=None, repr=False)
    _comm: Any = field(default=None, repr=False)
    note: str = ""  # what the row should say about this plan (the factory's Prepared.note)

    def __call__(self) -> None:
        self.run()

    def free(self) -> None:
        """Release requests, buffers and communicators the plan holds."""
        if self._free is not None:
            self._free()
        if self._comm is not None:
            self._comm.Free()
        self._free = self._comm = None
        self.run = _freed

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()


def _freed() -> None:
    raise BadInput("this plan has been freed; make a new one")


def planned(comm: Any, find: Callable[[], Any], collective: str, options: dict[str, Any],
            call: Callable[[], tuple[Any, Any, tuple]]) -> Plan:
    """A plan of the algorithm `find()` gives, once every rank has checked its call (`call` returns send, recv and
    their signature) and the ranks agree: whatever is wrong on any rank, an unknown name or option included, is one
    BadInput on every rank."""
    problem, signature = None, None
    try:
        found = find()
        kind = found.kind(collective)
        resolved = found.resolve(options)
        if is_inter(comm) and not kind.intercomm:
            raise BadInput(f"{found.name} does not serve intercommunicators; accepted: an intracommunicator, "
                           f"or {NATIVE} (the library's own {collective} between the two groups)")
        send, recv, shape = call()
        signature = (found.name, tuple(sorted((k, str(v)) for k, v in resolved.items())), *shape)
    except A2AError as error:
        problem = error
    agree(comm, problem, signature)
    if collective == "alltoallv":
        matched_counts(comm, send, recv)
    return prepare(comm, found, kind, resolved, send, recv)


def prepare(comm: Any, algorithm: Any, kind: Any, resolved: dict[str, Any], send: Any, recv: Any) -> Plan:
    """Run the factory of `kind` on a private duplicate of `comm` (agreed already): the plan."""
    private = comm.Dup()  # our point-to-point traffic cannot match the caller's
    staging = None
    if send is None and not kind.in_place:  # in place: the schedule reads a copy of recvbuf
        send, staging = _staged(recv)
    try:
        made = kind.factory(private, send, recv, **resolved)
    except BaseException:
        private.Free()
        raise
    if not isinstance(made, Prepared):
        made = Prepared(*made) if isinstance(made, tuple) else Prepared(made, getattr(made, "free", None))
    run = made.run if staging is None else _after(staging, made.run)
    return Plan(algorithm, resolved, run, made.free, private, made.note)


def _staged(recv: Any) -> tuple[Any, Callable[[], Any]]:
    """For a call in place: a send side that is a copy of recvbuf, and the prebuilt copy that fills it."""
    if isinstance(recv, VBuffer):
        array = np.empty_like(recv.array)
        return VBuffer(array, recv.counts, recv.displs), copier(array, recv.array)
    array = np.empty_like(recv)
    return array, copier(array, recv)


def _after(first: Callable[[], Any], run: Callable[[], Any]) -> Callable[[], Any]:
    def staged_run() -> None:
        first()
        run()
    return staged_run
