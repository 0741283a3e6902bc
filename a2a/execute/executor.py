"""executor=c: a plan that runs its algorithm's schedule as exact data in the C executor (a2a/execute/c/executor.c).

The schedule is traced from the algorithm's own code (a2a.schedules.tracer), written in the one
format (a2a.schedules.program) and read by the executor's C parser; the executor binds the plan's
buffers and runs it blocking or started, tested and waited. A started exchange progresses as
PROGRESS says for the library it is built for: inside MPI where the library offers a hook (MPICH's
MPIX_Async), else by the executor's thread or by test() and wait(). The library is compiled with the
MPI library's own mpicc once per source and MPI library, and kept in this user's private cache (the
rule the testbed keeps for what it runs). Where it cannot be built, or the schedule is not exact
data, the plan runs the algorithm's Python and its note says why (every rank alike); any other
failure on any rank (a source missing, a full disk) is one PlanFailed on every rank.
"""
from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from a2a.algos.buffers import VBuffer
from a2a.algos.nodes import grouped
from a2a.errors import A2AError, BadConfig, HarnessError, PlanFailed
from a2a.kept import compiled, compiled_path
from a2a.schedules.program import dumps
from a2a.schedules.tracer import NotExact, traced

C = Path(__file__).parent / "c"
SOURCES = [C / "executor.c", C / "executor.h"]
LIBRARY, FLAGS = "liba2ax.so", ["-O2", "-Wall", "-Wextra", "-pthread"]
# How a started exchange progresses, by a2ax_progress_mode (executor.h): its name and what moves it
PROGRESS = (("test", "test() and wait() post each next round"),
            ("thread", "the executor's own thread posts each next round (A2A_EXECUTOR_PROGRESS=thread, "
                       "MPI_THREAD_MULTIPLE); test() reads the state"),
            ("mpi", "MPICH's progress engine posts each next round (MPIX_Async_start): any MPI call of the rank "
                    "moves it, and MPICH's progress thread where it runs (MPIR_CVAR_ASYNC_PROGRESS=1); test() reads "
                    "the state and lets MPI poll once"))
ASK = "A2A_EXECUTOR_PROGRESS"  # test, thread or mpi: how started exchanges progress, among what the library allows


class ExecutorUnavailable(A2AError):
    """The C executor cannot be built or loaded here."""


class ExchangeFailed(A2AError):
    """An exchange of the C executor that an MPI call failed: the call, MPI's words and code (what it posted was
    completed or cancelled first, so every rank that met the error returns)."""

    def __init__(self, code: int, call: str):
        self.code, self.call = code, call
        super().__init__(f"the C executor's exchange failed: {call or 'an MPI call'} returned MPI error {code} "
                         f"({_error_string(code)})")


def _error_string(code: int) -> str:
    """MPI's words for an error code."""
    from mpi4py import MPI

    try:
        return MPI.Get_error_string(code)
    except MPI.Exception:
        return "a code this MPI library does not describe"


def exchange_failed(lib: ctypes.CDLL, plan: ctypes.c_void_p, code: int, function: str) -> ExchangeFailed:
    """The error of a plan whose a2ax_run, a2ax_wait, a2ax_test or a2ax_start (`function`) returned `code`: the MPI
    call that failed, or that the plan had an exchange in flight. (The callers check the result themselves: a ctypes
    errcheck would cost a Python call on every exchange.)"""
    named = lib.a2ax_failed_call(plan) if function != "a2ax_start" else None
    if named:
        return ExchangeFailed(code, named.decode(errors="replace").split("(")[0])
    from mpi4py import MPI

    return ExchangeFailed(MPI.ERR_PENDING if function == "a2ax_start" else code,
                          f"{function} (the plan had an exchange in flight)")


def library_path(mpicc: str | None = None) -> Path:
    """Where the executor built by `mpicc` (default: the MPI library's own) is kept: by its sources and library."""
    return compiled_path(SOURCES, LIBRARY, FLAGS, shared=True, mpicc=mpicc)


def built(mpicc: str | None = None) -> Path:
    """The executor library, compiled (-Wall -Wextra) unless kept already; one another user could write is refused."""
    try:
        return compiled(SOURCES, LIBRARY, FLAGS, shared=True, mpicc=mpicc)
    except HarnessError as failed:
        raise ExecutorUnavailable(str(failed)) from None


@functools.lru_cache(maxsize=4)  # one library per process and MPI library
def loaded(path: str, comm_bytes: int) -> ctypes.CDLL:
    """The executor library with its functions typed; a communicator handle is `comm_bytes` wide (MPICH's int, Open
    MPI's pointer)."""
    lib = ctypes.CDLL(path)
    comm = ctypes.c_int if comm_bytes == ctypes.sizeof(ctypes.c_int) else ctypes.c_void_p
    pointer, size, aint = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_ssize_t
    lib.a2ax_parse.argtypes = [ctypes.c_char_p, size, ctypes.POINTER(pointer), ctypes.c_char_p, size]
    lib.a2ax_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(pointer), ctypes.c_char_p, size]
    lib.a2ax_schedule_free.argtypes = [pointer]
    lib.a2ax_prepare.argtypes = [pointer, comm, pointer, pointer, pointer, pointer, pointer, pointer, aint,
                                 ctypes.POINTER(pointer), ctypes.c_char_p, size]
    lib.a2ax_bind.argtypes = lib.a2ax_prepare.argtypes
    for name in ("a2ax_run", "a2ax_start", "a2ax_wait", "a2ax_free"):
        getattr(lib, name).argtypes = [pointer]
    lib.a2ax_test.argtypes = [pointer, ctypes.POINTER(ctypes.c_int)]
    lib.a2ax_failed_call.argtypes, lib.a2ax_failed_call.restype = [pointer], ctypes.c_char_p
    lib.a2ax_state.argtypes, lib.a2ax_state.restype = [pointer], pointer
    lib.a2ax_progress_mode.argtypes = lib.a2ax_progress.argtypes = []
    lib.a2ax_progress.restype = None
    return lib


def progress_asked() -> str:
    """What A2A_EXECUTOR_PROGRESS asks for ('' when unset); BadConfig naming what it accepts when it is none of them."""
    asked = os.environ.get(ASK, "")
    accepted = [name for name, _ in PROGRESS]
    if asked and asked not in accepted:
        raise BadConfig(f"{ASK}={asked} is not a way the executor progresses; accepted: {', '.join(accepted)}")
    return asked


def executor_library(comm: Any) -> ctypes.CDLL:
    """The executor for the MPI library mpi4py runs on, built by the first rank of each node (collective on `comm`)."""
    return _per_node(comm)[0]


@functools.cache
def _node_facts_key() -> int:
    """The attribute of MPI.COMM_SELF that keeps what _node_facts found, by the group it was found on."""
    from mpi4py import MPI

    return MPI.Comm.Create_keyval()


def _per_node(comm: Any) -> tuple[ctypes.CDLL, list[list[int]]]:
    """The executor library, built by the first rank of each node, and the ranks of each node (collective on `comm`
    the first time its group is met: every plan has a duplicate of its own, and the facts depend on the group
    only); ExecutorUnavailable, alike on a node's ranks, where it cannot be built."""
    from mpi4py import MPI

    known = MPI.COMM_SELF.Get_attr(_node_facts_key())
    if not isinstance(known, dict):  # None: not set yet
        known = {}
        MPI.COMM_SELF.Set_attr(_node_facts_key(), known)
    group = _world_ranks(comm)
    facts = known.get(group) or _node_facts(comm)
    if group is not None:  # every rank of the group met it here together: each keeps it alike
        known[group] = facts
    found, problem, nodes = facts
    if found is None:
        raise ExecutorUnavailable(problem)
    try:
        return loaded(found, MPI._sizeof(MPI.Comm)), nodes
    except OSError as error:  # this rank's alone: executed() tells the others
        raise ExecutorUnavailable(f"{found} cannot be loaded: {error}") from None


def _world_ranks(comm: Any) -> tuple[int, ...] | None:
    """The ranks in MPI.COMM_WORLD of `comm`'s ranks, or None where some are not there (spawned, connected)."""
    from mpi4py import MPI

    if comm.Is_inter():
        return None
    mine, world = comm.Get_group(), MPI.COMM_WORLD.Get_group()
    try:
        ranks = MPI.Group.Translate_ranks(mine, list(range(mine.Get_size())), world)
    finally:
        mine.Free()
        world.Free()
    return None if MPI.UNDEFINED in ranks else tuple(ranks)


def _node_facts(comm: Any) -> tuple[str | None, str, list[list[int]]]:
    """(the executor library's path or None, why not, the ranks of each node), one pass over the node's
    communicator (collective on `comm`); PlanFailed on every rank where a build failed otherwise than as
    ExecutorUnavailable says (a source missing, a full disk)."""
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    try:
        said = None
        if local.rank == 0:  # the node's lowest rank of `comm`, which names the node
            found, problem, failed = None, "", None
            try:
                found = str(built())
            except A2AError as error:
                problem = str(error)
            except Exception as error:  # its peers wait for word of it: they raise it too, below
                failed = f"building the C executor: {type(error).__name__}: {error}"
            said = (found, problem, comm.rank, failed)
        found, problem, leader, failed = local.bcast(said, root=0)
    finally:
        local.Free()
    leaders = comm.allgather((leader, failed if comm.rank == leader else None))
    if any(failed for _, failed in leaders):
        raise PlanFailed.of([failed for _, failed in leaders])
    return found, problem, grouped([leader for leader, _ in leaders])


def parsed(lib: ctypes.CDLL, text: str) -> ctypes.c_void_p:
    """A schedule's text read by the C parser; ExecutorUnavailable with the parser's line if it refuses it."""
    handle, error = ctypes.c_void_p(), ctypes.create_string_buffer(512)
    data = text.encode()
    if lib.a2ax_parse(data, len(data), ctypes.byref(handle), error, len(error)):
        raise ExecutorUnavailable(f"the executor refused the schedule: {error.value.decode()}")
    return handle


class Executed:
    """A plan of the C executor: run() one exchange; start() returns this, whose Test() and Wait() complete it.
    `bound`: run on `comm` itself, which the caller keeps private to one exchange at a time (a2ax_bind: no collective
    call), else on a duplicate of its own; `shared`: the schedule is another plan's, freed with that one."""

    def __init__(self, lib: ctypes.CDLL, comm: Any, schedule: ctypes.c_void_p, send: Any, recv: Any, note: str = "",
                 bound: bool = False, shared: bool = False):
        from mpi4py import MPI

        self.lib, self.schedule, self.held, self.note, self.shared = lib, schedule, (send, recv), note, shared
        sides = [self._side(side, comm.size) for side in (send, recv)]
        block = -1 if isinstance(recv, VBuffer) else recv.nbytes // comm.size
        self.plan, error = ctypes.c_void_p(), ctypes.create_string_buffer(512)
        self.arrays = sides  # the offsets must outlive the call only; the buffers, the plan
        prepare = lib.a2ax_bind if bound else lib.a2ax_prepare
        failed = prepare(schedule, MPI._handleof(comm), sides[0][0], sides[0][1].ctypes.data, sides[0][2].ctypes.data,
                         sides[1][0], sides[1][1].ctypes.data, sides[1][2].ctypes.data, block,
                         ctypes.byref(self.plan), error, len(error))
        if failed:
            if not shared:
                lib.a2ax_schedule_free(schedule)
            raise ExecutorUnavailable(error.value.decode())
        self.done = ctypes.c_int()
        self._wait, self._start = (functools.partial(f, self.plan) for f in (lib.a2ax_wait, lib.a2ax_start))
        self.run = self._checked_run(lib, self.plan)
        self._test, self._tested = lib.a2ax_test, (self.plan, ctypes.byref(self.done))
        self._idle = ctypes.c_int.from_address(lib.a2ax_state(self.plan))  # read with no call: 1 once complete
        mode = lib.a2ax_progress_mode()
        self.progress = PROGRESS[mode][0]
        self._poke = (functools.partial(self._test, *self._tested), lambda: None, lib.a2ax_progress)[mode]

    @staticmethod
    def _checked_run(lib: ctypes.CDLL, plan: ctypes.c_void_p) -> Callable[[], None]:
        """One exchange, blocking; ExchangeFailed where an MPI call in it failed (every rank that met it raises). A
        closure, not a method: the least a call adds to every exchange."""
        exchange = functools.partial(lib.a2ax_run, plan)

        def run() -> None:
            failed = exchange()
            if failed:
                raise exchange_failed(lib, plan, failed, "a2ax_run")
        return run

    @staticmethod
    def _side(side: Any, nprocs: int) -> tuple[int, np.ndarray, np.ndarray]:
        """(address, byte offsets, byte lengths) of each block of one side of the call."""
        if isinstance(side, VBuffer):
            return side.array.ctypes.data, side.offsets.astype(np.intp), side.nbytes.astype(np.intp)
        width = side.nbytes // nprocs
        return side.ctypes.data, np.arange(nprocs, dtype=np.intp) * width, np.full(nprocs, width, np.intp)

    def rebound(self, comm: Any, send: Any, recv: Any) -> "Executed":
        """The same schedule on other buffers of the same layout, bound on `comm` (private to one exchange at a time):
        made on this rank alone; free it before this plan."""
        return Executed(self.lib, comm, self.schedule, send, recv, self.note, bound=True, shared=True)

    def start(self) -> "Executed":
        failed = self._start()
        if failed:
            raise exchange_failed(self.lib, self.plan, failed, "a2ax_start")
        return self

    def Test(self) -> bool:
        """Whether the exchange is complete: its state read; if not, one poke (MPI's progress, or the rounds in
        test-driven mode) and the state read again; once complete, a2ax_test's acquiring read."""
        if not self._idle.value:
            self._poke()
            if not self._idle.value:
                return False
        failed = self._test(*self._tested)
        if failed:
            raise exchange_failed(self.lib, self.plan, failed, "a2ax_test")
        return bool(self.done.value)

    def peek(self) -> bool:
        """Whether the exchange is complete, read without any call: nothing advances it here."""
        return bool(self._idle.value)

    def Wait(self) -> None:
        failed = self._wait()
        if failed:
            raise exchange_failed(self.lib, self.plan, failed, "a2ax_wait")

    def free(self) -> None:
        if self.plan:
            self.lib.a2ax_free(self.plan)
            if not self.shared:
                self.lib.a2ax_schedule_free(self.schedule)
            self.plan, self.schedule = ctypes.c_void_p(), ctypes.c_void_p()  # NULL: freed


def executed(comm: Any, algorithm: Any, collective: str, options: dict[str, Any], send: Any, recv: Any) -> Executed:
    """The algorithm's schedule traced for this job and bound in the C executor to `comm` itself, which the caller
    keeps private to one exchange at a time (collective; see Executed). Alike on every rank, it raises
    ExecutorUnavailable where the executor cannot run it, BadConfig for an A2A_EXECUTOR_PROGRESS that means nothing,
    and PlanFailed where any rank failed otherwise (a file missing, a full disk)."""
    problem = refused = failed = ""
    made, failure = None, None
    try:
        progress_asked()
        lib, nodes = _per_node(comm)
        data = traced(algorithm, tuple(sorted(options.items())), comm.size, tuple(map(tuple, nodes)), collective)
        if collective == "alltoallv" and not data.direct:
            raise NotExact(f"{algorithm.name}'s alltoallv forwards blocks through a temporary buffer, whose rows "
                           "cannot hold uneven blocks")
        made = Executed(lib, comm, parsed(lib, dumps(data)), send, recv, data.note, bound=True)  # no message
    except PlanFailed:
        raise  # alike on every rank already
    except BadConfig as error:
        refused = str(error)
    except (ExecutorUnavailable, NotExact) as error:
        problem = str(error)
    except Exception as error:  # the peers are told below, and raise it too
        failed, failure = f"{type(error).__name__}: {error}", error
    said = comm.allgather((problem, refused, failed))
    if made is not None and any(any(told) for told in said):
        made.free()
    if any(f for *_, f in said):
        raise PlanFailed.of([f or None for *_, f in said]) from failure
    refusals = [r for _, r, _ in said if r]
    if refusals:
        raise BadConfig(refusals[0])
    problems = [p for p, *_ in said if p]
    if problems:  # one rank that cannot: every rank runs Python
        raise ExecutorUnavailable(problems[0])
    assert made is not None  # else this rank told its failure, and raised it above
    return made


def executor_facts(comm: Any) -> dict[str, Any]:
    """What meta.json says of the C executor on this job (collective): the library executor=c runs and how its
    started exchanges progress, or why there is none."""
    try:
        lib = executor_library(comm)
    except ExecutorUnavailable as missing:
        return {"library": None, "runs": "python (executor=c falls back)", "why": str(missing)}
    name, how = PROGRESS[lib.a2ax_progress_mode()]
    return {"library": lib._name, "runs": "c where an algorithm's schedule is exact data", "progress": name,
            "progress_by": how + (f" ({_why_by_test()})" if name == "test" else "")}


def _why_by_test() -> str:
    """Why started exchanges progress only inside test() and wait() here."""
    asked = os.environ.get(ASK, "")
    if asked == "thread":
        return f"{ASK}=thread asked for the executor's thread, but MPI runs below MPI_THREAD_MULTIPLE"
    if asked == "test":
        return f"{ASK}=test"
    return (f"this MPI library offers no progress hook, as MPICH's MPIX_Async_start is; {ASK}=thread under "
            "MPI_THREAD_MULTIPLE gives the executor a thread")
