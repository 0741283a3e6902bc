"""The stand-in ranks' world: greenlets that run one at a time, their messages in flight, their meetings.

Each rank is a greenlet and one runs at a time: a rank that must wait (for a message, or for
the other members of a collective) goes back to the scheduler, which runs the next ready rank.
There is no lock and no polling, and a deadlock is exact: ranks wait and none is ready.
"""
from __future__ import annotations

import os
import time
from collections import deque
from contextvars import Context
from typing import Any, Callable

import greenlet

from a2a.errors import CaptureError

CHECK_SECONDS = 0.1  # between two readings of the resident memory, taken as ranks switch


class Aborted(Exception):
    """Another rank failed; this one stops waiting."""


class Meeting:
    def __init__(self, size: int):
        self.values: list[Any] = [None] * size
        self.arrived = 0
        self.waiting: list[int] = []
        self.result: Any = None


class World:
    """What the stand-in ranks share: the layout, the messages in flight and the meetings of collectives.

    Each rank is a greenlet and one runs at a time: a rank that must wait (for a message,
    or for the other members of a collective) goes back to the scheduler, which runs the
    next ready rank. There is no lock and no polling, and a deadlock is exact: ranks wait
    and none is ready.
    """

    def __init__(self, nprocs: int, nodes: list[list[int]], memory_limit: int | None = None):
        self.nprocs, self.nodes, self.failed = nprocs, nodes, False
        self.memory_limit, self.overflow = memory_limit, ""  # bytes resident; why the capture was stopped
        self.node_of = {rank: i for i, members in enumerate(nodes) for rank in members}
        if sorted(self.node_of) != list(range(nprocs)):
            raise CaptureError(f"the node layout must place each of the {nprocs} ranks exactly once")
        self.meetings: dict[tuple, Meeting] = {}
        # (communicator, source, destination, tag) -> payloads, oldest first; a list, not a deque: at a million
        # boxes holding one message each, a deque's 760 bytes were most of the capture's memory
        self.boxes: dict[tuple, list[bytes]] = {}
        self.receivers: dict[tuple, int] = {}  # box -> the rank waiting for a message in it
        self.listening: dict[int, list[tuple]] = {}  # rank -> the boxes it waits on
        self.ready: deque[int] = deque()
        self.waiting: dict[int, Any] = {}  # rank -> what it waits for (text, or a function that makes it)
        self.current, self.deadlocked = -1, None  # what the rank told of a deadlock waits for
        self.scheduler: Any = None

    def run(self, rank_main: Callable[[int], None], contexts: list[Context]) -> None:
        """Run rank_main(rank) for every rank in its own context, each until it waits, until all have returned."""
        self.scheduler, checked = greenlet.getcurrent(), time.monotonic()
        ranks = [greenlet.greenlet(rank_main) for _ in range(self.nprocs)]
        for rank, (runner, context) in enumerate(zip(ranks, contexts)):
            runner.gr_context = context
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
            if self.memory_limit and not self.failed and time.monotonic() - checked > CHECK_SECONDS:
                self._check_memory()
                checked = time.monotonic()
        self.current = -1

    def _check_memory(self) -> None:
        """Stop every rank once the process holds more than its limit (all ranks' plans live in this process)."""
        held = resident_bytes()
        if self.memory_limit is not None and held > self.memory_limit:
            self.failed = True
            self.overflow = (f"the capture of {self.nprocs} ranks holds {held / 2**30:.1f} GiB, above its limit of "
                             f"{self.memory_limit / 2**30:.1f} GiB: every rank's plan lives in this one process")

    def deposit(self, key: tuple, payload: bytes) -> None:
        """A sent message waits in its box until received (sends never block: infinite buffering)."""
        box = self.boxes.get(key)
        if box is None:
            box = self.boxes[key] = []
        box.append(payload)
        receiver = self.receivers.get(key)
        if receiver is not None:
            self._wake(receiver)

    def collect(self, key: tuple, what: Any) -> bytes:
        """The oldest message in a box, waiting for it (MPI's non-overtaking order); `what` names it (text or a
        function that makes the text), for a deadlock."""
        box = self.boxes.get(key)
        while not box:
            self._listen([key])
            self._block(what)
            box = self.boxes.get(key)
        if len(box) == 1:
            del self.boxes[key]
        return box.pop(0)

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
            meeting = self.meetings[key] = Meeting(size)
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
            raise Aborted()
        if self.deadlocked:
            what, self.deadlocked = self.deadlocked, None
            raise CaptureError(f"deadlock: every rank waits; this one for {what() if callable(what) else what}")


def resident_bytes() -> int:
    """This process's resident memory (0 where /proc is not there)."""
    try:
        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def memory_limit(share: int = 1) -> int | None:
    """What a capture may hold: what this process holds now and its `share` of three quarters of the memory
    available (1/2 each for two captures at once)."""
    available = available_bytes()
    return resident_bytes() + available * 3 // (4 * share) if available else None


def available_bytes() -> int | None:
    """The memory available to start new work without swapping (MemAvailable; None where /proc is not there)."""
    try:
        lines = open("/proc/meminfo").read().splitlines()
    except OSError:
        return None
    return next((int(line.split()[1]) * 1024 for line in lines if line.startswith("MemAvailable:")), None)
