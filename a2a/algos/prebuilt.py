"""Per-call work done once, at plan time: message specs, and every local copy an algorithm makes.

Local copies go through one seam: `copier` (a prebuilt copy), `copy_function` and
`take_function` (copies whose arrays change per call), all chosen at plan time. A capture
(a2a.simulate) learns an algorithm's local copies by setting a Watcher for each stand-in rank
in WATCHER; a real run has none, so it pays nothing per call. docs/harness.md has the
instruction counts behind the prebuilt specs and copies.
"""
from __future__ import annotations

from contextvars import ContextVar
from functools import partial
from typing import Any, Callable, Protocol

import numpy as np


class Watcher(Protocol):
    """What watches a plan's local copies (a capture's rank): told the bytes of each copy as it happens."""

    def copied(self, nbytes: int) -> None:
        """A local copy of `nbytes` bytes happened."""


# The watcher of the running rank, when a capture runs the plan; a context variable, so each stand-in rank
# (a greenlet with a context of its own) has its own, and no other code sees it.
WATCHER: ContextVar[Watcher | None] = ContextVar("a2a_copy_watcher", default=None)


def spec(buf: np.ndarray) -> tuple[Any, int, Any]:
    """(buffer, count, MPI.BYTE) of a contiguous array: mpi4py then skips numpy's buffer export per call."""
    from mpi4py import MPI

    return MPI.buffer(buf), buf.nbytes, MPI.BYTE


def copier(into: np.ndarray, source: np.ndarray) -> Callable[[], Any]:
    """A prebuilt copy of `source` into `into`: a memoryview assignment (a memcpy) when both are
    contiguous and alike, about 3,000 instructions fewer per call than np.copyto; else np.copyto."""
    watcher = WATCHER.get()
    if watcher is not None:
        return partial(_watched_copy, watcher, into, source)
    if (into.flags.c_contiguous and source.flags.c_contiguous and into.dtype == source.dtype
            and into.shape == source.shape):
        target = into.reshape(-1).view(np.uint8).data  # memoryviews of the bytes
        return partial(target.__setitem__, slice(None), source.reshape(-1).view(np.uint8).data)
    return partial(np.copyto, into, source)


def copy_function() -> Callable[[np.ndarray, np.ndarray], Any]:
    """copy(into, source) for copies made per call between arrays that change (np.copyto's semantics)."""
    watcher = WATCHER.get()
    return np.copyto if watcher is None else partial(_watched_copy, watcher)


def take_function() -> Callable[[np.ndarray, np.ndarray, np.ndarray], Any]:
    """take(source, rows, into): into[k] = source[rows[k]] for every k, a gather of whole rows (np.take)."""
    watcher = WATCHER.get()
    if watcher is None:
        return lambda source, rows, into: np.take(source, rows, axis=0, out=into)

    def take(source: np.ndarray, rows: np.ndarray, into: np.ndarray) -> None:
        np.take(np.asarray(source), rows, axis=0, out=np.asarray(into))  # plain arrays: reported once, here
        watcher.copied(into.nbytes)

    return take


def _watched_copy(watcher: Watcher, into: np.ndarray, source: np.ndarray) -> None:
    np.copyto(np.asarray(into), np.asarray(source))  # plain arrays: reported once, here
    watcher.copied(np.asarray(into).nbytes)


def sendrecv_steps(comm: Any, own: Callable[[], Any], steps: list[tuple[Any, int, Any, int]]) -> Callable[[], Any]:
    """run(): the own block's copy, then one Sendrecv per prebuilt (outgoing, dest, incoming, source)."""
    sendrecv = comm.Sendrecv

    def run():
        own()
        for outgoing, dest, incoming, source in steps:
            sendrecv(outgoing, dest, 0, incoming, source, 0)

    return run
