"""What an all-to-all may be given, checked on every rank before any message moves.

Buffers are NumPy arrays, or what mpi4py also takes: `[buf, datatype]` and `[buf, count,
datatype]` specs with a predefined datatype, `array.array`, `bytearray`, `memoryview`, `bytes`
(to send), host DLPack tensors, and `MPI.IN_PLACE` as the send buffer. Refused, with the reason:
GPU arrays, object dtypes, non-contiguous arrays, derived datatypes. Every dtype of a fixed size
travels: numbers as MPI's own types, anything else (strings, records) as bytes.

Each rank checks its own call here; a2a.execute.agreement then makes every rank raise alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from a2a.errors import BadInput

GPU = "a GPU array ({kind}); the a2a algorithms move host memory. Accepted: NumPy arrays or other host buffers " \
      "(copy it to the host first, e.g. cupy.asnumpy); a CUDA-aware MPI takes it directly in comm.Alltoall"


def is_in_place(buf: Any) -> bool:
    """Whether `buf` is MPI.IN_PLACE."""
    if buf is None or isinstance(buf, np.ndarray):
        return False
    from mpi4py import MPI

    return buf is MPI.IN_PLACE


def peers(comm: Any) -> int:
    """The ranks a call exchanges with: the communicator's, or the remote group's of an intercommunicator."""
    return comm.Get_remote_size() if is_inter(comm) else comm.size


def is_inter(comm: Any) -> bool:
    """Whether `comm` is an intercommunicator (a communicator that cannot say is not one)."""
    test = getattr(comm, "Is_inter", None)
    return bool(test()) if test else False


def host_array(buf: Any, name: str, count_unit: int = 0) -> np.ndarray:
    """`buf` as a NumPy array in host memory; BadInput names what it was and what is accepted.

    For a [buf, count, datatype] spec, `count_unit` is how many counts the exchange moves in all
    (the peers, for an alltoall's count per peer); 0 refuses a spec with a count.
    """
    if isinstance(buf, np.ndarray):
        array = buf
    elif hasattr(buf, "__cuda_array_interface__"):
        raise BadInput(f"{name} is " + GPU.format(kind=type(buf).__name__))
    elif hasattr(buf, "__dlpack_device__") and buf.__dlpack_device__()[0] != 1:  # kDLCPU is 1
        raise BadInput(f"{name} is " + GPU.format(kind=f"{type(buf).__name__} on DLPack device "
                                                  f"{buf.__dlpack_device__()[0]}"))
    elif isinstance(buf, (list, tuple)):
        array = _spec_array(buf, name, count_unit)
    elif hasattr(buf, "__dlpack__"):
        array = np.from_dlpack(buf)
    else:
        try:
            view = memoryview(buf)
            array = np.frombuffer(view, dtype=view.format if view.format not in ("c", "") else "B")
        except (TypeError, ValueError):
            raise BadInput(f"{name} is a {type(buf).__name__}; accepted: a NumPy array, a [buf, count, datatype] "
                           "spec, or any host buffer (array.array, bytearray, memoryview)") from None
    if array.dtype.hasobject:
        raise BadInput(f"{name} has dtype {array.dtype}, references to Python objects rather than their data; "
                       "accepted: dtypes of a fixed size (numbers, bool, bytes 'S', str 'U', records)")
    if not array.flags.c_contiguous:
        raise BadInput(f"{name} must be C-contiguous, as MPI reads it (use np.ascontiguousarray)")
    return array


def _spec_array(spec: Sequence[Any], name: str, count_unit: int) -> np.ndarray:
    """The elements a [buf, datatype] or [buf, count, datatype] spec covers."""
    from mpi4py import MPI

    if len(spec) not in (2, 3) or not isinstance(spec[-1], MPI.Datatype):
        raise BadInput(f"{name}: a message spec is [buf, datatype] or [buf, count, datatype]; got {len(spec)} items")
    try:
        dtype = np.dtype(spec[-1].tocode())
    except ValueError:
        raise BadInput(f"{name}: a derived datatype; accepted: a predefined datatype (MPI.INT, MPI.DOUBLE, ...), "
                       "or a NumPy array of the record dtype") from None
    raw = host_array(spec[0], name)
    if raw.nbytes % dtype.itemsize:
        raise BadInput(f"{name}: {raw.nbytes} bytes are no whole number of {dtype} items")
    array = raw.reshape(-1).view(np.uint8).view(dtype)
    if len(spec) == 2:
        return array
    if not count_unit or not isinstance(spec[1], (int, np.integer)):
        raise BadInput(f"{name}: a spec with counts; for alltoallv give them as sendcounts and recvcounts")
    used = int(spec[1]) * count_unit
    if not 0 <= used <= array.size:
        raise BadInput(f"{name}: the spec's count {spec[1]} x {count_unit} peers is {used} items; "
                       f"its buffer holds {array.size}")
    return array[:used]


def mpi_type(dtype: np.dtype) -> tuple[Any, int]:
    """The MPI datatype that carries `dtype`'s items, and how many of it one item is: numbers travel as MPI's
    own types, anything else of a fixed size (strings, records, non-native byte order) as bytes."""
    from mpi4py import MPI

    if dtype.kind in "biufc" and dtype.isnative:
        try:
            datatype = MPI.Datatype.fromcode(dtype.char)
        except (KeyError, ValueError):
            datatype = None
        if datatype is not None and datatype.Get_size() == dtype.itemsize:
            return datatype, 1
    return MPI.BYTE, dtype.itemsize


def alltoall_call(comm: Any, sendbuf: Any, recvbuf: Any) -> tuple[np.ndarray | None, np.ndarray, tuple]:
    """This rank's (sendbuf or None when in place, recvbuf, signature) of an MPI_Alltoall; BadInput if they break
    its rules here (every rank raises later if any does: see agree)."""
    n = peers(comm)
    in_place = is_in_place(sendbuf)
    recv = host_array(recvbuf, "recvbuf", n)
    send = None if in_place else host_array(sendbuf, "sendbuf", n)
    if in_place and is_inter(comm):
        raise BadInput("MPI.IN_PLACE on an intercommunicator; MPI allows it on intracommunicators only")
    if send is not None:
        if send.dtype != recv.dtype:
            raise BadInput(f"sendbuf is {send.dtype} but recvbuf is {recv.dtype}; they must match")
        if send.size != recv.size:
            raise BadInput(f"sendbuf has {send.size} elements but recvbuf {recv.size}; they must match")
        if send.size and np.shares_memory(send, recv):
            raise BadInput("sendbuf and recvbuf overlap; pass two separate arrays, or MPI.IN_PLACE as sendbuf")
    if recv.size % max(n, 1):
        raise BadInput(f"buffer size {recv.size} is not divisible by the {n} ranks it is exchanged with")
    if not recv.flags.writeable:
        raise BadInput("recvbuf is read-only")
    return send, recv, (recv.dtype.str, recv.size // max(n, 1), in_place)


@dataclass(frozen=True)
class VBuffer:
    """One side of an alltoallv: the array, and per peer a count and a displacement in elements."""

    array: np.ndarray
    counts: np.ndarray
    displs: np.ndarray

    @property
    def nbytes(self) -> np.ndarray:
        """Bytes per peer."""
        return self.counts * self.array.itemsize

    @property
    def offsets(self) -> np.ndarray:
        """Byte offset of each peer's block."""
        return self.displs * self.array.itemsize

    def blocks(self) -> list[np.ndarray]:
        """Each peer's block as a view of raw bytes."""
        raw = self.array.reshape(-1).view(np.uint8)
        return [raw[o: o + n] for o, n in zip(self.offsets.tolist(), self.nbytes.tolist())]

    def spec(self) -> tuple:
        """The (buffer, (counts, displs), datatype) message spec mpi4py's Alltoallv takes."""
        from mpi4py import MPI

        datatype, scale = mpi_type(self.array.dtype)
        return (MPI.buffer(self.array), ((self.counts * scale).tolist(), (self.displs * scale).tolist()), datatype)


def blocks(buf: np.ndarray, nblocks: int) -> np.ndarray:
    """View a buffer as `nblocks` rows of raw bytes, one per peer."""
    return buf.reshape(-1).view(np.uint8).reshape(nblocks, buf.nbytes // nblocks)


def packed(counts: Sequence[int] | np.ndarray) -> np.ndarray:
    """Displacements of blocks laid end to end: the exclusive prefix sum of the counts."""
    array = np.asarray(counts, dtype=np.int64)
    return np.concatenate(([0], np.cumsum(array)[:-1])).astype(np.int64) if len(array) else array


def alltoallv_call(comm: Any, sendbuf: Any, sendcounts: Any, recvbuf: Any, recvcounts: Any, sdispls: Any = None,
                   rdispls: Any = None) -> tuple[VBuffer | None, VBuffer, tuple]:
    """This rank's (send side or None when in place, receive side, signature) of an MPI_Alltoallv; BadInput if
    they break its rules here.

    Checked: the buffers, counts and displacements (one non-negative integer per peer each),
    blocks inside their buffer, receive blocks not overlapping (MPI lets send blocks overlap:
    they are only read). Whether what each rank sends is what its peer expects is `matched_counts`'.
    """
    n, in_place = peers(comm), is_in_place(sendbuf)
    if in_place and is_inter(comm):
        raise BadInput("MPI.IN_PLACE on an intercommunicator; MPI allows it on intracommunicators only")
    send = None if in_place else _side("send", sendbuf, sendcounts, sdispls, n)
    recv = _side("recv", recvbuf, recvcounts, rdispls, n)
    if send is not None:
        if send.array.dtype != recv.array.dtype:
            raise BadInput(f"sendbuf is {send.array.dtype} but recvbuf is {recv.array.dtype}; they must match")
        if send.array.size and recv.array.size and np.shares_memory(send.array, recv.array):
            raise BadInput("sendbuf and recvbuf overlap; pass two separate arrays, or MPI.IN_PLACE as sendbuf")
    if not recv.array.flags.writeable:
        raise BadInput("recvbuf is read-only")
    clash = overlap(recv.counts, recv.displs)
    if clash:
        raise BadInput(f"receive blocks {clash[0]} and {clash[1]} overlap (rdispls and recvcounts); "
                       "MPI writes no element twice")
    return send, recv, (recv.array.dtype.str, "per-peer counts", in_place)


def _side(side: str, buf: Any, counts: Any, displs: Any, p: int) -> VBuffer:
    name = f"{side}buf"
    array = host_array(buf, name)
    counts = _integers(f"{side}counts", counts, p)
    displs = packed(counts) if displs is None else _integers(f"{side[0]}displs", displs, p)
    ends = counts + displs
    if p and ends.max() > array.size:
        j = int(np.argmax(ends))
        raise BadInput(f"{name} has {array.size} elements, but block {j} ends at element {int(ends[j])} "
                       f"({side}counts[{j}] = {int(counts[j])} from displacement {int(displs[j])})")
    return VBuffer(array, counts, displs)


def _integers(name: str, values: Any, p: int) -> np.ndarray:
    """`values` as p non-negative int64s, or BadInput saying what is accepted."""
    try:
        array = np.asarray(values)
        ok = array.ndim == 1 and array.dtype.kind in "iu"
    except (TypeError, ValueError):
        ok = False
    if not ok or len(array) != p:
        raise BadInput(f"{name} must be {p} integers (one per rank exchanged with), got {values!r}")
    if (array < 0).any():
        j = int(np.argmax(array < 0))
        raise BadInput(f"{name}[{j}] = {int(array[j])}; counts and displacements must be >= 0")
    return array.astype(np.int64)


def overlap(counts: Sequence[int] | np.ndarray, displs: Sequence[int] | np.ndarray) -> tuple[int, int] | None:
    """Two peers whose non-empty blocks share an element, or None."""
    spans = sorted((int(d), int(d) + int(n), j) for j, (n, d) in enumerate(zip(counts, displs)) if n)
    for (_, end, j), (start, _, k) in zip(spans, spans[1:]):
        if start < end:
            return min(j, k), max(j, k)
    return None
