"""What a captured call did, one event per step of each rank, in program order: the schedule.

Bytes are per the captured count of elements; peers, members and roots are ranks of the whole
captured job (its "world"). A Schedule scales to any size: every byte count grows with the
count of elements per peer (capture_unit checks that it does).
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, replace
from typing import ClassVar, Iterator, TypeVar

import numpy as np

from a2a.algos.schedule import cut


@dataclass(slots=True)
class Isend:
    """A non-blocking send posted (request `request`, waited for by a Wait naming it)."""

    peer: int
    nbytes: int
    request: int
    kind: ClassVar[str] = "isend"

    def scaled(self, factor: int) -> "Isend":
        return Isend(self.peer, self.nbytes * factor, self.request)


@dataclass(slots=True)
class Irecv:
    """A non-blocking receive posted."""

    peer: int
    nbytes: int
    request: int
    kind: ClassVar[str] = "irecv"

    def scaled(self, factor: int) -> "Irecv":
        return Irecv(self.peer, self.nbytes * factor, self.request)


@dataclass(slots=True)
class Send:
    """A blocking send."""

    peer: int
    nbytes: int
    kind: ClassVar[str] = "send"

    def scaled(self, factor: int) -> "Send":
        return Send(self.peer, self.nbytes * factor)


@dataclass(slots=True)
class Recv:
    """A blocking receive."""

    peer: int
    nbytes: int
    kind: ClassVar[str] = "recv"

    def scaled(self, factor: int) -> "Recv":
        return Recv(self.peer, self.nbytes * factor)


@dataclass(slots=True)
class Wait:
    """A wait for these requests (Wait, Waitall, or the one Waitany returned); a range where `packed`."""

    requests: tuple[int, ...] | range
    kind: ClassVar[str] = "wait"

    def scaled(self, factor: int) -> "Wait":
        return self


@dataclass(slots=True)
class Copy:
    """A local copy of `nbytes` bytes."""

    nbytes: int
    kind: ClassVar[str] = "copy"

    def scaled(self, factor: int) -> "Copy":
        return Copy(self.nbytes * factor)


@dataclass(slots=True)
class Collective:
    """A collective on a communicator of `members`: its root (or None) and each member's bytes sent and received."""

    name: str
    members: tuple[int, ...]
    root: int | None
    sends: tuple[int, ...]
    recvs: tuple[int, ...]
    kind: ClassVar[str] = "coll"

    def scaled(self, factor: int) -> "Collective":
        return Collective(self.name, self.members, self.root, _times(self.sends, factor), _times(self.recvs, factor))


@functools.lru_cache(maxsize=8)  # ranks share their counts (a collective of the whole job): one tuple, not p
def _times(counts: tuple[int, ...], factor: int) -> tuple[int, ...]:
    """Each of `counts` times `factor`."""
    return tuple(int(c) * factor for c in counts)


M = TypeVar("M", bound="Messages")  # a Burst or Sendrecvs scales to its own kind (typing.Self: Python 3.11)


@dataclass(slots=True, eq=False)
class Messages:
    """Many messages of `nbytes` as one event: receives from `sources`, sends to `dests`, requests numbered from
    `first` (Burst and Sendrecvs say in which order); a schedule read from steps, where a capture logs one event
    per message."""

    sources: np.ndarray
    dests: np.ndarray
    nbytes: int
    first: int

    def scaled(self: M, factor: int) -> M:
        return replace(self, nbytes=self.nbytes * factor)


@dataclass(slots=True, eq=False)
class Burst(Messages):
    """Batches: in batch k, every receive from sources[source_ends[k-1]:source_ends[k]] and send to
    dests[dest_ends[k-1]:dest_ends[k]] posted at once (from 0 for k = 0), then one wait for them all."""

    source_ends: np.ndarray
    dest_ends: np.ndarray
    kind: ClassVar[str] = "burst"

    def batches(self) -> Iterator[tuple[list[int], list[int]]]:
        """Each batch's sources and dests."""
        return zip(cut(self.sources.tolist(), self.source_ends), cut(self.dests.tolist(), self.dest_ends))

    def expanded(self) -> list["Event"]:
        """The events a capture logs for it: per batch each Irecv, each Isend, and a Wait for them all."""
        found: list[Event] = []
        first = self.first
        for sources, dests in self.batches():
            ids = range(first, first + len(sources) + len(dests))
            found += [Irecv(q, self.nbytes, i) for q, i in zip(sources, ids)]
            found += [Isend(q, self.nbytes, i) for q, i in zip(dests, ids[len(sources):])]
            found.append(Wait(tuple(ids)))
            first = ids.stop
        return found


@dataclass(slots=True, eq=False)
class Sendrecvs(Messages):
    """Sendrecv k, one after another: an Isend of sent[k] blocks of nbytes to dests[k] and an Irecv of received[k]
    from sources[k] (requests first + 2k and first + 2k + 1; one block each where None), then a wait for both:
    Exchanges and Rounds."""

    sent: np.ndarray | None = None
    received: np.ndarray | None = None
    kind: ClassVar[str] = "sendrecvs"

    def rounds(self) -> Iterator[tuple[int, int, int, int]]:
        """(dest, bytes sent, source, bytes received) of each Sendrecv."""
        sent, received = ((itertools.repeat(self.nbytes) if blocks is None else (blocks * self.nbytes).tolist())
                          for blocks in (self.sent, self.received))
        return zip(self.dests.tolist(), sent, self.sources.tolist(), received)

    def expanded(self) -> list["Event"]:
        """The events a capture logs for it: per Sendrecv an Isend, an Irecv and a Wait for both."""
        found: list[Event] = []
        for k, (d, sent, q, received) in enumerate(self.rounds()):
            i = self.first + 2 * k
            found += [Isend(d, sent, i), Irecv(q, received, i + 1), Wait((i, i + 1))]
        return found


@dataclass(slots=True, eq=False)
class Posts:
    """A run of non-blocking posts kept as arrays (`packed`: a capture logs an Isend or Irecv event each): post k
    is a send if outgoing[k], else a receive, with peers[k], of nbytes[k] bytes, as request requests[k]."""

    outgoing: np.ndarray
    peers: np.ndarray
    nbytes: np.ndarray
    requests: np.ndarray
    kind: ClassVar[str] = "posts"

    def scaled(self, factor: int) -> "Posts":
        return replace(self, nbytes=self.nbytes * factor)

    def expanded(self) -> list["Event"]:
        """The Isend and Irecv events it stands for."""
        return [(Isend if out else Irecv)(peer, nbytes, request) for out, peer, nbytes, request in
                zip(self.outgoing.tolist(), self.peers.tolist(), self.nbytes.tolist(), self.requests.tolist())]

    def __repr__(self) -> str:  # whole, unlike numpy's summary of long arrays: capture_unit compares the text
        return (f"Posts({self.outgoing.tolist()}, {self.peers.tolist()}, {self.nbytes.tolist()}, "
                f"{self.requests.tolist()})")


@dataclass(slots=True)
class WholeAlltoallv:
    """An MPI_Alltoallv of the whole job, left to the library's own algorithms (SMPI's, where a simulation replays
    the library's alltoallv): the bytes this rank sends each rank and receives from each."""

    sends: tuple[int, ...]
    recvs: tuple[int, ...]
    kind: ClassVar[str] = "alltoallv"

    def scaled(self, factor: int) -> "WholeAlltoallv":
        return WholeAlltoallv(_times(self.sends, factor), _times(self.recvs, factor))


Event = Isend | Irecv | Send | Recv | Wait | Copy | Collective | Burst | Sendrecvs | Posts | WholeAlltoallv
PACKED_RUN = 16  # posts in a row that `packed` keeps as arrays; a Wait for as many in a row keeps a range

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
        return Schedule(self.nprocs, self.count * factor, self.itemsize,
                        [[e.scaled(factor) for e in rank] for rank in self.events])

    def expanded(self) -> "Schedule":
        """The same schedule with each Burst, Sendrecvs or Posts as the events a capture logs for it."""
        return Schedule(self.nprocs, self.count, self.itemsize, [unpacked(rank) for rank in self.events])

    def packed(self) -> "Schedule":
        """The same schedule with long runs of posts, and waits for long runs of requests, kept as arrays."""
        return Schedule(self.nprocs, self.count, self.itemsize, [packed(rank) for rank in self.events])


def unpacked(events: list[Event]) -> list[Event]:
    """The events as a capture logs them: each Burst, Sendrecvs or Posts as its events, a Wait's range as a tuple."""
    return [x for e in events for x in (e.expanded() if isinstance(e, (Messages, Posts)) else
                                        (Wait(tuple(e.requests)),) if isinstance(e, Wait) and
                                        isinstance(e.requests, range) else (e,))]


def packed(events: list[Event]) -> list[Event]:
    """The events with each run of PACKED_RUN or more Isend and Irecv as one Posts, and a Wait's requests as a range
    where they are PACKED_RUN or more in a row: a captured linear posts 2(p-1) a rank, millions of events at
    thousands of ranks."""
    found: list[Event] = []
    run: list[Isend | Irecv] = []

    def close() -> None:
        if len(run) < PACKED_RUN:
            found.extend(run)
        else:
            columns = zip(*((isinstance(e, Isend), e.peer, e.nbytes, e.request) for e in run))
            found.append(Posts(*(np.array(c, kind) for c, kind in zip(columns, (bool, np.int32, np.int64,
                                                                                np.int64)))))
        run.clear()

    for e in events:
        if isinstance(e, (Isend, Irecv)):
            run.append(e)
            continue
        close()
        ids = e.requests if isinstance(e, Wait) else ()
        if len(ids) >= PACKED_RUN and ids == tuple(range(ids[0], ids[0] + len(ids))):
            e = Wait(range(ids[0], ids[0] + len(ids)))
        found.append(e)
    close()
    return found


def traffic(events: list[Event]) -> dict[int, tuple[int, int]]:
    """Messages and bytes this rank sends to each peer (point-to-point only)."""
    sent: dict[int, list[int]] = {}
    for e in unpacked(events):
        if isinstance(e, (Isend, Send)):
            totals = sent.setdefault(e.peer, [0, 0])
            totals[0] += 1
            totals[1] += e.nbytes
    return {peer: (n, b) for peer, (n, b) in sent.items()}


def collectives(events: list[Event]) -> list[tuple[str, tuple[int, ...]]]:
    """(name, member ranks) of each collective this rank called, in order."""
    return [(e.name, e.members) for e in events if isinstance(e, Collective)]


def copied(events: list[Event]) -> int:
    """Bytes this rank copied locally."""
    return sum(e.nbytes for e in events if isinstance(e, Copy))


class RankLog:
    """One rank's events as its call runs (only the recorded call logs); the copy watcher of its plan."""

    follows = False  # whether it reads the bytes messages carry (the hooks below)

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.recording = False
        self.requests = itertools.count()

    def add(self, event: Event) -> None:
        if self.recording:
            self.events.append(event)

    def copied(self, nbytes: int) -> None:
        if self.recording and nbytes:
            self.events.append(Copy(int(nbytes)))

    # what a byte-following log (a2a.schedules.tracer) reads besides the events; nothing here
    def carried(self, ident: int, data: bytes) -> None:
        """The bytes of request `ident`: a send's when posted, a receive's when complete."""

    def blocked(self, ident: int) -> None:
        """Request `ident` was a blocking Send or Recv: complete before the call returned."""

    def raced(self) -> None:
        """The rank waits for whichever of several requests completes first (Waitany)."""

    def collected(self, members: tuple[int, ...], sent: list, received: list) -> None:
        """A collective among `members` (world ranks): the bytes sent to and received from each (None: nothing)."""
