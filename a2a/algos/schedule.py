"""The steps a factory runs, as data the simulator and the contention model read too.

A Step is one Sendrecv of blocks with one peer each way; a Batch posts one block from and to each of
many peers at once and waits for them all. At thousands of ranks an object per step is too many, so runs
of them are kept as arrays: Exchanges, Sendrecvs of one block each way (pairwise's p-1 steps); Rounds,
Sendrecvs of many blocks, as peers and counts (ring's); Batches, one Batch after another. A block is named
by its (source, destination) ranks. All of these follow the copy of the rank's own block. Phases are a whole
call that also copies and calls collectives between its messages (the leader-based algorithms, parallel_split):
Posted messages of many blocks, Rounds, Copied blocks, and collectives Among a communicator's members, in order.

zero_copy_plan runs Steps of block moves with MPI derived datatypes on absolute addresses: no
packing copies. A block starts in the send buffer, ends in the receive buffer (received there
directly in its last round), and in between waits in a temporary buffer; a slot is reused only
after the round that sent its block, so no round receives where it sends (Traff et al.'s double
buffering). Each round is one Sendrecv whose two datatypes list the blocks' addresses, so MPI
reads and writes them in place, from whichever buffer holds each. batch_plan runs Batches with
persistent requests.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple, TypeVar, overload

import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.prebuilt import copier, sendrecv_steps

T = TypeVar("T")


class Step(NamedTuple):
    """Send `sent` (in this order) to `dest`, receive `received` (in the sender's order) from `source`.

    Blocks are rows (source rank, destination rank) of an n x 2 integer array: a simulation reads
    only their number, so thousands of ranks' steps are made without a Python object per block.
    """

    dest: int
    sent: np.ndarray
    source: int
    received: np.ndarray

    def sends(self) -> list[tuple[int, int]]:
        """(destination, blocks) of each message this rank sends."""
        return [(self.dest, len(self.sent))]


class Batch(NamedTuple):
    """Receive the block of each rank in `sources` and send this rank's block to each rank in `dests`, posted at
    once (the receives first, each kind in this order); then wait for them all. Neither names this rank, nor
    any rank twice."""

    sources: np.ndarray
    dests: np.ndarray

    def sends(self) -> list[tuple[int, int]]:
        """(destination, blocks) of each message this rank sends."""
        return [(d, 1) for d in self.dests.tolist()]


@dataclass(frozen=True)
class Exchanges:
    """Steps of one block each way, kept as two arrays: step k sends this rank's block for dests[k] to dests[k]
    and receives the block of sources[k] for this rank from sources[k] (pairwise's p-1 steps). Iterating gives
    the Steps; the simulator reads the arrays. Neither names this rank."""

    rank: int
    dests: np.ndarray
    sources: np.ndarray
    copied: int = 1  # blocks copied locally before the exchanges: the own block, or p for the whole buffer

    def __iter__(self) -> Iterator[Step]:
        sent, received = pairs(self.rank, self.dests), pairs(self.sources, self.rank)
        return (Step(d, sent[k:k + 1], q, received[k:k + 1])
                for k, (d, q) in enumerate(zip(self.dests.tolist(), self.sources.tolist())))


@dataclass(frozen=True)
class Rounds:
    """Sendrecvs of many blocks, one after another, kept for the simulator as arrays of peers and block counts:
    round k sends sent[k] blocks to dests[k] and receives received[k] from sources[k]. Iterating gives the Steps
    that name the blocks (`named()`), which the real run executes; only it needs them (ring's p-1 rounds hold
    O(p^2) blocks per rank)."""

    dests: np.ndarray
    sources: np.ndarray
    sent: np.ndarray
    received: np.ndarray
    named: Callable[[], list[Step]] | None = None  # for a plan that moves the named blocks (ring's zero copy)

    def __iter__(self) -> Iterator[Step]:
        if self.named is None:
            raise TypeError("these Rounds name no blocks (only a simulation reads them)")
        return iter(self.named())

    def rounds(self) -> list[list[tuple[int, int]]]:
        """(destination, blocks) of each round's message."""
        return [[(d, n)] for d, n in zip(self.dests.tolist(), self.sent.tolist())]


@dataclass(frozen=True)
class Batches:
    """Batch k receives from sources[source_ends[k-1]:source_ends[k]] and sends to dests[dest_ends[k-1]:
    dest_ends[k]] (from 0 for k = 0), kept as arrays; iterating gives the Batches. No batch is empty."""

    sources: np.ndarray
    source_ends: np.ndarray
    dests: np.ndarray
    dest_ends: np.ndarray

    @classmethod
    def even(cls, sources: np.ndarray, dests: np.ndarray, width: int) -> "Batches":
        """Batches of `width` >= 1 sources and as many dests (the last may have fewer), taken in order."""
        n = len(sources)
        ends = np.append(np.arange(width, n, width), n) if n else np.zeros(0, np.int64)
        return cls(sources, ends, dests, ends)

    def __iter__(self) -> Iterator[Batch]:
        return map(Batch, cut(self.sources, self.source_ends), cut(self.dests, self.dest_ends))


class Posted(NamedTuple):
    """Receives of received[k] blocks from sources[k], then sends of sent[k] blocks to dests[k], all posted at once;
    then `meanwhile` blocks copied locally while they travel, and one wait for them all."""

    sources: np.ndarray
    received: np.ndarray
    dests: np.ndarray
    sent: np.ndarray
    meanwhile: int = 0

    def rounds(self) -> list[list[tuple[int, int]]]:
        """(destination, blocks) of each message: one round."""
        return [list(zip(self.dests.tolist(), self.sent.tolist()))]


class Copied(NamedTuple):
    """A local copy of `blocks` blocks."""

    blocks: int

    def rounds(self) -> list[list[tuple[int, int]]]:
        return []


class Among(NamedTuple):
    """The collective `name` ("gather", "scatter", "alltoallv") on a communicator of the ranks `members`, rooted at
    the rank `root` (None: no root): this rank sends sent[k] blocks to members[k] and receives received[k] from it."""

    name: str
    members: tuple[int, ...]
    root: int | None
    sent: tuple[int, ...]
    received: tuple[int, ...]

    def rounds(self) -> list[list[tuple[int, int]]]:
        """(member, blocks) of each message this rank sends, to itself too: one round."""
        return [[(m, n) for m, n in zip(self.members, self.sent) if n]]


Phase = Posted | Copied | Among | Rounds


@dataclass(frozen=True)
class Phases:
    """A rank's whole call, phase after phase: unlike Steps and Batches, it copies its own block only where a phase
    says so."""

    phases: tuple[Phase, ...]

    def rounds(self) -> list[list[tuple[int, int]]]:
        """(destination, blocks) of each message, round by round."""
        return [found for phase in self.phases for found in phase.rounds()]


@overload
def cut(values: np.ndarray, ends: np.ndarray) -> Iterator[np.ndarray]: ...
@overload
def cut(values: list[T], ends: np.ndarray) -> Iterator[list[T]]: ...
def cut(values: np.ndarray | list[T], ends: np.ndarray) -> Iterator[np.ndarray | list[T]]:
    """values[:ends[0]], values[ends[0]:ends[1]], ...: the runs that end at `ends`."""
    begun = 0
    for end in ends.tolist():
        yield values[begun:end]
        begun = end


def pairs(sources: Any, destinations: Any) -> np.ndarray:
    """The blocks from sources[k] to destinations[k] (either may be one rank for all), as an n x 2 array."""
    sources, destinations = np.asarray(sources), np.asarray(destinations)
    found = np.empty((np.broadcast(sources, destinations).size, 2), np.int64)
    found[:, 0], found[:, 1] = sources, destinations
    return found


def slots(steps: list[Step], rank: int, size: int) -> tuple[list[tuple[list, list]], int]:
    """Per round, the (buffer, row) of each block sent and received; and the temporary rows needed.

    Buffers: "send" rows are destinations, "recv" rows are sources, "temp" rows are allocated.
    """
    where = {(rank, dest): ("send", dest) for dest in range(size) if dest != rank}
    free: list[int] = []
    used = 0
    placed = []
    for step in steps:
        sent = []
        for block in map(tuple, step.sent.tolist()):
            location = where.pop(block, None)
            if location is None:
                raise RuntimeError(f"schedule sends block {block} that rank {rank} does not hold")
            sent.append(location)
        received = []
        for block in map(tuple, step.received.tolist()):
            if block[1] == rank:
                received.append(("recv", block[0]))
                continue
            if not free:
                free.append(used)
                used += 1
            where[block] = ("temp", free.pop())
            received.append(where[block])
        free.extend(row for buffer, row in sent if buffer == "temp")  # reusable after this round
        placed.append((sent, received))
    return placed, used


def zero_copy_plan(comm: Any, sendbuf: np.ndarray, recvbuf: np.ndarray, steps: list[Step]):
    """(run, free) that copies the own block, then runs each round as one Sendrecv of datatypes."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    width = send.shape[1]
    placed, rows = slots(steps, r, p)
    temp = np.empty((rows, width), np.uint8)
    base = {name: MPI.Get_address(buf) for name, buf in (("send", send), ("recv", recv), ("temp", temp))}

    def datatype(locations: list[tuple[str, int]]) -> Any:
        return MPI.BYTE.Create_hindexed_block(width, [base[b] + row * width for b, row in locations]).Commit()

    calls = [((MPI.BOTTOM, 1, datatype(sent)), step.dest, (MPI.BOTTOM, 1, datatype(received)), step.source)
             for step, (sent, received) in zip(steps, placed)]

    def free():
        for outgoing, _, incoming, _ in calls:
            outgoing[2].Free()
            incoming[2].Free()
        held.clear()

    held = [temp]  # the datatypes hold the temporary buffer's address: keep it alive until free
    return sendrecv_steps(comm, copier(recv[r], send[r]), calls), free


def batch_plan(comm: Any, send: Any, recv: Any, batches: Batches):
    """(run, free) on per-peer blocks (rows of one array, or views of uneven length): the own block copied,
    then per batch every receive and send started at once and waited for (persistent requests)."""
    from mpi4py import MPI

    r = comm.rank
    rounds = [[comm.Recv_init(recv[q], q) for q in batch.sources.tolist()]
              + [comm.Send_init(send[q], q) for q in batch.dests.tolist()] for batch in batches]
    start, wait, own = MPI.Prequest.Startall, MPI.Request.Waitall, copier(recv[r], send[r])

    def run():
        own()
        for requests in rounds:
            start(requests)
            wait(requests)

    return run, lambda: [q.Free() for requests in rounds for q in requests]
