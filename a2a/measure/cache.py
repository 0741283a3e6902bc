"""Warm or cold caches (`--cache`): cold is IMB's -off_cache, a ring of buffer sets larger than the last-level cache."""
from __future__ import annotations

import itertools
import mmap
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from a2a.errors import BadConfig
from a2a.units import parse_size

SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
ASSUMED_BYTES = 32 << 20  # when neither sysfs nor sysconf tell
RING_OVER_CACHE = 2  # a cold ring holds at least this many last-level caches, so each set is evicted in turn
PAGE = mmap.PAGESIZE  # sets start on pages: no two share a line, and prefetchers do not cross into the next


def last_level_cache(caches: Path = SYSFS_CACHES) -> dict[str, Any]:
    """This machine's last-level data cache: {'bytes': size, 'read_from': where it was read}."""
    levels = []
    for index in sorted(caches.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError, BadConfig):
            continue
        if kind in ("Unified", "Data"):
            levels.append((level, size, str(index / "size")))
    if levels:
        _, size, path = max(levels)
        return {"bytes": size, "read_from": path}
    for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError):
            continue
        if size > 0:
            return {"bytes": size, "read_from": f"sysconf({name})"}
    return {"bytes": ASSUMED_BYTES, "read_from": "assumed (not readable on this machine)"}


def buffer_sets(comm: Any, cache: str, template: tuple[np.ndarray, np.ndarray], uses: int,
                max_memory: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], str]:
    """(send, receive) buffer pairs like `template` for one point, and a note when a cold ring stayed short.

    Every pair is a copy of the template on pages of its own, mapped as C's malloc maps a large
    buffer (numpy's heap put a 2 MiB receive buffer 48 bytes past a cache line here, and asks
    for transparent huge pages from 4 MiB, which malloc never does). Warm: one pair. Cold:
    enough pairs that the ring holds RING_OVER_CACHE last-level caches, but no more than
    `uses` (each call then has a pair of its own) nor what `max_memory` allows; every rank
    makes the same number, as plans are collective.
    """
    from mpi4py import MPI

    send, recv = template
    half = _pages(send.nbytes)
    stride = half + _pages(recv.nbytes)
    llc = last_level_cache()["bytes"]
    wanted = length = 1
    if cache == "cold":
        wanted = comm.allreduce(max(2, min(-(-RING_OVER_CACHE * llc // stride), uses)), op=MPI.MAX)
        length = min(wanted, comm.allreduce(max(1, max_memory // stride), op=MPI.MIN))
    arena = np.frombuffer(mmap.mmap(-1, length * stride), np.uint8)  # anonymous: page-aligned, no madvise
    sets = []
    for base in range(0, length * stride, stride):
        into = arena[base:base + send.nbytes].view(send.dtype).reshape(send.shape)
        back = arena[base + half:base + half + recv.nbytes].view(recv.dtype).reshape(recv.shape)
        into[...] = send
        back[...] = 0  # touches every page now, not inside a timed call
        sets.append((into, back))
    note = "" if length == wanted else (f"cache cold: only {length} buffer sets fit in --max-memory, "
                                        f"{length * stride >> 20} MiB against a {llc >> 20} MiB last-level cache")
    return sets, note


def _pages(nbytes: int) -> int:
    """Whole pages holding `nbytes` (at least one)."""
    return -(-max(nbytes, 1) // PAGE) * PAGE


def evict() -> None:
    """Write RING_OVER_CACHE last-level caches of scratch memory, pushing everything else out."""
    np.ones(RING_OVER_CACHE * last_level_cache()["bytes"], np.uint8)


def cycling(runs: list[Callable[[], Any]]) -> Callable[[], Any]:
    """One call after the other of `runs`, round and round (a single run is returned as it is)."""
    if len(runs) == 1:
        return runs[0]
    following = itertools.cycle(runs).__next__
    return lambda: following()()
