"""The progression engine: any plan run non-blocking, advanced by test() as libNBC advances a schedule of rounds.

A plan's factory is run once more against communicators and an `mpi4py.MPI` whose blocking calls, when the plan
runs inside the engine, post their non-blocking form and park (a greenlet switch back to the caller): Sendrecv
becomes Isendrecv, Waitall parks on its requests, an Alltoall or a Gather among members becomes Ialltoall or
Igather. So the run is a state machine over the rounds the algorithm declares (its steps; tests/test_capture.py
holds them equal to what the run does): start() runs it up to its first wait, posting the first round and the
copies before it; test() completes what it can and, while what the run waits for has arrived, resumes it, posting
each next round and its copies; wait() drives it to the end, blocking where the run would. The algorithm's own
code runs, so no algorithm file changes and no schedule is written twice.

A run that is one library request (native's MPI_Ialltoall, MPI_Start of its MPI_Alltoall_init) bypasses the engine:
start() leaves that request, test() and wait() are its MPI_Test and MPI_Wait. A run that uses what has no
non-blocking form here (MPI RMA epochs: MPI.Win), or that its factory marks as a blocking library call (native's
form=blocking), runs whole inside wait() (or the first test()); its progression's note says so. Each plan has its
private communicator, so exchanges of different plans in flight never mix; one plan has at most one exchange in
flight, as an MPI persistent request.

A factory may make a plan of another algorithm on the communicator it is given: a2a.execute.planning makes it on the
real communicator behind the engine's, in its non-blocking form, whichever executor runs it. The run, calling that
plan inside the engine, starts it and parks on its exchange (Nested) as on a request: the driver's test() advances it
by the inner plan's own test(), so the inner plan's rounds or its C executor's request progress with the outer plan.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Callable

from greenlet import GreenletExit, greenlet

from a2a.errors import BadInput

# the blocking collectives whose non-blocking form takes the same arguments (Alltoall -> Ialltoall)
BLOCKING_COLLECTIVES = ("Alltoall", "Alltoallv", "Alltoallw", "Allgather", "Allgatherv", "Gather", "Gatherv",
                        "Scatter", "Scatterv", "Bcast", "Allreduce", "Reduce", "Reduce_scatter",
                        "Reduce_scatter_block", "Scan", "Exscan", "Barrier")
# what returns a request: the engine's requests park in their Wait
REQUESTS = ({"I" + name.lower() if name == "Barrier" else f"I{name[0].lower()}{name[1:]}"
             for name in BLOCKING_COLLECTIVES}
            | {f"{name}_init" for name in BLOCKING_COLLECTIVES}
            | {"Isend", "Ibsend", "Issend", "Irsend", "Irecv", "Isendrecv", "Isendrecv_replace", "Send_init",
               "Bsend_init", "Ssend_init", "Rsend_init", "Recv_init"})
# what makes a communicator: its results are communicators of the engine too
MAKERS = ("Dup", "Split", "Split_type", "Create", "Create_group", "Create_cart", "Create_graph", "Sub", "Clone")
# what has no non-blocking form here: a factory that reaches for it runs its plan inside wait()
UNPROGRESSABLE = ("Win", "File")
# ... and the calls: a factory whose code names one (or that reaches for it while preparing) runs its plan inside
# wait() too, instead of blocking inside test()
UNPROGRESSABLE_CALLS = ("Ssend", "Bsend", "Rsend", "Probe", "Iprobe", "Mprobe", "Improbe", "Mrecv", "Imrecv", "send",
                        "recv", "sendrecv", "isend", "irecv", "issend", "ssend", "bsend", "ibsend", "probe",
                        "iprobe", "mprobe", "improbe", "bcast", "gather", "scatter", "allgather", "alltoall",
                        "allreduce", "reduce", "scan", "exscan", "barrier", "Waitsome", "Testsome", "Cancel")


class Unprogressable(Exception):
    """A factory reached for an MPI facility the engine cannot run non-blocking."""


class Round(greenlet):
    """The greenlet a plan's run goes on in while the engine drives it: one per plan, its exchanges one after
    another (creating a greenlet costs several times a switch). It hands its driver an Awaited where the run waits,
    None when an exchange is complete, or Raised."""

    def __init__(self, work: Callable[[], Any]):
        super().__init__(self._exchanges)
        self.work = work

    def _exchanges(self) -> None:
        while True:
            try:
                self.work()
                outcome = None
            except GreenletExit:
                raise
            except BaseException as error:  # handed to the driver, which raises it
                outcome = Raised(error)
            driver = greenlet.getcurrent().parent
            assert driver is not None  # a Round runs switched to from its driver
            driver.switch(outcome)


@dataclass(frozen=True)
class Raised:
    """What a run raised, on its way to the driver."""

    error: BaseException


def running() -> bool:
    """Whether this code runs inside the engine (then a blocking call posts and parks)."""
    return isinstance(greenlet.getcurrent(), Round)


@dataclass
class Awaited:
    """What a parked run waits for: all of `requests`, or (`any_of`) one of them, as Waitany; through `mpi`."""

    mpi: Any
    requests: list[Any]
    any_of: bool = False
    result: Any = None

    status: Any = None  # filled by the last request's completion, as the blocking call would fill it

    def ready(self) -> bool:
        """Whether it has arrived (completing the requests that did, as MPI_Test does)."""
        if self.any_of:
            self.result, flag = self.mpi.Request.Testany(self.requests)
            return bool(flag)
        if len(self.requests) == 1:  # MPI_Test: MPICH 5.0's MPI_Testall errs as a persistent collective completes
            return bool(self.requests[0].Test(self.status))
        if self.status is None:
            return bool(self.mpi.Request.Testall(self.requests))
        if not self.mpi.Request.Testall(self.requests[:-1]):
            return False
        return bool(self.requests[-1].Test(self.status))

    def block(self) -> None:
        """Wait until it has arrived."""
        if self.any_of:
            self.result = self.mpi.Request.Waitany(self.requests)
        elif self.status is None:
            self.mpi.Request.Waitall(self.requests)
        else:
            self.mpi.Request.Waitall(self.requests[:-1])
            self.requests[-1].Wait(self.status)


@dataclass
class Nested:
    """What a parked run waits for: the exchange of a plan made inside its factory (its progression), in flight."""

    progression: Progression
    result: Any = None

    def ready(self) -> bool:
        """Whether that exchange is complete (advancing it, as its own test() does)."""
        return self.progression.test()

    def block(self) -> None:
        """Drive that exchange to its end."""
        self.progression.wait()


def finished(mpi: Any, requests: list[Any], any_of: bool = False, status: Any = None) -> Any:
    """Wait for real requests: parked when run inside the engine, else blocking; Waitany's index when `any_of`;
    `status` filled by the last one's completion."""
    awaited = Awaited(mpi, requests, any_of, status=status)
    if running():
        return parked(awaited)
    awaited.block()
    return awaited.result


def parked(awaited: Awaited | Nested) -> Any:
    """Hand the driver what the run (inside the engine) waits for; what it hands back once that has arrived."""
    driver = greenlet.getcurrent().parent
    assert driver is not None  # a Round runs switched to from its driver
    return driver.switch(awaited)


class EngineRequest:
    """A request the engine's communicators return: its Wait parks; everything else is the real request's."""

    def __init__(self, real: Any, mpi: Any):
        self.real, self.mpi = real, mpi

    def Wait(self, status: Any = None) -> None:
        finished(self.mpi, [self.real])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def reals(requests: list[Any]) -> list[Any]:
    """The real requests behind engine requests."""
    return [getattr(q, "real", q) for q in requests]


class EngineComm:
    """A communicator of the engine: blocking calls post their non-blocking form and park when run inside it."""

    def __init__(self, real: Any, mpi: Any):
        self.real, self.mpi = real, mpi

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.real, name)
        if name in BLOCKING_COLLECTIVES:
            started = getattr(self.real, "Ibarrier" if name == "Barrier" else f"I{name[0].lower()}{name[1:]}")
            return lambda *args, **kwargs: (finished(self.mpi, [started(*args, **kwargs)]) if running()
                                            else found(*args, **kwargs))
        if name in MAKERS:
            return lambda *args, **kwargs: self._wrapped(found(*args, **kwargs))
        if name in REQUESTS:
            return lambda *args, **kwargs: EngineRequest(found(*args, **kwargs), self.mpi)
        return found

    def _wrapped(self, made: Any) -> Any:
        return made if made == self.mpi.COMM_NULL else EngineComm(made, self.mpi)

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int | None = None,
                 recvtag: int | None = None, status: Any = None) -> None:
        source, recvtag = self._any(source, recvtag)
        if not running():
            return self.real.Sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag, status)
        try:
            requests = [self.real.Isendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag)]
        except (AttributeError, NotImplementedError):  # an MPI-3 library: no MPI_Isendrecv
            requests = [self.real.Isend(sendbuf, dest, sendtag), self.real.Irecv(recvbuf, source, recvtag)]
        finished(self.mpi, requests, status=status)

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int | None = None,
                         recvtag: int | None = None, status: Any = None) -> None:
        source, recvtag = self._any(source, recvtag)
        if not running():
            return self.real.Sendrecv_replace(buf, dest, sendtag, source, recvtag, status)
        try:
            requests = [self.real.Isendrecv_replace(buf, dest, sendtag, source, recvtag)]
        except (AttributeError, NotImplementedError):  # an MPI-3 library: the send from a copy, then the receive
            import numpy as np

            copy = np.array(buf, copy=True)
            requests = [self.real.Isend(copy, dest, sendtag), self.real.Irecv(buf, source, recvtag)]
        finished(self.mpi, requests, status=status)

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        if not running():
            return self.real.Send(buf, dest, tag)
        finished(self.mpi, [self.real.Isend(buf, dest, tag)])

    def Recv(self, buf: Any, source: int | None = None, tag: int | None = None, status: Any = None) -> None:
        source, tag = self._any(source, tag)
        if not running():
            return self.real.Recv(buf, source, tag, status)
        finished(self.mpi, [self.real.Irecv(buf, source, tag)], status=status)

    def _any(self, source: int | None, tag: int | None) -> tuple[int, int]:
        """MPI's defaults, as the library names them (MPI_ANY_SOURCE is -2 in MPICH, -1 in Open MPI)."""
        return (self.mpi.ANY_SOURCE if source is None else source), (self.mpi.ANY_TAG if tag is None else tag)


def unprogressable_names(run: Callable[..., Any]) -> str | None:
    """The first call in UNPROGRESSABLE_CALLS that the code of `run` (and of the functions it defines) names."""
    code = getattr(run, "__code__", None)
    pending = [code] if code is not None else []
    while pending:
        code = pending.pop()
        found = next((n for n in code.co_names if n in UNPROGRESSABLE_CALLS), None)
        if found:
            return found
        pending += [c for c in code.co_consts if hasattr(c, "co_names")]
    return None


def engine_module(mpi: types.ModuleType) -> types.ModuleType:
    """An `mpi4py.MPI` for factories preparing a plan for the engine: `mpi` (the real one), but for the class-level
    waits of its requests, which park, and refusing what has no non-blocking form (Unprogressable)."""
    module = types.ModuleType("mpi4py.MPI", "the progression engine's MPI (a2a.execute.engine)")

    class Requests:
        """MPI.Request and MPI.Prequest as the engine answers them."""

        Waitall = staticmethod(lambda requests, statuses=None: finished(mpi, reals(requests)))
        Waitany = staticmethod(lambda requests, status=None: finished(mpi, reals(requests), any_of=True))
        Startall = staticmethod(lambda requests: mpi.Prequest.Startall(reals(requests)))
        Testall = staticmethod(lambda requests, statuses=None: mpi.Request.Testall(reals(requests)))
        Testany = staticmethod(lambda requests, status=None: mpi.Request.Testany(reals(requests)))

    vars(module).update(Request=Requests, Prequest=Requests)  # a module filled in here, unknown to the type checker

    def attribute(name: str) -> Any:
        if name in UNPROGRESSABLE:
            raise Unprogressable(f"MPI.{name}")
        return getattr(mpi, name)

    vars(module)["__getattr__"] = attribute  # PEP 562: any other name is `mpi`'s
    return module


@dataclass
class Progression:
    """A plan's non-blocking form: its run driven by the engine (or, when `in_wait`, run whole inside wait())."""

    run: Callable[[], Any]
    free: Callable[[], Any] | None = None
    note: str = ""  # how it progresses, when not through the engine: a record says so
    in_wait: bool = False
    request: Callable[[], Any] | None = None  # the run is this one library request: started, tested, waited as is
    rounds: int = 0  # the times the latest exchange's run parked so far: its rounds posted
    _round: Round | None = field(default=None, repr=False)
    _awaited: Awaited | Nested | None = field(default=None, repr=False)
    _request: Any = field(default=None, repr=False)
    active: bool = False  # an exchange is in flight: started, not yet complete

    def start(self) -> None:
        """Begin an exchange: post what its first round may post."""
        if self.active:
            raise BadInput("this plan's exchange is still in flight; test() or wait() until it completes before "
                           "starting it again (one exchange in flight per plan, as per persistent request)")
        self.active, self.rounds = True, 0
        if self.request is not None:
            self._request = self.request()
        elif not self.in_wait:
            self._round = self._round or Round(self.run)
            self._resume()

    def test(self) -> bool:
        """Complete what has arrived and post every round whose inputs are in; whether the exchange is complete.
        A run that has no non-blocking form runs whole in the first test, as it would in wait()."""
        if self.in_wait:
            self.wait()
        try:  # not a context manager: making one costs about a microsecond, which an idle test() would pay each time
            if self._request is not None and self._request.Test():
                self._request, self.active = None, False
            while self._awaited is not None and self._awaited.ready():
                self._resume(self._awaited.result)
        except BaseException:
            self._end()
            raise
        return not self.active

    def wait(self) -> None:
        """Drive the exchange to its end; inside another plan's run in the engine (a plan its factory made), park that
        run until this exchange is complete."""
        if not self.active:
            return
        if running():
            parked(Nested(self))
            return
        if self.in_wait:
            self.active = False
            self.run()
            return
        try:
            if self._request is not None:
                self._request.Wait()
                self._request, self.active = None, False
                return
            while self._awaited is not None:
                self._awaited.block()
                self._resume(self._awaited.result)
        except BaseException:
            self._end()
            raise

    def _end(self) -> None:
        """An MPI error while a round completes ends the exchange with it (the plan may start again, or be freed)."""
        self.active, self._request, self._awaited = False, None, None
        self.close()

    def _resume(self, *value: Any) -> None:
        """Go on with the run (handing it what it waited for) until it parks again (a round posted) or ends."""
        run = self._round
        assert run is not None  # start() made it: an exchange is in flight
        run.parent = greenlet.getcurrent()
        found = run.switch(*value)
        if isinstance(found, (Awaited, Nested)):
            self._awaited, self.rounds = found, self.rounds + 1
            return
        self._awaited, self.active = None, False
        if isinstance(found, Raised):
            raise found.error

    def close(self) -> None:
        """End the greenlet of the runs (a plan's free)."""
        if self._round is not None and not self._round.dead:
            self._round.throw(GreenletExit)
        self._round = None
