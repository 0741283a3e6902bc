"""Plan: an algorithm prepared for given buffers, and Prepared, what a factory may return.

A factory does all preparation and returns ``run`` (one all-to-all), ``(run, free)``, or
``Prepared(run, free, note)`` when the row should say something (a fallback schedule, say).
a2a.execute.planning makes the plan once every rank agrees on the call: it runs the factory on a
private duplicate of the caller's communicator, so its messages never match the caller's; a call
in place gets a staged copy of the receive buffer unless the algorithm takes MPI.IN_PLACE itself.

A plan is blocking (call it) and non-blocking (start, test, wait): the non-blocking form is the
same factory prepared for the progression engine (a2a.execute.engine), or the C executor's
request, made at plan time for a plan from `Algorithm.init`, else by the first start()
(collectively, as MPI_Alltoall_init).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from a2a.errors import BadInput


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
    progression: Any = None  # the non-blocking form, once prepared (a2a.execute.engine.Progression)
    _progressive: Callable[[], Any] | None = field(default=None, repr=False)
    executor: str = "python"  # what runs it: "c" where the C executor runs its schedule (a2a.execute.executor)
    _rebind: Callable[[Any, Any], Any] | None = field(default=None, repr=False)

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
        self._free = self._comm = self.progression = self._progressive = self._rebind = None
        self.run = _freed

    def rebound(self, sendbuf: Any, recvbuf: Any) -> "Plan | None":
        """The same plan on other buffers of the same layout (None as sendbuf: in place), made on this rank alone,
        without a message, on this plan's communicator (so at most one exchange of the two is in flight at a time);
        None where its preparation communicates. Free it before this plan."""
        return None if self._rebind is None else self._rebind(sendbuf, recvbuf)

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()


def _freed() -> None:
    raise BadInput("this plan has been freed; make a new one")
