"""Buffers and datatypes as byte maps: which bytes of which array an mpi4py buffer spec covers.

The stand-in MPI reads and writes messages through these maps, so data really moves in a
capture (a schedule may depend on what it receives) and each message's size is its bytes.
A Datatype is the byte offsets it covers (in order) and its extent; MPI.BOTTOM specs address
the process's memory itself.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any, Iterator

import numpy as np

from a2a.errors import CaptureError


class Null:
    """MPI.COMM_NULL / REQUEST_NULL: compares equal only to itself, frees to nothing."""

    def __init__(self, name: str):
        self.name = name

    def Free(self) -> None:
        raise CaptureError(f"Free of {self.name} (MPI raises here too)")

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return self.name


BOTTOM = Null("BOTTOM")


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


def is_count(value: Any) -> bool:
    return isinstance(value, (int, np.integer))


def address(buf: Any) -> int:
    """MPI_Get_address: where the array's first byte is in this process's memory."""
    return int(np.asarray(buf).__array_interface__["data"][0])


class Memory:
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
        out = np.empty(len(offsets), np.uint8)  # numpy's own: filling it is a message, not a logged copy
        for inside, view, at in Memory.regions(offsets):
            out[inside] = view[at]
        return out

    @staticmethod
    def write(offsets: np.ndarray, data: np.ndarray) -> None:
        for inside, view, at in Memory.regions(offsets):
            view[at] = data[inside]


def byte_map(spec: Any) -> tuple[Any, Any]:
    """(the buffer as an array, the bytes the spec covers: None for all, n for the first n, or their offsets)."""
    if isinstance(spec, np.ndarray):
        return np.asarray(spec), None  # a plain view: writes into it are messages, not copies (Tracked)
    if isinstance(spec, (list, tuple)) and spec:
        memory = spec[0] is BOTTOM
        buf, rest = (Memory() if memory else np.asarray(spec[0])), list(spec[1:])
        datatype = rest.pop() if rest and isinstance(rest[-1], Datatype) else None
        count = rest[0] if rest and is_count(rest[0]) else None
        if len(rest) <= 1 and (not rest or count is not None):
            if datatype is None:
                return buf, None if count is None else first(buf, int(count) * buf.itemsize)
            if count is None:
                count = buf.nbytes // datatype.extent if datatype.extent else 0
            if datatype.dense and not memory:
                return buf, first(buf, int(count) * datatype.extent)
            return buf, datatype._at(np.arange(int(count)) * datatype.extent)
    raise CaptureError(f"the capture's stand-in MPI cannot read the buffer spec {type(spec).__name__} "
                       f"{short(spec)}; pass an array, [array, datatype] or [array, count, datatype]")


def first(buf: np.ndarray | Memory, n: int) -> int:
    if n > buf.nbytes:
        raise CaptureError(f"a buffer spec of {n} bytes over an array of {buf.nbytes} bytes")
    return n


def covered(buf: Any, offsets: Any) -> int:
    """How many bytes a mapped spec covers."""
    if offsets is None:
        return buf.nbytes
    return offsets if isinstance(offsets, int) else len(offsets)


def flat(buf: Any) -> np.ndarray:
    if isinstance(buf, Memory):
        raise CaptureError("MPI.BOTTOM in a collective: the stand-in answers it in point-to-point calls only")
    if not buf.flags.c_contiguous:
        raise CaptureError("a datatype over a non-contiguous array: the stand-in needs contiguous buffers")
    return buf.reshape(-1).view(np.uint8)


def nbytes_of(spec: Any) -> int:
    """Bytes an mpi4py buffer spec carries: array, [array, type], [array, count, type]."""
    return 0 if spec is None else covered(*byte_map(spec))


def pack(spec: Any) -> np.ndarray:
    """The bytes a send spec carries, copied."""
    return np.zeros(0, np.uint8) if spec is None else np.frombuffer(read(*byte_map(spec)), np.uint8)


def read(buf: Any, offsets: Any) -> bytes:
    """A copy of the bytes a mapped spec covers (bytes: cheaper than numpy for the small messages of a capture)."""
    if isinstance(offsets, np.ndarray):
        return (Memory.read(offsets) if isinstance(buf, Memory) else flat(buf)[offsets]).tobytes()
    if offsets is None:
        return buf.tobytes()  # C order, as MPI reads an array
    if not buf.flags.c_contiguous:
        flat(buf)  # refused, naming why
    data = buf.tobytes()
    return data if offsets == len(data) else data[:offsets]


def unpack(spec: Any, data: np.ndarray) -> None:
    """Put received bytes where a receive spec says (they may be fewer than it holds)."""
    if spec is not None:
        write(*byte_map(spec), data)


def write(buf: Any, offsets: Any, data: Any) -> None:
    """Put received bytes (bytes or a uint8 array) where a mapped spec says."""
    n = len(data)
    if n > covered(buf, offsets):
        raise CaptureError(f"a message of {n} bytes arrived in a receive buffer of "
                           f"{covered(buf, offsets)} bytes (MPI_ERR_TRUNCATE)")
    if isinstance(offsets, np.ndarray):
        raw = np.frombuffer(data, np.uint8)
        if isinstance(buf, Memory):
            Memory.write(offsets[:n], raw)
        else:
            flat(buf)[offsets[:n]] = raw
    elif buf.flags.c_contiguous:
        memoryview(buf).cast("B")[:n] = data  # a plain memory write: not a logged copy into a Tracked array
    elif offsets is None and n == buf.nbytes:
        buf[...] = np.frombuffer(data, buf.dtype).reshape(buf.shape)
    else:
        flat(buf)  # refused, naming why


def member_maps(spec: Any, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """A collective buffer and, per member, the byte offsets of its block.

    [array, (counts, displs), type] and [array, counts, type] give each member its own block;
    [array, count, type] gives each `count` items, one after the other; anything else is
    split into n equal blocks.
    """
    buf = np.asarray(spec[0] if isinstance(spec, (list, tuple)) else spec)
    if isinstance(spec, (list, tuple)) and len(spec) == 3 and spec[1] is not None:
        datatype = spec[2] if isinstance(spec[2], Datatype) else Datatype.basic(buf.itemsize, "item")
        if is_count(spec[1]):
            counts, displs = np.full(n, int(spec[1]), np.int64), None
        else:
            pair = isinstance(spec[1], tuple) and len(spec[1]) == 2 and hasattr(spec[1][0], "__len__")
            counts, displs = (spec[1] if pair else (spec[1], None))
            counts = np.asarray(counts, np.int64).reshape(-1)
        ends = np.cumsum(counts)
        starts = ends - counts  # where each member's items begin among all members' items laid end to end
        displs = starts if displs is None else np.asarray(displs, np.int64).reshape(-1)
        items = np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(displs - starts, counts)
        every, bounds = datatype._at(items * datatype.extent), [0, *(ends * datatype.size).tolist()]
        return buf, [every[a:b] for a, b in zip(bounds, bounds[1:])]
    _, offsets = byte_map(spec)
    every = np.arange(covered(buf, offsets)) if offsets is None or isinstance(offsets, int) else offsets
    per = len(every) // n if n else 0
    return buf, [every[i * per: (i + 1) * per] for i in range(n)]


def whole_blocks(spec: Any, n: int) -> np.ndarray | None:
    """The n equal, back-to-back blocks of a collective buffer as an (n, bytes) view; None if it has others.

    An alltoall of the whole job at 4096 ranks would otherwise map 4096 blocks on each rank; so would
    an alltoallv whose counts are equal and displacements packed.
    """
    count = _even_count(spec[1], n) if isinstance(spec, (list, tuple)) and len(spec) == 3 else None
    if count is not None and isinstance(spec[2], Datatype) and spec[2].dense:
        buf, nbytes = np.asarray(spec[0]), n * count * spec[2].extent
    elif isinstance(spec, np.ndarray):
        buf, nbytes = np.asarray(spec), spec.nbytes
    else:
        return None
    if not buf.flags.c_contiguous or nbytes % n or nbytes > buf.nbytes:
        return None
    return buf.reshape(-1).view(np.uint8)[:nbytes].reshape(n, -1)


def _even_count(counts: Any, n: int) -> int | None:
    """The count of each of n members: one count, or (counts, displacements) that are equal and packed."""
    if is_count(counts):
        return int(counts)
    if not (isinstance(counts, tuple) and len(counts) == 2 and hasattr(counts[0], "__len__")):
        return None
    each, displs = np.asarray(counts[0]).reshape(-1), np.asarray(counts[1]).reshape(-1)
    if n and len(each) == n and (each == each[0]).all() and np.array_equal(displs, np.arange(n) * each[0]):
        return int(each[0])
    return None


def split(spec: Any, n: int) -> list[np.ndarray]:
    """A collective's send buffer as one byte piece per member."""
    if spec is None:
        return [np.zeros(0, np.uint8)] * n
    buf, maps = member_maps(spec, n)
    raw = np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
    return [raw[m] for m in maps]


def place(spec: Any, pieces: list[np.ndarray]) -> None:
    """A collective's receive buffer filled with one piece per member."""
    if spec is None:
        return
    buf, maps = member_maps(spec, len(pieces))
    raw = flat(buf)
    for m, piece in zip(maps, pieces):
        raw[m[: len(piece)]] = piece


def vector_bytes(spec: Any, size: int) -> tuple[int, ...]:
    """Per-member bytes of a collective buffer."""
    if spec is None:
        return (0,) * size
    return tuple(len(m) for m in member_maps(spec, size)[1])


def short(spec: Any) -> str:
    text = repr(spec)
    return text if len(text) < 60 else text[:57] + "..."
