"""The buffer rules of MPI_Alltoall, checked on every rank before any algorithm runs."""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import BadInput


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
