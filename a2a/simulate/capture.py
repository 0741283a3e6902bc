"""Record an algorithm's messages without launching it: every rank's real plan against a stand-in MPI.

Each rank runs `a2a.get(name).plan(...)` and one call of the plan in a greenlet of its own
(one rank runs at a time, until it must wait), with `mpi4py.MPI` replaced by a stand-in for
the duration. Collective set-up calls (Dup, Split, Split_type, Create_cart/Sub, allgather,
allreduce, bcast, ...) really meet across the ranks, so every rank learns what it would
learn under MPI; the ranks' placement on nodes comes from the given layout. Point-to-point
calls log what they send and receive, and when they are waited for, and their data really
moves (a schedule may depend on what it receives, and the call must leave MPI_Alltoall's
result). Local copies (np.copyto, assignment into buffers) log their bytes. Collectives on
sub-communicators log their member ranks and per-member byte counts.

Anything the stand-in does not answer raises CaptureError naming the call, so a plug-in
that needs more fails clearly instead of producing a wrong schedule.
"""
from __future__ import annotations

import ctypes
import itertools
import math
import sys
import types
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import greenlet
import numpy as np

from a2a.algos.pattern import expected_pattern, send_pattern
from a2a.errors import A2AError, CaptureError

# Events of one rank, in program order (bytes are per the captured count of elements):
#   ("isend", peer, nbytes, request)  ("irecv", peer, nbytes, request)
#   ("send", peer, nbytes)            ("recv", peer, nbytes)
#   ("wait", (request, ...))          ("copy", nbytes)
#   ("coll", name, members, root, sendbytes per member, recvbytes per member)
# Peers, members and roots are ranks of the whole captured job (its "world").
Event = tuple


class _Aborted(Exception):
    """Another rank failed; this one stops waiting."""


@dataclass
class Schedule:
    """Every rank's events for one call of a plan, captured at `count` elements per peer."""

    nprocs: int
    count: int
    itemsize: int
    events: list[list[Event]]

    @property
    def bytes_per_peer(self) -> int:
        """Bytes per peer of the captured call."""
        return self.count * self.itemsize

    def scaled(self, factor: int) -> "Schedule":
        """The same schedule with every byte count multiplied by `factor` (count x factor)."""
        def scale(e: Event) -> Event:
            if e[0] in ("isend", "irecv", "send", "recv"):
                return (e[0], e[1], e[2] * factor, *e[3:])
            if e[0] == "copy":
                return ("copy", e[1] * factor)
            if e[0] == "coll":
                return (*e[:4], tuple(b * factor for b in e[4]), tuple(b * factor for b in e[5]))
            return e
        return Schedule(self.nprocs, self.count * factor, self.itemsize,
                        [[scale(e) for e in rank] for rank in self.events])


def traffic(events: list[Event]) -> dict[int, tuple[int, int]]:
    """Messages and bytes this rank sends to each peer (point-to-point only)."""
    sent: dict[int, list[int]] = {}
    for e in events:
        if e[0] in ("isend", "send"):
            totals = sent.setdefault(e[1], [0, 0])
            totals[0] += 1
            totals[1] += e[2]
    return {peer: (n, b) for peer, (n, b) in sent.items()}


def collectives(events: list[Event]) -> list[tuple[str, tuple[int, ...]]]:
    """(name, member ranks) of each collective this rank called, in order."""
    return [(e[1], e[2]) for e in events if e[0] == "coll"]


def copied(events: list[Event]) -> int:
    """Bytes this rank copied locally."""
    return sum(e[1] for e in events if e[0] == "copy")


# --- the capture ---------------------------------------------------------------------------------

def capture(name: str, options: dict[str, Any], nprocs: int, count: int, dtype: str = "float32",
            nodes: list[list[int]] | None = None, group: Callable[[Any], Any] | None = None,
            matrix: np.ndarray | None = None) -> Schedule:
    """Run `name`'s plan on `nprocs` stand-in ranks at `count` elements per peer; return the schedule.

    `nodes` lists the ranks of each node (default: one rank per node); `group(world)` turns
    the stand-in world into the communicator the algorithm runs on (a replica group). With
    `matrix` (p x p elements, row = sender) the algorithm's alltoallv plan runs instead.
    """
    from a2a.algos.registry import get

    algorithm = get(name)
    world = _World(nprocs, nodes or [[r] for r in range(nprocs)])
    failures: list[tuple[int, Exception]] = []

    def rank_main(rank: int) -> None:
        log = world.logs[rank]
        try:
            comm = StandInComm(world, tuple(range(nprocs)), rank, ("world",))
            comm = group(comm) if group else comm
            if matrix is None:
                send = send_pattern(np.dtype(dtype), comm.size, comm.rank, count).view(Tracked)
                recv = _empty((comm.size * count,), np.dtype(dtype))
                plan = algorithm.plan(comm, send, recv, **options)
            else:
                sends, recvs = matrix[comm.rank], matrix[:, comm.rank]
                send, recv = _empty((int(sends.sum()),), np.dtype(dtype)), _empty((int(recvs.sum()),), np.dtype(dtype))
                plan = algorithm.plan_v(comm, send, sends, recv, recvs, **options)
            log.recording = True
            plan()
            log.recording = False
            plan.free()
            if matrix is None and not np.array_equal(recv, expected_pattern(np.dtype(dtype), comm.size,
                                                                             comm.rank, count)):
                raise CaptureError("the captured call left a wrong result (a broken algorithm, or a call "
                                   "the stand-in answers unlike MPI)")
        except _Aborted:
            pass
        except Exception as problem:  # noqa: BLE001  (reported below; KeyboardInterrupt goes through)
            failures.append((rank, problem))
            world.failed = True

    with standin_mpi(_standin_module()), _tracked_numpy():
        world.run(rank_main)
    if failures:
        rank, problem = failures[0]
        if isinstance(problem, CaptureError):
            raise CaptureError(f"{name} on rank {rank} of {nprocs}: {problem}") from problem
        if isinstance(problem, A2AError):
            raise problem
        raise CaptureError(f"{name} failed on rank {rank} of {nprocs} during capture: "
                           f"{type(problem).__name__}: {problem}") from problem
    return Schedule(nprocs, count, np.dtype(dtype).itemsize, [log.events for log in world.logs])


def capture_unit(name: str, options: dict[str, Any], nprocs: int, dtype: str = "float32",
                 **layout: Any) -> Schedule:
    """The schedule at one element per peer, checked to scale: captured at 1 and 2 elements.

    Buffers of p ranks x p peers do not fit at large p and sizes; schedules whose byte
    counts grow in proportion to the count (every built-in) are captured small and scaled
    (`Schedule.scaled`). A schedule that is not proportional is refused, naming the rank.
    """
    one = capture(name, options, nprocs, 1, dtype, **layout)
    two = capture(name, options, nprocs, 2, dtype, **layout)
    doubled = one.scaled(2).events
    if doubled != two.events:
        rank = next(r for r in range(nprocs) if doubled[r] != two.events[r])
        raise CaptureError(f"{name}'s schedule on rank {rank} is not proportional to the message size "
                           "(it changes between 1 and 2 elements per peer), so it cannot be scaled; "
                           "capture it at its real size instead")
    return one


def capture_scaled(name: str, options: dict[str, Any], nprocs: int, count: int, dtype: str = "float32",
                   **layout: Any) -> Schedule:
    """The schedule at `count` elements per peer, from the unit capture."""
    return capture_unit(name, options, nprocs, dtype, **layout).scaled(count)


# --- per-thread log and tracked buffers ---------------------------------------------------------

class _Log:
    """One rank's events; only the recorded call logs."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.recording, self.requests = False, itertools.count()

    def add(self, *event: Any) -> None:
        if self.recording:
            self.events.append(tuple(event))

    def copy(self, nbytes: int) -> None:
        if self.recording and nbytes:
            self.events.append(("copy", int(nbytes)))


def _log() -> _Log | None:
    """The running rank's log (None outside a capture)."""
    return getattr(greenlet.getcurrent(), "a2a_log", None)


class Tracked(np.ndarray):
    """An ndarray whose element assignments count as local copies while a call is recorded."""

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        log = _log()
        if log is not None and log.recording:
            log.copy(np.asarray(self)[key].nbytes)


_REAL = {"copyto": np.copyto, "empty": np.empty, "zeros": np.zeros, "ones": np.ones, "full": np.full}


def _empty(shape: Any, dtype: Any = float, *args: Any, **kwargs: Any) -> np.ndarray:
    return _REAL["empty"](shape, dtype, *args, **kwargs).view(Tracked)


@contextmanager
def _tracked_numpy() -> Iterator[None]:
    """np.copyto logs its bytes and new arrays are Tracked, while the capture runs."""
    def copyto(dst: Any, src: Any, *args: Any, **kwargs: Any) -> None:
        _REAL["copyto"](dst, src, *args, **kwargs)
        log = _log()
        if log is not None:
            log.copy(np.asarray(dst).nbytes)

    def maker(real: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        return lambda *args, **kwargs: real(*args, **kwargs).view(Tracked)

    np.copyto = copyto
    for name in ("empty", "zeros", "ones", "full"):
        setattr(np, name, maker(_REAL[name]))
    try:
        yield
    finally:
        for name, real in _REAL.items():
            setattr(np, name, real)


# --- the stand-in MPI ----------------------------------------------------------------------------

@contextmanager
def standin_mpi(module: types.ModuleType) -> Iterator[None]:
    """Make `from mpi4py import MPI` return `module` inside the block."""
    import mpi4py

    missing = object()
    saved_attr = getattr(mpi4py, "MPI", missing)
    saved_module = sys.modules.get("mpi4py.MPI", missing)
    mpi4py.MPI = module
    sys.modules["mpi4py.MPI"] = module
    try:
        yield
    finally:
        if saved_attr is missing:
            del mpi4py.MPI
        else:
            mpi4py.MPI = saved_attr
        if saved_module is missing:
            sys.modules.pop("mpi4py.MPI", None)
        else:
            sys.modules["mpi4py.MPI"] = saved_module


class _Meeting:
    def __init__(self, size: int):
        self.values: list[Any] = [None] * size
        self.arrived = 0
        self.waiting: list[int] = []
        self.result: Any = None


class _World:
    """What the stand-in ranks share: the layout, the messages in flight and the meetings of collectives.

    Each rank is a greenlet and one runs at a time: a rank that must wait (for a message,
    or for the other members of a collective) goes back to the scheduler, which runs the
    next ready rank. There is no lock and no polling, and a deadlock is exact: ranks wait
    and none is ready.
    """

    def __init__(self, nprocs: int, nodes: list[list[int]]):
        self.nprocs, self.nodes, self.failed = nprocs, nodes, False
        self.node_of = {rank: i for i, members in enumerate(nodes) for rank in members}
        if sorted(self.node_of) != list(range(nprocs)):
            raise CaptureError(f"the node layout must place each of the {nprocs} ranks exactly once")
        self.logs = [_Log() for _ in range(nprocs)]
        self.meetings: dict[tuple, _Meeting] = {}
        self.boxes: dict[tuple, deque] = {}  # (communicator, source, destination, tag) -> payloads
        self.receivers: dict[tuple, int] = {}  # box -> the rank waiting for a message in it
        self.listening: dict[int, list[tuple]] = {}  # rank -> the boxes it waits on
        self.ready: deque[int] = deque()
        self.waiting: dict[int, Any] = {}  # rank -> what it waits for (text, or a function that makes it)
        self.current, self.deadlocked = -1, None  # what the rank told of a deadlock waits for
        self.scheduler: Any = None

    def run(self, rank_main: Callable[[int], None]) -> None:
        """Run rank_main(rank) for every rank, each until it waits, until all have returned."""
        self.scheduler = greenlet.getcurrent()
        ranks = [greenlet.greenlet(rank_main) for _ in range(self.nprocs)]
        for rank, (runner, log) in enumerate(zip(ranks, self.logs)):
            runner.a2a_log = log
            self.ready.append(rank)
        while self.ready or self.waiting:
            if self.failed:
                for rank in sorted(self.waiting):  # each waiting rank runs once more, to stop
                    self._wake(rank)
            elif not self.ready:  # every live rank waits and nothing can arrive: the first of them says so
                rank = min(self.waiting)
                self.deadlocked = self.waiting[rank]
                self._wake(rank)
            self.current = self.ready.popleft()
            ranks[self.current].switch(self.current)
        self.current = -1

    def deposit(self, key: tuple, payload: np.ndarray) -> None:
        """A sent message waits in its box until received (sends never block: infinite buffering)."""
        box = self.boxes.get(key)
        if box is None:
            box = self.boxes[key] = deque()
        box.append(payload)
        receiver = self.receivers.get(key)
        if receiver is not None:
            self._wake(receiver)

    def collect(self, key: tuple, what: Any) -> np.ndarray:
        """The oldest message in a box, waiting for it (MPI's non-overtaking order); `what` names it (text or a
        function that makes the text), for a deadlock."""
        box = self.boxes.get(key)
        while not box:
            self._listen([key])
            self._block(what)
            box = self.boxes.get(key)
        return box.popleft()

    def has(self, key: tuple) -> bool:
        """Whether a message waits in this box."""
        return bool(self.boxes.get(key))

    def wait_any(self, keys: list[tuple], what: str) -> None:
        """Until a message arrives in one of these boxes."""
        if any(self.boxes.get(k) for k in keys):
            return
        self._listen(keys)
        self._block(what)

    def meet(self, key: tuple, size: int, index: int, value: Any, combine: Callable[[list[Any]], Any]) -> Any:
        """Every member brings a value; all get combine(values in member order)."""
        meeting = self.meetings.get(key)
        if meeting is None:
            meeting = self.meetings[key] = _Meeting(size)
        meeting.values[index] = value
        meeting.arrived += 1
        if meeting.arrived == size:
            del self.meetings[key]
            meeting.result = combine(meeting.values)
            for rank in meeting.waiting:
                self._wake(rank)
        else:
            meeting.waiting.append(self.current)
            self._block(f"the other members of a collective call ({key[-1]})")
        return meeting.result

    def _listen(self, keys: list[tuple]) -> None:
        self.listening[self.current] = keys
        for k in keys:
            self.receivers[k] = self.current

    def _wake(self, rank: int) -> None:
        """A waiting rank becomes ready (it runs when the running rank waits or ends)."""
        if self.waiting.pop(rank, None) is not None:
            for k in self.listening.pop(rank, ()):
                del self.receivers[k]
            self.ready.append(rank)

    def _block(self, what: Any) -> None:
        """The running rank waits for `what`; the scheduler runs other ranks meanwhile."""
        self.waiting[self.current] = what
        self.scheduler.switch()
        if self.failed:
            raise _Aborted()
        if self.deadlocked:
            what, self.deadlocked = self.deadlocked, None
            raise CaptureError(f"deadlock: every rank waits; this one for {what() if callable(what) else what}")


class Datatype:
    """A stand-in MPI datatype: the byte offsets it covers (in order) and its extent."""

    def __init__(self, offsets: np.ndarray, extent: int, name: str = "derived"):
        offsets = np.asarray(offsets, dtype=np.int64)
        if len(offsets) and -(1 << 31) <= offsets.min() and offsets.max() < 1 << 31:
            offsets = offsets.astype(np.int32)  # half the memory: p ranks hold their plans' datatypes at once
        self.offsets, self.extent, self.name = offsets, int(extent), name
        # bytes 0..extent-1 in order: `count` of them cover the first count x extent bytes
        self.dense = len(self.offsets) == self.extent and bool((self.offsets == np.arange(self.extent)).all())

    @classmethod
    def basic(cls, size: int, name: str) -> "Datatype":
        return cls(np.arange(size), size, name)

    size = property(lambda self: len(self.offsets))

    def Get_size(self) -> int:
        return self.size

    def Get_extent(self) -> tuple[int, int]:
        return 0, self.extent

    def Commit(self) -> "Datatype":
        return self

    def Free(self) -> None:
        pass

    def Dup(self) -> "Datatype":
        return Datatype(self.offsets, self.extent, self.name)

    def _at(self, starts: Any) -> np.ndarray:
        """This type's bytes placed at each byte start."""
        starts = np.asarray(starts, dtype=np.int64).reshape(-1)
        return (starts[:, None] + self.offsets[None, :].astype(np.int64)).reshape(-1)

    def Create_contiguous(self, count: int) -> "Datatype":
        return Datatype(self._at(np.arange(count) * self.extent), count * self.extent)

    def Create_vector(self, count: int, blocklength: int, stride: int) -> "Datatype":
        return self.Create_hvector(count, blocklength, stride * self.extent)

    def Create_hvector(self, count: int, blocklength: int, stride: int) -> "Datatype":
        starts = (np.arange(count)[:, None] * stride + np.arange(blocklength)[None, :] * self.extent)
        return Datatype(self._at(starts), (count - 1) * stride + blocklength * self.extent if count else 0)

    def Create_indexed_block(self, blocklength: int, displacements: Any) -> "Datatype":
        return self.Create_hindexed_block(blocklength, np.asarray(displacements, np.int64) * self.extent)

    def Create_hindexed_block(self, blocklength: int, displacements: Any) -> "Datatype":
        return self.Create_hindexed(np.full(len(displacements), int(blocklength)), displacements)

    def Create_indexed(self, blocklengths: Any, displacements: Any) -> "Datatype":
        return self.Create_hindexed(blocklengths, np.asarray(displacements, np.int64) * self.extent)

    def Create_hindexed(self, blocklengths: Any, displacements: Any) -> "Datatype":
        lengths = np.asarray(blocklengths, np.int64).reshape(-1)
        displs = np.asarray(displacements, np.int64).reshape(-1)
        within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # item in its block
        ends = displs + lengths * self.extent
        return Datatype(self._at(np.repeat(displs, lengths) + within * self.extent), int(ends.max(initial=0)))

    def Create_subarray(self, sizes: Any, subsizes: Any, starts: Any, order: Any = None) -> "Datatype":
        grid = np.indices(tuple(subsizes)).reshape(len(subsizes), -1) + np.asarray(starts)[:, None]
        elements = np.ravel_multi_index(tuple(grid), tuple(sizes)) if len(grid[0]) else np.zeros(0, np.int64)
        return Datatype(self._at(elements * self.extent), math.prod(sizes) * self.extent)

    def Create_resized(self, lb: int, extent: int) -> "Datatype":
        return Datatype(self.offsets.astype(np.int64) - lb, extent)

    @staticmethod
    def fromcode(code: str) -> "Datatype":
        return Datatype.basic(np.dtype(code).itemsize, code)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise CaptureError(f"the capture's stand-in MPI does not answer Datatype.{name}")


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, np.integer))


def address(buf: Any) -> int:
    """MPI_Get_address: where the array's first byte is in this process's memory."""
    return int(np.asarray(buf).__array_interface__["data"][0])


class _Memory:
    """The process's memory as a byte buffer, for [MPI.BOTTOM, count, type] specs with absolute offsets."""

    nbytes, itemsize = 0, 1

    @staticmethod
    def regions(offsets: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per region of memory the offsets touch: which of them lie in it, a byte view of it, and their
        indices in the view. Regions split where addresses jump by over 1 MiB: no view spans two allocations."""
        if not len(offsets):
            return
        ordered = np.sort(offsets)
        cut = np.flatnonzero(np.diff(ordered) > 1 << 20)
        for low, high in zip(ordered[np.r_[0, cut + 1]], ordered[np.r_[cut, len(ordered) - 1]]):
            inside = (offsets >= low) & (offsets <= high)
            view = np.ctypeslib.as_array((ctypes.c_ubyte * int(high - low + 1)).from_address(int(low)))
            yield inside, view, offsets[inside] - low

    @staticmethod
    def read(offsets: np.ndarray) -> np.ndarray:
        out = _REAL["empty"](len(offsets), np.uint8)  # numpy's own: filling it is a message, not a logged copy
        for inside, view, at in _Memory.regions(offsets):
            out[inside] = view[at]
        return out

    @staticmethod
    def write(offsets: np.ndarray, data: np.ndarray) -> None:
        for inside, view, at in _Memory.regions(offsets):
            view[at] = data[inside]


def _byte_map(spec: Any) -> tuple[Any, Any]:
    """(the buffer as an array, the bytes the spec covers: None for all, n for the first n, or their offsets)."""
    if isinstance(spec, np.ndarray):
        return np.asarray(spec), None  # a plain view: writes into it are messages, not copies (Tracked)
    if isinstance(spec, (list, tuple)) and spec:
        memory = spec[0] is BOTTOM
        buf, rest = (_Memory() if memory else np.asarray(spec[0])), list(spec[1:])
        datatype = rest.pop() if rest and isinstance(rest[-1], Datatype) else None
        count = rest[0] if rest and _is_count(rest[0]) else None
        if len(rest) <= 1 and (not rest or count is not None):
            if datatype is None:
                return buf, None if count is None else _first(buf, int(count) * buf.itemsize)
            if count is None:
                count = buf.nbytes // datatype.extent if datatype.extent else 0
            if datatype.dense and not memory:
                return buf, _first(buf, int(count) * datatype.extent)
            return buf, datatype._at(np.arange(int(count)) * datatype.extent)
    raise CaptureError(f"the capture's stand-in MPI cannot read the buffer spec {type(spec).__name__} "
                       f"{_short(spec)}; pass an array, [array, datatype] or [array, count, datatype]")


def _first(buf: np.ndarray, n: int) -> int:
    if n > buf.nbytes:
        raise CaptureError(f"a buffer spec of {n} bytes over an array of {buf.nbytes} bytes")
    return n


def _covered(buf: Any, offsets: Any) -> int:
    """How many bytes a mapped spec covers."""
    if offsets is None:
        return buf.nbytes
    return offsets if isinstance(offsets, int) else len(offsets)


def _flat(buf: Any) -> np.ndarray:
    if isinstance(buf, _Memory):
        raise CaptureError("MPI.BOTTOM in a collective: the stand-in answers it in point-to-point calls only")
    if not buf.flags.c_contiguous:
        raise CaptureError("a datatype over a non-contiguous array: the stand-in needs contiguous buffers")
    return buf.reshape(-1).view(np.uint8)


def _nbytes(spec: Any) -> int:
    """Bytes an mpi4py buffer spec carries: array, [array, type], [array, count, type]."""
    return 0 if spec is None else _covered(*_byte_map(spec))


def _pack(spec: Any) -> np.ndarray:
    """The bytes a send spec carries, copied."""
    return np.zeros(0, np.uint8) if spec is None else np.frombuffer(_read(*_byte_map(spec)), np.uint8)


def _read(buf: Any, offsets: Any) -> bytes:
    """A copy of the bytes a mapped spec covers (bytes: cheaper than numpy for the small messages of a capture)."""
    if isinstance(offsets, np.ndarray):
        return (_Memory.read(offsets) if isinstance(buf, _Memory) else _flat(buf)[offsets]).tobytes()
    if offsets is None:
        return buf.tobytes()  # C order, as MPI reads an array
    if not buf.flags.c_contiguous:
        _flat(buf)  # refused, naming why
    data = buf.tobytes()
    return data if offsets == len(data) else data[:offsets]


def _unpack(spec: Any, data: np.ndarray) -> None:
    """Put received bytes where a receive spec says (they may be fewer than it holds)."""
    if spec is not None:
        _write(*_byte_map(spec), data)


def _write(buf: Any, offsets: Any, data: Any) -> None:
    """Put received bytes (bytes or a uint8 array) where a mapped spec says."""
    n = len(data)
    if n > _covered(buf, offsets):
        raise CaptureError(f"a message of {n} bytes arrived in a receive buffer of "
                           f"{_covered(buf, offsets)} bytes (MPI_ERR_TRUNCATE)")
    if isinstance(offsets, np.ndarray):
        raw = np.frombuffer(data, np.uint8)
        if isinstance(buf, _Memory):
            _Memory.write(offsets[:n], raw)
        else:
            _flat(buf)[offsets[:n]] = raw
    elif buf.flags.c_contiguous:
        memoryview(buf).cast("B")[:n] = data  # a plain memory write: not a logged copy into a Tracked array
    elif offsets is None and n == buf.nbytes:
        buf[...] = np.frombuffer(data, buf.dtype).reshape(buf.shape)
    else:
        _flat(buf)  # refused, naming why


def _member_maps(spec: Any, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """A collective buffer and, per member, the byte offsets of its block.

    [array, (counts, displs), type] and [array, counts, type] give each member its own block;
    [array, count, type] gives each `count` items, one after the other; anything else is
    split into n equal blocks.
    """
    buf = np.asarray(spec[0] if isinstance(spec, (list, tuple)) else spec)
    if isinstance(spec, (list, tuple)) and len(spec) == 3 and spec[1] is not None:
        datatype = spec[2] if isinstance(spec[2], Datatype) else Datatype.basic(buf.itemsize, "item")
        if _is_count(spec[1]):
            counts, displs = [int(spec[1])] * n, [int(spec[1]) * i for i in range(n)]
        else:
            pair = isinstance(spec[1], tuple) and len(spec[1]) == 2 and hasattr(spec[1][0], "__len__")
            counts, displs = (spec[1] if pair else (spec[1], None))
            counts = [int(c) for c in counts]
            displs = [int(d) for d in displs] if displs is not None else \
                [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])] if counts else []
        return buf, [datatype._at((np.arange(c) + d) * datatype.extent) for c, d in zip(counts, displs)]
    _, offsets = _byte_map(spec)
    every = np.arange(_covered(buf, offsets)) if offsets is None or isinstance(offsets, int) else offsets
    per = len(every) // n if n else 0
    return buf, [every[i * per: (i + 1) * per] for i in range(n)]


def _blocks(spec: Any, n: int) -> np.ndarray | None:
    """The n equal, back-to-back blocks of a collective buffer as an (n, bytes) view; None if it has others.

    An alltoall of the whole job at 4096 ranks would otherwise map 4096 blocks on each rank.
    """
    if isinstance(spec, (list, tuple)) and len(spec) == 3 and _is_count(spec[1]) \
            and isinstance(spec[2], Datatype) and spec[2].dense:
        buf, nbytes = np.asarray(spec[0]), n * int(spec[1]) * spec[2].extent
    elif isinstance(spec, np.ndarray):
        buf, nbytes = np.asarray(spec), spec.nbytes
    else:
        return None
    if not buf.flags.c_contiguous or nbytes % n or nbytes > buf.nbytes:
        return None
    return buf.reshape(-1).view(np.uint8)[:nbytes].reshape(n, -1)


def _split(spec: Any, n: int) -> list[np.ndarray]:
    """A collective's send buffer as one byte piece per member."""
    if spec is None:
        return [np.zeros(0, np.uint8)] * n
    buf, maps = _member_maps(spec, n)
    raw = np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
    return [raw[m] for m in maps]


def _place(spec: Any, pieces: list[np.ndarray]) -> None:
    """A collective's receive buffer filled with one piece per member."""
    if spec is None:
        return
    buf, maps = _member_maps(spec, len(pieces))
    raw = _flat(buf)
    for m, piece in zip(maps, pieces):
        raw[m[: len(piece)]] = piece


def _vector_bytes(spec: Any, size: int) -> tuple[int, ...]:
    """Per-member bytes of a collective buffer."""
    if spec is None:
        return (0,) * size
    return tuple(len(m) for m in _member_maps(spec, size)[1])


def _short(spec: Any) -> str:
    text = repr(spec)
    return text if len(text) < 60 else text[:57] + "..."


class Request:
    """A stand-in request: the logged message it stands for, and for a receive where it lands."""

    def __init__(self, log: _Log, ident: int | None, receive: tuple | None = None):
        self.log, self.ident, self.receive = log, ident, receive

    def _complete(self) -> None:
        if self.receive:
            world, key, buf, offsets, what = self.receive
            _write(buf, offsets, world.collect(key, what))
            self.receive = None
        self.active = False

    active = True

    def _ready(self) -> bool:
        return not self.receive or self.receive[0].has(self.receive[1])

    @staticmethod
    def Waitany(requests: list["Request"], status: Any = None) -> int:
        """The first active request that can complete (sends always can); UNDEFINED if none is active.

        Under MPI the order is the network's; here it is the lowest such index, and the trace
        waits for that request.
        """
        live = [i for i, q in enumerate(requests) if q.active and q.ident is not None]
        if not live:
            return UNDEFINED
        while True:
            ready = next((i for i in live if requests[i]._ready()), None)
            if ready is not None:
                requests[ready].Wait()
                return ready
            world = requests[live[0]].receive[0]
            world.wait_any([requests[i].receive[1] for i in live], "any of several messages (Waitany)")

    def Wait(self, status: Any = None) -> None:
        self._complete()
        if self.ident is not None:
            self.log.add("wait", (self.ident,))

    def Free(self) -> None:
        pass

    def Test(self, status: Any = None) -> bool:
        raise CaptureError("the capture's stand-in MPI does not answer Request.Test (polling has no "
                           "fixed schedule); use Wait or Waitall")

    @staticmethod
    def Waitall(requests: list["Request"], statuses: Any = None) -> None:
        for q in requests:
            q._complete()
        idents = tuple(q.ident for q in requests if q.ident is not None)
        if requests and idents:
            requests[0].log.add("wait", idents)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise CaptureError(f"the capture's stand-in MPI does not answer Request.{name}")


class Prequest(Request):
    """A persistent request: every Start logs (and for a send, delivers) a new message."""

    def __init__(self, comm: "StandInComm", kind: str, peer: int, spec: Any, tag: int):
        super().__init__(comm._log(), None)
        self.comm, self.kind, self.peer, self.spec, self.tag = comm, kind, peer, spec, tag

    def Start(self) -> None:
        started = self.comm._post(self.kind, self.peer, self.spec, self.tag)
        self.ident, self.receive, self.active = started.ident, started.receive, True

    @staticmethod
    def Startall(requests: list["Prequest"]) -> None:
        for q in requests:
            q.Start()


class _Null:
    """MPI.COMM_NULL / REQUEST_NULL: compares equal only to itself, frees to nothing."""

    def __init__(self, name: str):
        self.name = name

    def Free(self) -> None:
        raise CaptureError(f"Free of {self.name} (MPI raises here too)")

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return self.name


COMM_NULL = _Null("COMM_NULL")
BOTTOM = _Null("BOTTOM")
UNDEFINED = -32766
COMM_TYPE_SHARED = 1
_OPS = {"SUM": np.add, "MIN": np.minimum, "MAX": np.maximum, "PROD": np.multiply,
        "LOR": np.logical_or, "LAND": np.logical_and, "BOR": np.bitwise_or, "BAND": np.bitwise_and}


def _fold(values: list[Any], f: Callable[[Any, Any], Any]) -> Any:
    result = values[0]
    for v in values[1:]:
        result = f(result, v)
    return result


class Op:
    """A stand-in reduction operation."""

    def __init__(self, name: str):
        self.name, self.ufunc = name, _OPS[name]

    def reduce(self, values: list[Any]) -> Any:
        """Fold values in member order (Python objects stay Python objects where they can)."""
        result = _fold(values, self.ufunc)
        return result.item() if isinstance(result, np.generic) else result

    def __repr__(self) -> str:
        return f"MPI.{self.name}"


class StandInComm:
    """A rank's view of a communicator of the captured job: group (world ranks), own index."""

    def __init__(self, world: _World, members: tuple[int, ...], rank: int, key: tuple,
                 dims: tuple[int, ...] = ()):
        self.world, self.members, self.rank, self.key, self.dims = world, members, rank, key, dims
        self._calls = itertools.count()

    size = property(lambda self: len(self.members))

    def Get_size(self) -> int:
        return self.size

    def Get_rank(self) -> int:
        return self.rank

    def __repr__(self) -> str:
        return f"<stand-in communicator of {self.size} ranks, rank {self.rank}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise CaptureError(f"the capture's stand-in communicator does not answer Comm.{name}; "
                           "it answers Dup, Split, Split_type, Create_cart/Sub, Free, the lowercase "
                           "collectives, point-to-point calls and Alltoall(v)/Gather(v)/Scatter(v)/"
                           "Allgather/Bcast/Barrier")

    # -- meeting the other members ------------------------------------------------------------

    def _meet(self, what: str, value: Any, combine: Callable[[list[Any]], Any]) -> Any:
        key = (self.key, next(self._calls), what)
        return self.world.meet(key, self.size, self.rank, value, combine)

    def _world_rank(self, rank: int) -> int:
        if not 0 <= rank < self.size:
            raise CaptureError(f"rank {rank} is outside this communicator of {self.size} ranks")
        return self.members[rank]

    def _log(self) -> _Log:
        log = _log()
        if log is None:
            raise CaptureError("a stand-in communicator was used outside its rank during a capture")
        return log

    # -- set-up ---------------------------------------------------------------------------------

    def Dup(self) -> "StandInComm":
        call = next(self._calls)
        self.world.meet((self.key, call, "Dup"), self.size, self.rank, None, lambda v: None)
        return StandInComm(self.world, self.members, self.rank, (self.key, call, "dup"), self.dims)

    Clone = Dup

    def Split(self, color: int = 0, key: int = 0) -> Any:
        call = next(self._calls)
        everyone = self.world.meet((self.key, call, "Split"), self.size, self.rank, (color, key), list)
        if color == UNDEFINED:
            return COMM_NULL
        mine = sorted((k, i) for i, (c, k) in enumerate(everyone) if c == color)
        ranks = [i for _, i in mine]
        return StandInComm(self.world, tuple(self.members[i] for i in ranks), ranks.index(self.rank),
                           (self.key, call, "split", color))

    def Split_type(self, split_type: int, key: int = 0, info: Any = None) -> Any:
        if split_type != COMM_TYPE_SHARED:
            raise CaptureError(f"Comm.Split_type({split_type}): the stand-in answers COMM_TYPE_SHARED only")
        return self.Split(self.world.node_of[self.members[self.rank]], key)

    def Create_cart(self, dims: Any, periods: Any = None, reorder: bool = False) -> "StandInComm":
        dims = tuple(int(d) for d in dims)
        if math.prod(dims) > self.size:
            raise CaptureError(f"Create_cart({list(dims)}) needs {math.prod(dims)} ranks; "
                               f"the communicator has {self.size}")
        inside = self.rank < math.prod(dims)
        cart = self.Split(0 if inside else UNDEFINED, self.rank)
        if cart is COMM_NULL:
            return COMM_NULL
        cart.dims = dims
        return cart

    def Get_coords(self, rank: int) -> list[int]:
        return list(np.unravel_index(rank, self.dims)) if self.dims else []

    def Sub(self, remain_dims: Any) -> "StandInComm":
        coords = self.Get_coords(self.rank)
        color = 0
        for c, d, keep in zip(coords, self.dims, remain_dims):
            color = color if keep else color * d + int(c)
        sub = self.Split(color, self.rank)
        sub.dims = tuple(d for d, keep in zip(self.dims, remain_dims) if keep)
        return sub

    def Free(self) -> None:
        pass

    Disconnect = Free

    # -- lowercase (object) collectives: really computed -----------------------------------------

    def allgather(self, value: Any) -> list[Any]:
        return self._meet("allgather", value, list)

    def allreduce(self, value: Any, op: Any = None) -> Any:
        return self._meet("allreduce", value, (op if isinstance(op, Op) else Op("SUM")).reduce)

    def bcast(self, value: Any = None, root: int = 0) -> Any:
        return self._meet("bcast", value, lambda v: v[root])

    def gather(self, value: Any, root: int = 0) -> Any:
        everyone = self._meet("gather", value, list)
        return everyone if self.rank == root else None

    def scatter(self, values: Any, root: int = 0) -> Any:
        return self._meet("scatter", values, lambda v: v[root])[self.rank]

    def alltoall(self, values: Any) -> list[Any]:
        everyone = self._meet("alltoall", values, list)
        return [everyone[i][self.rank] for i in range(self.size)]

    def barrier(self) -> None:
        self._meet("barrier", None, lambda v: None)

    # -- point to point: logged, and the data really moves (a schedule may depend on it) ---------

    def _post(self, kind: str, peer: int, spec: Any, tag: int) -> Request:
        """Log a message; a send delivers its bytes now, a receive collects them when completed."""
        if not _is_count(tag) or tag < 0:
            raise CaptureError(f"tag {tag!r}: the stand-in matches messages by explicit tags only (no ANY_TAG)")
        log = self._log()
        ident = next(log.requests)
        buf, offsets = _byte_map(spec)
        log.add(kind, self._world_rank(peer), _covered(buf, offsets), ident)
        if kind == "isend":
            self.world.deposit((self.key, self.rank, peer, tag), _read(buf, offsets))
            return Request(log, ident)
        what = lambda: f"a message from rank {peer} (tag {tag}) on {self!r}"  # noqa: E731  (text when needed)
        return Request(log, ident, (self.world, (self.key, peer, self.rank, tag), buf, offsets, what))

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        return self._post("isend", dest, buf, tag)

    Issend = Irsend = Isend

    def Irecv(self, buf: Any, source: int, tag: int = 0) -> Request:
        return self._post("irecv", source, buf, tag)

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        self._blocking(self._post("isend", dest, buf, tag), "send")

    Ssend = Rsend = Send

    def Recv(self, buf: Any, source: int, tag: int = 0, status: Any = None) -> None:
        self._blocking(self._post("irecv", source, buf, tag), "recv")

    def _blocking(self, request: Request, kind: str) -> None:
        """A blocking call logs as itself, not as a request and a wait."""
        request._complete()
        log = request.log
        if log.recording:
            event = log.events.pop()
            log.events.append((kind, event[1], event[2]))

    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        self._world_rank(dest)
        return Prequest(self, "isend", dest, buf, tag)

    Ssend_init = Send_init

    def Recv_init(self, buf: Any, source: int, tag: int = 0) -> Prequest:
        self._world_rank(source)
        return Prequest(self, "irecv", source, buf, tag)

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = 0,
                 recvtag: int = 0, status: Any = None) -> None:
        Request.Waitall([self._post("isend", dest, sendbuf, sendtag), self._post("irecv", source, recvbuf, recvtag)])

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = 0, recvtag: int = 0,
                         status: Any = None) -> None:
        self.Sendrecv(buf, dest, sendtag, buf, source, recvtag)  # the send's bytes are copied when posted

    # -- buffer collectives: logged, and the data really moves -------------------------------------

    def _collective(self, name: str, root: int | None, sends: tuple[int, ...], recvs: tuple[int, ...],
                    value: Any, combine: Callable[[list[Any]], Any]) -> Any:
        self._log().add("coll", name, self.members, None if root is None else self._world_rank(root), sends, recvs)
        return self._meet(name, value, combine)

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        n = self.size
        outgoing, incoming = _blocks(sendbuf, n), _blocks(recvbuf, n)
        if outgoing is not None and incoming is not None and outgoing.shape == incoming.shape:
            width = (outgoing.shape[1],) * n  # one (n, n, bytes) array for the whole exchange
            incoming[...] = self._collective("alltoall", None, width, width, outgoing, np.stack)[:, self.rank]
            return
        pieces = _split(sendbuf, n)
        everyone = self._collective("alltoall", None, tuple(map(len, pieces)), _vector_bytes(recvbuf, n),
                                    pieces, list)
        _place(recvbuf, [everyone[i][self.rank] for i in range(n)])

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        n = self.size
        pieces = _split(sendbuf, n)
        everyone = self._collective("alltoallv", None, tuple(map(len, pieces)), _vector_bytes(recvbuf, n),
                                    pieces, list)
        _place(recvbuf, [everyone[i][self.rank] for i in range(n)])

    def Alltoallw(self, sendbuf: Any, recvbuf: Any) -> None:
        raise CaptureError("Comm.Alltoallw: the stand-in does not answer it")

    def _gather(self, name: str, sendbuf: Any, recvbuf: Any, root: int) -> None:
        n, mine = self.size, _pack(sendbuf)
        sends = tuple(len(mine) if i == root else 0 for i in range(n))
        recvs = _vector_bytes(recvbuf, n) if self.rank == root else (0,) * n
        everyone = self._collective(name, root, sends, recvs, mine, list)
        if self.rank == root:
            _place(recvbuf, everyone)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._gather("gather", sendbuf, recvbuf, root)

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._gather("gatherv", sendbuf, recvbuf, root)

    def _scatter(self, name: str, sendbuf: Any, recvbuf: Any, root: int) -> None:
        n = self.size
        pieces = _split(sendbuf, n) if self.rank == root else None
        sends = tuple(map(len, pieces)) if pieces else (0,) * n
        recvs = tuple(_nbytes(recvbuf) if i == root else 0 for i in range(n))
        everyone = self._collective(name, root, sends, recvs, pieces, lambda v: v[root])
        _unpack(recvbuf, everyone[self.rank])

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._scatter("scatter", sendbuf, recvbuf, root)

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._scatter("scatterv", sendbuf, recvbuf, root)

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        n, mine = self.size, _pack(sendbuf)
        everyone = self._collective("allgather", None, (len(mine),) * n, _vector_bytes(recvbuf, n), mine, list)
        _place(recvbuf, everyone)

    def Bcast(self, buf: Any, root: int = 0) -> None:
        n, mine = self.size, _nbytes(buf)
        sends = (mine,) * n if self.rank == root else (0,) * n
        recvs = tuple(mine if i == root else 0 for i in range(n))
        data = self._collective("bcast", root, sends, recvs, _pack(buf), lambda v: v[root])
        if self.rank != root:
            _unpack(buf, data)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = None) -> None:
        n, mine = self.size, _nbytes(recvbuf)
        reduce = (op if isinstance(op, Op) else Op("SUM")).reduce
        values = np.array(_byte_map(sendbuf)[0], copy=True)
        total = self._collective("allreduce", None, (mine,) * n, (mine,) * n, values, reduce)
        np.asarray(_byte_map(recvbuf)[0])[...] = total

    def Barrier(self) -> None:
        self._collective("barrier", None, (0,) * self.size, (0,) * self.size, None, lambda v: None)

    def Ibarrier(self) -> Request:
        raise CaptureError("Comm.Ibarrier: the stand-in does not answer non-blocking collectives")


def _standin_module() -> types.ModuleType:
    """A module that answers what algorithms read from `mpi4py.MPI`; anything else is a CaptureError."""
    module = types.ModuleType("mpi4py.MPI", "the capture's stand-in MPI (a2a.simulate)")
    datatypes = {"BYTE": 1, "CHAR": 1, "INT": 4, "LONG": 8, "FLOAT": 4, "DOUBLE": 8, "INT8_T": 1, "INT16_T": 2,
                 "INT32_T": 4, "INT64_T": 8, "UINT8_T": 1, "C_FLOAT_COMPLEX": 8, "C_DOUBLE_COMPLEX": 16}
    for name, size in datatypes.items():
        setattr(module, name, Datatype.basic(size, name))
    for name in _OPS:
        setattr(module, name, Op(name))
    module.Datatype, module.Request, module.Prequest, module.Comm, module.Intracomm = (
        Datatype, Request, Prequest, StandInComm, StandInComm)
    module.COMM_NULL, module.REQUEST_NULL = COMM_NULL, _Null("REQUEST_NULL")
    module.UNDEFINED, module.COMM_TYPE_SHARED, module.PROC_NULL, module.ANY_TAG = UNDEFINED, COMM_TYPE_SHARED, -1, -1
    module.IN_PLACE, module.BOTTOM, module.Get_address = "MPI.IN_PLACE", BOTTOM, address
    module.buffer = lambda obj: obj

    def unknown(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise CaptureError(f"the capture's stand-in MPI does not answer MPI.{name}")

    module.__getattr__ = unknown
    return module
