"""A schedule as rounds of messages, kept as arrays for the analytical backend: the events SimGrid replays (a
captured schedule's, or those the algorithm's steps give, rank by rank), read as the rounds each rank sends in.

A rank's round is what it posts before one wait: a Sendrecv (one message out), a batch of a Burst, a run of Posts,
a collective among members (lowered, as the replay lowers it, to every member's messages at once), a blocking send
or receive, a whole-job Alltoallv. Round k of the call is every rank's k-th round, as a2a.analysis.contention reads
an algorithm's traffic. A local copy counts before the rank's next round.

Ranks whose rounds have the same shape (how many, and how many messages in each) are stacked into one Group: a
matrix of destinations (a rank a row, in the smallest integer type that holds them), and the bytes of each
message as one number, one row for every rank, or a matrix, whichever holds them; linear at 16,384 ranks is one
group of 16,384 x 16,383 destinations in 512 MiB.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from a2a.schedules.events import (
    Burst,
    Collective,
    Copy,
    Event,
    Irecv,
    Isend,
    Posts,
    Recv,
    Send,
    Sendrecvs,
    Wait,
    WholeAlltoallv,
)

Chunk = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | int]  # (round, source rank, dest rank, bytes)


@dataclass
class RankRounds:
    """One rank's messages in order: destination, bytes and round of each; copies as (round, bytes, whether made
    while the round's messages travel); its rounds."""

    dests: np.ndarray
    nbytes: np.ndarray
    rounds: np.ndarray
    copies: list[tuple[int, int, bool]]
    count: int


def rank_rounds(events: Iterable[Event], rank: int) -> RankRounds:
    """A rank's events read as rounds (module docstring)."""
    dests: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    rounds: list[np.ndarray] = []
    copies: list[tuple[int, int, bool]] = []
    posted: list[tuple[int, int]] = []  # sends posted since the last wait
    waiting = False  # posts made since the last wait
    now = 0

    def add(to: np.ndarray, nbytes: np.ndarray, where: np.ndarray) -> None:
        dests.append(np.asarray(to, np.int64))
        sizes.append(np.asarray(nbytes, np.int64))
        rounds.append(np.asarray(where, np.int64))

    def close() -> None:
        nonlocal now, waiting
        if posted:
            add(np.array([d for d, _ in posted]), np.array([b for _, b in posted]), np.full(len(posted), now))
            posted.clear()
        now += 1
        waiting = False

    for e in events:
        if isinstance(e, Copy):
            if e.nbytes:  # between posts and their wait, it overlaps the messages (the replay's order too)
                copies.append((now, e.nbytes, waiting))
        elif isinstance(e, Sendrecvs):
            steps = len(e.dests)
            add(e.dests, np.full(steps, e.nbytes) if e.sent is None else e.sent * e.nbytes, now + np.arange(steps))
            now += steps
        elif isinstance(e, Burst):
            per_batch = np.diff(e.dest_ends, prepend=0)
            add(e.dests, np.full(len(e.dests), e.nbytes), now + np.repeat(np.arange(len(per_batch)), per_batch))
            now += len(per_batch)
        elif isinstance(e, Posts):
            out = e.outgoing.astype(bool)
            for peer, nbytes in zip(e.peers[out].tolist(), e.nbytes[out].tolist()):
                copies.append((now, nbytes, True)) if peer == rank else posted.append((peer, nbytes))
            waiting = waiting or bool(len(e.outgoing))
        elif isinstance(e, Isend):
            copies.append((now, e.nbytes, True)) if e.peer == rank else posted.append((e.peer, e.nbytes))
            waiting = True
        elif isinstance(e, Irecv):
            waiting = True
        elif isinstance(e, Wait):
            if waiting:
                close()
        elif isinstance(e, (Send, Recv)):
            if isinstance(e, Send):
                copies.append((now, e.nbytes, True)) if e.peer == rank else posted.append((e.peer, e.nbytes))
            close()
        elif isinstance(e, (Collective, WholeAlltoallv)):
            members = e.members if isinstance(e, Collective) else range(len(e.sends))
            for member, nbytes in zip(members, e.sends):
                if member == rank:  # the replay copies it after posting the messages, before their wait
                    copies.append((now, int(nbytes), True)) if nbytes else None
                elif nbytes:
                    posted.append((member, int(nbytes)))
            close()
    if waiting:
        close()
    empty = np.zeros(0, np.int64)
    return RankRounds(np.concatenate(dests) if dests else empty, np.concatenate(sizes) if sizes else empty,
                      np.concatenate(rounds) if rounds else empty, copies, now)


@dataclass
class Group:
    """Ranks whose rounds have one shape: `rounds[c]` the round of column c (ascending), `dests[i, c]` rank
    ranks[i]'s destination there, `nbytes` one number, one row or a matrix."""

    ranks: np.ndarray
    rounds: np.ndarray
    dests: np.ndarray
    nbytes: np.ndarray | int


@dataclass
class RoundTable:
    """A whole call's rounds: its groups, every copy as (rank, round, bytes) arrays, the number of rounds and ranks."""

    nprocs: int
    groups: list[Group]
    copies: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # rank, round, bytes, overlapped (0 or 1)
    count: int
    matrix: np.ndarray | None = None  # an alltoallv's bytes from row to column, for every message and own copy

    def with_matrix(self, counts: np.ndarray, itemsize: int) -> None:
        """Every message's bytes and every copy's (the own block, as direct schedules copy) from a count matrix."""
        kind = np.int32 if int(counts.max(initial=0)) * itemsize < 2**31 else np.int64
        self.matrix = counts.astype(kind)
        self.matrix *= itemsize
        rank, at, _, overlapped = self.copies
        self.copies = (rank, at, self.matrix[rank, rank].astype(np.int64), overlapped)

    @property
    def messages(self) -> int:
        return sum(g.dests.size for g in self.groups)

    def nbytes(self) -> int:
        """Bytes the arrays hold."""
        return sum(g.dests.nbytes + g.ranks.nbytes + g.rounds.nbytes + np.asarray(g.nbytes).nbytes
                   for g in self.groups) + sum(a.nbytes for a in self.copies)

    def chunks(self, first: int, last: int, most: int) -> Iterator[Chunk]:
        """The messages of rounds first..last-1, at most `most` at a time, rounds counted from `first`."""
        for group in self.groups:
            c0, c1 = np.searchsorted(group.rounds, [first, last])
            if c1 <= c0:
                continue
            columns = max(1, min(c1 - c0, most))
            for begin in range(c0, c1, columns):
                end = min(begin + columns, c1)
                rows = max(1, most // (end - begin))
                for top in range(0, len(group.ranks), rows):
                    yield self._chunk(group, slice(top, top + rows), slice(begin, end), first)

    def _chunk(self, group: Group, rows: slice, columns: slice, first: int) -> Chunk:
        ranks = group.ranks[rows]
        width = columns.stop - columns.start
        where = np.tile(group.rounds[columns] - first, len(ranks))
        source = np.repeat(ranks, width)
        dest = group.dests[rows, columns].astype(np.int64).ravel()
        nbytes = group.nbytes
        if self.matrix is not None:
            return where, source, dest, self.matrix[source, dest]
        if isinstance(nbytes, np.ndarray):
            nbytes = np.tile(nbytes[columns], len(ranks)) if nbytes.ndim == 1 else nbytes[rows, columns].ravel()
        return where, source, dest, nbytes


def table(per_rank: Iterable[tuple[int, RankRounds]], nprocs: int) -> RoundTable:
    """Stack every rank's rounds (rank, its rounds; in rank order) into groups of one shape."""
    kind = np.uint16 if nprocs <= np.iinfo(np.uint16).max else np.int32
    shapes: dict[tuple, list[dict]] = {}
    copies: list[tuple[int, int, int, bool]] = []
    count = 0
    for rank, mine in per_rank:
        count = max(count, mine.count, *(at + 1 for at, _, _ in mine.copies))  # a copy after the last round: one more
        copies += [(rank, at, nbytes, overlapped) for at, nbytes, overlapped in mine.copies]
        if not len(mine.dests):
            continue
        found = _shaped(shapes, mine.rounds)
        found["ranks"].append(rank)
        found["dests"].append(mine.dests.astype(kind))
        sizes = found["sizes"]
        sizes.append(sizes[0] if sizes and np.array_equal(sizes[0], mine.nbytes) else mine.nbytes)
    groups = [_group(found) for alike in shapes.values() for found in alike]
    columns = [np.array([c[i] for c in copies], np.int64) for i in range(4)]
    return RoundTable(nprocs, groups, (columns[0], columns[1], columns[2], columns[3]), count)


def _shaped(shapes: dict[tuple, list[dict]], rounds: np.ndarray) -> dict:
    """The group being built for ranks whose messages go in these rounds (a new one if none has them): found by a
    cheap summary of the array, then compared whole."""
    summary = (len(rounds), int(rounds[0]), int(rounds[-1]), int(rounds.sum()))
    alike = shapes.setdefault(summary, [])
    found = next((g for g in alike if np.array_equal(g["rounds"], rounds)), None)
    if found is None:
        found = {"ranks": [], "rounds": rounds, "dests": [], "sizes": []}
        alike.append(found)
    return found


def _group(found: dict) -> Group:
    """One group's stacked arrays, the bytes as compact as they allow; the lists it was built from emptied."""
    ranks, rounds = np.array(found["ranks"], np.int64), found["rounds"]
    dests = np.stack(found["dests"])
    found["dests"].clear()
    sizes = found["sizes"]
    first = sizes[0]
    if all(s is first for s in sizes):
        nbytes: np.ndarray | int = int(first[0]) if len(first) and (first == first[0]).all() else first
    else:
        nbytes = np.stack(sizes).astype(np.int32 if max(int(s.max(initial=0)) for s in sizes) < 2**31 else np.int64)
    sizes.clear()
    return Group(ranks, rounds, dests, nbytes)
