"""SMPI time-independent traces of a captured schedule: one file per rank, and what their replay holds.

The replay knows collectives only on MPI_COMM_WORLD, so collectives on sub-communicators are
lowered here to linear point-to-point exchanges (isend/irecv to every member, then a wait), and
messages to oneself to local copies (`compute` events at the copy bandwidth). A whole-job
MPI_Alltoall or MPI_Alltoallv is left to SMPI's own algorithms, after the copy of the rank's own
block: SMPI's replay copies it for nothing, where every library (and every schedule of ours) pays.
"""
from __future__ import annotations

import hashlib
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from a2a.errors import CaptureError
from a2a.schedules.events import (
    Burst,
    Collective,
    Copy,
    Event,
    Irecv,
    Isend,
    Messages,
    Posts,
    Recv,
    Schedule,
    Send,
    Sendrecvs,
    Wait,
    WholeAlltoallv,
)
from a2a.simulate.platforms import HOST_SPEED, TIME_SCALE


def trace_lines(events: list[Event], rank: int, nprocs: int, copy_bandwidth: float,
                exact: bool = False) -> Iterator[str]:
    """One rank's events as SMPI time-independent trace lines (bytes as MPI_BYTE counts); `exact` leaves compute
    amounts unrounded, for a replayer that scales them."""
    sent: Counter = Counter()  # messages to each peer so far: the tag pairs them with the receives
    received: Counter = Counter()
    pending: dict[Any, tuple[int, int, int]] = {}
    posts: list[tuple[str, int, str]] = []  # non-blocking posts since the last line that takes time
    copy = 0

    def flush() -> Iterator[str]:
        nonlocal copy
        # The posts start at one simulated instant, so their order changes no time. Receives
        # first and each kind by peer is the order in which SMPI finds every match at the head
        # of a mailbox; in a rotated order (r+1, r+2, ...) it scans, O(p^3) for linear.
        posts.sort(key=lambda post: post[:2])
        yield from (line for *_, line in posts)
        posts.clear()
        if copy:
            flops = copy / copy_bandwidth * HOST_SPEED * TIME_SCALE
            yield f"{rank} compute {flops!r}" if exact else f"{rank} compute {flops:.0f}"
            copy = 0

    yield f"{rank} init"
    for e in _lowered(events, rank, nprocs):
        if isinstance(e, Copy):
            copy += e.nbytes
            continue
        if not isinstance(e, (Isend, Irecv)) or copy:
            yield from flush()
        if isinstance(e, Burst):
            yield from _burst_lines(e, rank, sent, received)
        elif isinstance(e, Sendrecvs):
            yield from _sendrecv_lines(e, rank, sent, received)
        elif isinstance(e, (Isend, Irecv, Send, Recv)):
            outgoing = isinstance(e, (Isend, Send))
            counter = sent if outgoing else received
            tag = counter[e.peer]
            counter[e.peer] += 1
            line = f"{rank} {e.kind} {e.peer} {tag} {_count(e.nbytes)}"
            if isinstance(e, (Isend, Irecv)):
                posts.append((e.kind, e.peer, line))
                pending[e.request] = (rank, e.peer, tag) if outgoing else (e.peer, rank, tag)
            else:
                yield line
        elif isinstance(e, Wait):  # one wait per request: SMPI 3.32's waitall is a waitany per request, O(n^2)
            yield from (f"{rank} wait {src} {dst} {tag}" for src, dst, tag in
                        (pending.pop(i) for i in e.requests if i in pending))
        elif isinstance(e, WholeAlltoall):  # SMPI's algorithms send up to p/2 blocks in one message
            doubles = e.nbytes * nprocs >= INT_LIMIT and e.nbytes % 8 == 0
            count = f"{e.nbytes // 8} " * 2 + "0 0" if doubles else f"{e.nbytes} {e.nbytes}"
            yield f"{rank} alltoall {count}"
        elif isinstance(e, WholeAlltoallv):
            yield _alltoallv_line(e, rank)
    yield from flush()
    yield f"{rank} finalize"


def _burst_lines(e: Burst, rank: int, sent: Counter, received: Counter) -> list[str]:
    """A Burst's lines as its expanded events give them, without an event per message: per batch its receives,
    then its sends, each kind by peer (as flush orders posts), then a wait for each in request order."""
    count, lines = _count(e.nbytes), []
    for sources, dests in e.batches():
        heard, told = [received[q] for q in sources], [sent[q] for q in dests]  # each peer once per kind (Batch)
        for q, tag in zip(sources, heard):
            received[q] = tag + 1
        for q, tag in zip(dests, told):
            sent[q] = tag + 1
        lines += ([f"{rank} irecv {q} {tag} {count}" for q, tag in sorted(zip(sources, heard))]
                  + [f"{rank} isend {q} {tag} {count}" for q, tag in sorted(zip(dests, told))]
                  + [f"{rank} wait {q} {rank} {tag}" for q, tag in zip(sources, heard)]
                  + [f"{rank} wait {rank} {q} {tag}" for q, tag in zip(dests, told)])
    return lines


def _sendrecv_lines(e: Sendrecvs, rank: int, sent: Counter, received: Counter) -> list[str]:
    """Sendrecvs' lines as its expanded events give them: per Sendrecv its receive and its send (as flush orders
    posts), then a wait for each in request order."""
    lines = []
    for d, outgoing, q, incoming in e.rounds():
        told, heard = sent[d], received[q]
        sent[d], received[q] = told + 1, heard + 1
        lines += [f"{rank} irecv {q} {heard} {_count(incoming)}", f"{rank} isend {d} {told} {_count(outgoing)}",
                  f"{rank} wait {rank} {d} {told}", f"{rank} wait {q} {rank} {heard}"]
    return lines


@dataclass(slots=True)
class WholeAlltoall:
    """A lowered event: an MPI_Alltoall of the whole job, `nbytes` per peer, left to SMPI's own algorithms."""

    nbytes: int


INT_LIMIT = 1 << 31  # SMPI passes a trace's counts to its MPI calls as int


def _alltoallv_line(e: WholeAlltoallv, rank: int) -> str:
    """SMPI's alltoallv action: the send buffer's size, the send counts, the receive buffer's size, the receive
    counts (its displacements are all 0); in MPI_BYTEs, or MPI_DOUBLEs (datatype 0) where a buffer reaches 2 GiB."""
    counts = [*e.sends, *e.recvs]
    if max(sum(e.sends), sum(e.recvs)) < INT_LIMIT:
        width, types = 1, ""
    elif all(c % 8 == 0 for c in counts) and max(sum(e.sends), sum(e.recvs)) // 8 < INT_LIMIT:
        width, types = 8, " 0 0"
    else:
        raise CaptureError(f"an alltoallv buffer of {max(sum(e.sends), sum(e.recvs))} bytes: SMPI's counts are int, "
                           "and its blocks are no whole counts of 8-byte items below 2^31")
    sends, recvs = (" ".join(str(c // width) for c in side) for side in (e.sends, e.recvs))
    return f"{rank} alltoallv {sum(e.sends) // width} {sends} {sum(e.recvs) // width} {recvs}{types}"


def _count(nbytes: int) -> str:
    """A message's size as a trace count: MPI_BYTEs, or from 2 GiB on MPI_DOUBLEs (datatype 0 in SMPI's traces)."""
    if nbytes < INT_LIMIT:
        return str(nbytes)
    if nbytes % 8 or nbytes // 8 >= INT_LIMIT:
        raise CaptureError(f"a message of {nbytes} bytes: SMPI's counts are int, and it is no whole count of "
                           "8-byte items below 2^31")
    return f"{nbytes // 8} 0"


def _lowered(events: list[Event], rank: int, nprocs: int) -> Iterator[Event | WholeAlltoall]:
    """Self messages become copies; sub-communicator collectives become linear point-to-point."""
    selfish: set[Any] = set()
    fresh = iter(range(-1, -(1 << 62), -1))  # request ids of our own, below the capture's
    for e in events:
        if isinstance(e, (Isend, Irecv, Send, Recv)) and e.peer == rank:
            if isinstance(e, (Isend, Send)):
                yield Copy(e.nbytes)
            if isinstance(e, (Isend, Irecv)):
                selfish.add(e.request)
        elif isinstance(e, Wait):
            yield Wait(tuple(i for i in e.requests if i not in selfish))
        elif isinstance(e, Posts) or (isinstance(e, Messages) and ((e.sources == rank).any()
                                                                 or (e.dests == rank).any())):
            yield from _lowered(e.expanded(), rank, nprocs)
        elif isinstance(e, Collective):
            yield from _collective(e, rank, nprocs, fresh)
        else:
            yield e


def _collective(e: Collective, rank: int, nprocs: int, fresh: Iterator[int]) -> Iterator[Event | WholeAlltoall]:
    members, sends, recvs = e.members, e.sends, e.recvs
    if e.name == "alltoall" and members == tuple(range(nprocs)) and len(set(sends)) == 1:
        yield Copy(sends[rank])  # the own block, which SMPI's replay copies for nothing (as our schedules do not)
        yield WholeAlltoall(sends[0])  # the whole job: SMPI's own MPI_Alltoall
        return
    me = members.index(rank)
    if e.name == "barrier":  # everyone tells member 0, member 0 releases everyone
        sends = tuple(1 if (me != 0 and i == 0) or (me == 0 and i != 0) else 0 for i in range(len(members)))
        recvs = sends
    ids = []
    for i, peer in enumerate(members):
        if i != me and recvs[i]:
            ids.append(next(fresh))
            yield Irecv(peer, recvs[i], ids[-1])
    for i, peer in enumerate(members):
        if i != me and sends[i]:
            ids.append(next(fresh))
            yield Isend(peer, sends[i], ids[-1])
    if sends[me]:
        yield Copy(sends[me])
    if ids:
        yield Wait(tuple(ids))


@dataclass(frozen=True)
class Traces:
    """A schedule's traces on disk: the list of them, their ranks, whether a line is SMPI's own MPI_Alltoall or
    MPI_Alltoallv (which only smpirun replays), the SHA-256 of every rank's trace, their lines, and the most
    requests each rank has posted and not yet waited for, summed over the ranks. `scratch`: their temporary
    directory, removed once no one holds them."""

    listing: Path
    nprocs: int
    collective: bool
    digest: str
    lines: int = 0
    pending: int = 0
    scratch: Any = None

    def memory(self) -> int:
        """The bytes a replay of them holds at most, about: each request in flight and each line read.

        Measured with the S4U replayer (linear on a fat tree, 256 to 1,024 ranks, docs/simulation-replay.md); smpirun
        holds about as much. SMPI's own MPI_Alltoall is taken to post every message at once, as a send and a
        receive (its basic_linear, which SMPI's Open MPI selection runs at 1,024 ranks and 1 KiB, posts 2(p-1) a rank).
        """
        pending = 2 * self.nprocs * (self.nprocs - 1) if self.collective else self.pending
        return REPLAY_BASE_BYTES + REPLAY_REQUEST_BYTES * pending + REPLAY_LINE_BYTES * self.lines


REPLAY_BASE_BYTES, REPLAY_REQUEST_BYTES, REPLAY_LINE_BYTES = 32 << 20, 1300, 24
POSTS_AND_WAITS = re.compile(r"^\d+ (i(?=send|recv)|w(?=ait))", re.MULTILINE)  # an i per post, a w per wait


def most_pending(text: str) -> int:
    """The most requests one rank's trace lines have posted (isend, irecv) and not yet waited for."""
    posted = np.frombuffer("".join(POSTS_AND_WAITS.findall(text)).encode(), np.uint8) == ord("i")
    return int(np.cumsum(np.where(posted, 1, -1)).max(initial=0))


STARTED = ("init", "isend", "irecv", "compute")  # what a start() does before the exchange first waits


def with_compute(lines: Iterator[str], rank: int, seconds: float) -> Iterator[str]:
    """A rank's trace lines with `seconds` of computation where its exchange, started, first waits (as the overlap
    protocol computes between start and wait; a blocking line, SMPI's own MPI_Alltoall say, comes after it)."""
    computed = False
    for line in lines:
        if not computed and line.split(" ", 2)[1] not in STARTED:
            yield f"{rank} compute {seconds * HOST_SPEED * TIME_SCALE:.0f}"
            computed = True
        yield line


def write_traces(schedule: Schedule, directory: Path, copy_bandwidth: float, exact: bool = False,
                 scratch: Any = None, compute: float = 0.0) -> Traces:
    """One trace file per rank in `directory`, and the list of them (`exact`: see trace_lines; `compute`: seconds
    of computation between the exchange's start and its first wait, on every rank)."""
    directory.mkdir(parents=True, exist_ok=True)
    listing, collective, digest, lines, pending = directory / "traces.txt", False, hashlib.sha256(), 0, 0
    with open(listing, "w") as names:
        for rank, events in enumerate(schedule.events):
            path = directory / f"rank{rank}.txt"
            found = trace_lines(events, rank, schedule.nprocs, copy_bandwidth, exact)
            text = "\n".join(with_compute(found, rank, compute) if compute else found) + "\n"
            collective = collective or f"{rank} alltoall " in text or f"{rank} alltoallv " in text
            lines, pending = lines + text.count("\n"), pending + most_pending(text)
            path.write_text(text)
            digest.update(text.encode())
            names.write(f"{path}\n")
    return Traces(listing, schedule.nprocs, collective, digest.hexdigest(), lines, pending, scratch)


def unit_traces(schedule: Schedule, copy_bandwidth: float) -> Traces:
    """The traces of `schedule` in a temporary directory, compute amounts unrounded: the S4U replayer scales them
    to every size (--scale), so they are written once for all sizes."""
    scratch = tempfile.TemporaryDirectory(prefix="a2a-traces-")
    return write_traces(schedule, Path(scratch.name), copy_bandwidth, exact=True, scratch=scratch)
