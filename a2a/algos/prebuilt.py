"""Per-call work done once, at plan time: message specs and copies (callgrind counts in README)."""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

NUMPY_COPYTO = np.copyto


def spec(buf: np.ndarray) -> tuple[Any, int, Any]:
    """(buffer, count, MPI.BYTE) of a contiguous array: mpi4py then skips numpy's buffer export per call."""
    from mpi4py import MPI

    return MPI.buffer(buf), buf.nbytes, MPI.BYTE


def copier(into: np.ndarray, source: np.ndarray) -> Callable[[], Any]:
    """A prebuilt copy of `source` into `into`: a memoryview assignment (a memcpy) when both are
    contiguous and alike, about 3,000 instructions fewer per call than np.copyto; else np.copyto,
    and always np.copyto while something watches numpy's copies (a2a.capture replaces np.copyto)."""
    if (np.copyto is NUMPY_COPYTO and into.flags.c_contiguous and source.flags.c_contiguous
            and into.dtype == source.dtype and into.shape == source.shape):
        target = memoryview(into.reshape(-1).view(np.uint8))
        return partial(target.__setitem__, slice(None), memoryview(source.reshape(-1).view(np.uint8)))
    return partial(np.copyto, into, source)


def sendrecv_steps(comm: Any, own: Callable[[], Any], steps: list[tuple[Any, int, Any, int]]) -> Callable[[], Any]:
    """run(): the own block's copy, then one Sendrecv per prebuilt (outgoing, dest, incoming, source)."""
    sendrecv = comm.Sendrecv

    def run():
        own()
        for outgoing, dest, incoming, source in steps:
            sendrecv(outgoing, dest, 0, incoming, source, 0)

    return run
