"""The buffer rules of MPI_Alltoall and MPI_Alltoallv, checked on every rank before any algorithm runs.

An alltoallv side is a `VBuffer`: the array, and per peer a count and a displacement in elements."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from a2a.errors import BadInput


def check_buffers(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """Raise BadInput on every rank if any rank's buffers break MPI_Alltoall's rules."""
    problem = _buffer_problem(comm.size, sendbuf, recvbuf)
    shape = None if problem else (sendbuf.dtype.str, sendbuf.size)
    verdicts = comm.allgather((problem, shape))
    for rank, (problem, _) in enumerate(verdicts):
        if problem:
            raise BadInput(f"rank {rank}: {problem}")
    shapes = {s for _, s in verdicts}
    if len(shapes) > 1:
        found = ", ".join(f"{np.dtype(d).name} x {n}" for d, n in sorted(shapes))
        raise BadInput(f"ranks pass different buffers ({found}); every rank must pass the same dtype and size")


def _buffer_problem(size: int, sendbuf: Any, recvbuf: Any) -> str | None:
    for name, buf in (("sendbuf", sendbuf), ("recvbuf", recvbuf)):
        if not isinstance(buf, np.ndarray):
            return f"{name} must be a NumPy array, not {type(buf).__name__}"
        if not buf.flags.c_contiguous:
            return f"{name} must be C-contiguous (use np.ascontiguousarray)"
    if sendbuf.dtype != recvbuf.dtype:
        return f"sendbuf is {sendbuf.dtype} but recvbuf is {recvbuf.dtype}; they must match"
    if sendbuf.size != recvbuf.size:
        return f"sendbuf has {sendbuf.size} elements but recvbuf {recvbuf.size}; they must match"
    if sendbuf.size % size:
        return f"buffer size {sendbuf.size} is not divisible by the communicator size {size}"
    if sendbuf.size and np.shares_memory(sendbuf, recvbuf):
        return "sendbuf and recvbuf overlap; pass two separate arrays"
    if not recvbuf.flags.writeable:
        return "recvbuf is read-only"
    return None

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

        return (MPI.buffer(self.array), (self.counts.tolist(), self.displs.tolist()),
                MPI.Datatype.fromcode(self.array.dtype.char))


def packed(counts: Sequence[int]) -> np.ndarray:
    """Displacements of blocks laid end to end: the exclusive prefix sum of the counts."""
    counts = np.asarray(counts, dtype=np.int64)
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64) if len(counts) else counts


def vbuffers(comm: Any, sendbuf: Any, sendcounts: Any, recvbuf: Any, recvcounts: Any,
             sdispls: Any = None, rdispls: Any = None) -> tuple[VBuffer, VBuffer]:
    """Check MPI_Alltoallv's rules on every rank; raise BadInput on all of them if any rank breaks one.

    Checked: arrays, dtypes alike everywhere, counts and displacements (p non-negative
    integers each), blocks inside their buffer, receive blocks not overlapping (MPI lets
    send blocks overlap: they are only read), and that what each rank sends to a peer is
    what that peer expects to receive (the counts are exchanged once, here).
    """
    p = comm.size
    problem, sides = None, None
    try:
        sides = (_side("send", sendbuf, sendcounts, sdispls, p), _side("recv", recvbuf, recvcounts, rdispls, p))
        problem = _pair_problem(*sides)
    except BadInput as bad:
        problem = str(bad)
    dtype = None if problem else sendbuf.dtype.str
    verdicts = comm.allgather((problem, dtype))
    _raise_first(verdicts)
    if len({d for _, d in verdicts}) > 1:
        found = ", ".join(sorted({np.dtype(d).name for _, d in verdicts}))
        raise BadInput(f"ranks pass different dtypes ({found}); every rank must pass the same dtype")
    send, recv = sides
    incoming = comm.alltoall(send.counts.tolist())  # incoming[j]: what rank j will send here
    mismatched = [(j, int(n), int(m)) for j, (n, m) in enumerate(zip(incoming, recv.counts)) if n != m]
    text = "; ".join(f"rank {j} sends {n} but recvcounts[{j}] = {m}" for j, n, m in mismatched[:4])
    _raise_first(comm.allgather((f"{text}; sendcounts must match the peers' recvcounts" if text else None, None)))
    return send, recv


def _raise_first(verdicts: list[tuple[str | None, Any]]) -> None:
    for rank, (problem, _) in enumerate(verdicts):
        if problem:
            raise BadInput(f"rank {rank}: {problem}")


def _side(side: str, buf: Any, counts: Any, displs: Any, p: int) -> VBuffer:
    name = f"{side}buf"
    if not isinstance(buf, np.ndarray):
        raise BadInput(f"{name} must be a NumPy array, not {type(buf).__name__}")
    if not buf.flags.c_contiguous:
        raise BadInput(f"{name} must be C-contiguous (use np.ascontiguousarray)")
    counts = _integers(f"{side}counts", counts, p)
    displs = packed(counts) if displs is None else _integers(f"{side[0]}displs", displs, p)
    ends = counts + displs
    if p and ends.max() > buf.size:
        j = int(np.argmax(ends))
        raise BadInput(f"{name} has {buf.size} elements, but block {j} ends at element {int(ends[j])} "
                       f"({side}counts[{j}] = {int(counts[j])} from displacement {int(displs[j])})")
    return VBuffer(buf, counts, displs)


def _integers(name: str, values: Any, p: int) -> np.ndarray:
    """`values` as p non-negative int64s, or BadInput saying what is accepted."""
    try:
        array = np.asarray(values)
        ok = array.ndim == 1 and array.dtype.kind in "iu"
    except (TypeError, ValueError):
        ok = False
    if not ok or len(array) != p:
        raise BadInput(f"{name} must be {p} integers (one per rank of the communicator), got {values!r}")
    if (array < 0).any():
        j = int(np.argmax(array < 0))
        raise BadInput(f"{name}[{j}] = {int(array[j])}; counts and displacements must be >= 0")
    return array.astype(np.int64)


def _pair_problem(send: VBuffer, recv: VBuffer) -> str | None:
    if send.array.dtype != recv.array.dtype:
        return f"sendbuf is {send.array.dtype} but recvbuf is {recv.array.dtype}; they must match"
    if not recv.array.flags.writeable:
        return "recvbuf is read-only"
    if send.array.size and recv.array.size and np.shares_memory(send.array, recv.array):
        return "sendbuf and recvbuf overlap; pass two separate arrays"
    clash = overlap(recv.counts, recv.displs)
    if clash:
        return (f"receive blocks {clash[0]} and {clash[1]} overlap (rdispls and recvcounts); "
                "MPI writes no element twice")
    return None


def overlap(counts: Sequence[int], displs: Sequence[int]) -> tuple[int, int] | None:
    """Two peers whose non-empty blocks share an element, or None."""
    spans = sorted((int(d), int(d) + int(n), j) for j, (n, d) in enumerate(zip(counts, displs)) if n)
    for (_, end, j), (start, _, k) in zip(spans, spans[1:]):
        if start < end:
            return tuple(sorted((j, k)))
    return None
