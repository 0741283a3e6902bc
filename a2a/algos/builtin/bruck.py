"""Bruck's logarithmic all-to-all for any p and radix (Open MPI modified_bruck, MPICH brucks/k_brucks).

Cost at radix k: R rounds (about (k-1) log_k p), B blocks of m bytes sent in all (about
p/k (k-1) log_k p; at k=2: ceil(lg p) rounds of p/2 blocks). Locally it rotates the buffer
(p m), gathers and scatters the moved blocks around each round (2 B m) and unrotates (p m).
  T = R alpha + B m beta + (2p + 2B) m gamma
"""
import functools

import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.cost import Formula, Placement, Round, option
from a2a.algos.prebuilt import copier, spec
from a2a.algos.registry import Twin, register
from a2a.algos.schedule import Copied, Phase, Phases, Rounds

RADIX = {"radix": (lambda k: k >= 2, "an integer >= 2")}  # the limit of every Bruck variant's radix


def bruck_rounds(p: int, radix: int) -> list[tuple[int, int, np.ndarray]]:
    """(distance, digit, indices moved) per round of Bruck's schedule, rounds that move nothing left out.

    Index i holds the block travelling i ranks forward; round (distance, digit) forwards, by
    digit x distance ranks, every index whose base-radix digit at `distance` is `digit`.
    """
    indices, rounds, distance = np.arange(1, p), [], 1
    while distance < p:
        digits = indices // distance % radix
        for digit in range(1, radix):
            moved = indices[digits == digit]
            if len(moved):
                rounds.append((distance, digit, moved))
        distance *= radix
    return rounds


def offsets(p: int, radix: int) -> list[tuple[int, int]]:
    """Bruck's rounds as (offset, blocks): round (d, v) sends the blocks whose digit d is v to r + v k^d."""
    return [(offset, sent) for offset, sent, _ in _round_sizes(p, radix)]


def schedule_size(p: int, radix: int) -> tuple[int, int]:
    """Rounds and blocks sent in all."""
    done = offsets(p, radix)
    return len(done), sum(count for _, count in done)


@functools.lru_cache(maxsize=4)  # the same on every rank: a schedule read at p ranks asks p times
def _round_sizes(p: int, radix: int) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
    """(offset, blocks sent, blocks of each unpacking copy) per round of bruck_rounds."""
    return tuple((digit * distance, len(moved), _unpacked_blocks(p, distance, digit, radix))
                 for distance, digit, moved in bruck_rounds(p, radix))


def phases(p: int, r: int, radix: int) -> Phases:
    """What the factory runs on rank r, as data: the rotation's copies, each round's Sendrecv and the copies that
    put its blocks in place, the unrotation's copies."""
    found: list[Phase] = list(_copies(p - r, r))
    for offset, sent, unpacked in _round_sizes(p, radix):
        found += [Rounds(np.array([(r + offset) % p]), np.array([(r - offset) % p]), np.array([sent]),
                         np.array([sent])), *_copies(*unpacked)]
    return Phases((*found, *_copies(r + 1, p - r - 1)))


def _copies(*blocks: int) -> list[Copied]:
    return [Copied(n) for n in blocks if n]


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """R alpha + B m beta + (2p + 2B) m gamma."""
    rounds, sent = schedule_size(s.nprocs, option(options, "radix"))
    return {"alpha": rounds, "beta": sent * m, "gamma": (2 * s.nprocs + 2 * sent) * m}


def traffic(p: int, m: float, options: dict) -> list[Round]:
    """Every rank r sends `blocks` x m bytes to r + offset, one round per Bruck step."""
    return [[(r, (r + offset) % p, count * m) for r in range(p)]
            for offset, count in offsets(p, option(options, "radix"))]


# the same messages as ours, with or without our copies (bruck_zero_copy has these twins too)
TWINS: dict[str, Twin] = {
    "Open MPI": lambda o, p: ("modified_bruck", 0) if option(o, "radix") == 2 else None,  # radix 2 only
    "MPICH": lambda o, p: ("brucks",) if option(o, "radix") == 2 else ("k_brucks", option(o, "radix")),
    "Intel MPI": lambda o, p: "bruck" if option(o, "radix") == 2 else None,
    "MPICH Ialltoall": lambda o, p: ("sched_brucks",) if option(o, "radix") == 2 else None}
COST = Formula("R alpha + B m beta + (2p + 2B) m gamma  (R rounds, B blocks sent)", ("alpha", "beta", "gamma"), terms)


@register("bruck", mirrors="Open MPI modified_bruck (3) at radix 2; MPICH brucks, k_brucks (radix k)",
          limits=RADIX, cost=COST, traffic=traffic, steps=phases, twins=TWINS, simplicity=3)
def bruck(comm, sendbuf, recvbuf, *, radix: int = 2):
    """Rotate, then per base-`radix` digit send the blocks with that digit to r + digit*k^d; unrotate."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    work = np.empty_like(send)  # work[i] holds the block that must travel i ranks forward
    copies = [(work[: p - r], send[r:]), (work[p - r:], send[:r]),  # work[i] = send[(r + i) % p]
              (recv[: r + 1], work[r::-1]), (recv[r + 1:], work[: r: -1])]  # recv[j] = work[(r - j) % p]
    rotate_in, rotate_out = _nonempty(copies[:2]), _nonempty(copies[2:])
    block = MPI.BYTE.Create_contiguous(send.shape[1]).Commit()
    rounds = []
    for distance, digit, moved in bruck_rounds(p, radix):
        # MPI gathers the outgoing blocks through a datatype, as MPICH's brucks does
        layout = block.Create_indexed_block(1, moved.tolist()).Commit()
        incoming = np.empty((len(moved), send.shape[1]), np.uint8)
        rounds.append(((MPI.buffer(work), 1, layout), (r + digit * distance) % p, spec(incoming),
                       (r - digit * distance) % p,
                       [copier(*pair) for pair in _unpack(work, incoming, distance, digit, radix)]))
    sendrecv = comm.Sendrecv
    rotate_in, rotate_out = [copier(*pair) for pair in rotate_in], [copier(*pair) for pair in rotate_out]

    def run():
        for copy in rotate_in:
            copy()
        for outgoing, dst, incoming, src, unpack in rounds:
            sendrecv(outgoing, dst, 0, incoming, src, 0)
            for copy in unpack:
                copy()
        for copy in rotate_out:
            copy()

    def free():
        for outgoing, *_ in rounds:
            outgoing[2].Free()
        block.Free()

    return run, free


def _unpack(work: np.ndarray, incoming: np.ndarray, distance: int, digit: int, radix: int) -> list:
    """(view of work, view of incoming) pairs that put received blocks back in place.

    The blocks with `digit` at `distance` form runs of `distance` rows every radix*distance
    rows: one strided view covers all whole periods, one slice the partial last period.
    """
    p, width = work.shape
    whole, start, _ = _unpack_runs(p, distance, digit, radix)
    pairs = [(work[: whole * radix * distance].reshape(whole, radix, distance, width)[:, digit],
              incoming[: whole * distance].reshape(whole, distance, width)),
             (work[start: start + distance], incoming[whole * distance:])]
    return _nonempty(pairs)


def _unpack_runs(p: int, distance: int, digit: int, radix: int) -> tuple[int, int, int]:
    """Where a round's blocks go back: the digit's run of `distance` rows in each of `whole` periods of radix x
    distance rows, then `rows` rows from `start` in the last, partial period."""
    whole = p // (radix * distance)
    start = whole * radix * distance + digit * distance
    return whole, start, max(0, min(distance, p - start))


def _unpacked_blocks(p: int, distance: int, digit: int, radix: int) -> tuple[int, ...]:
    """The blocks each of a round's unpacking copies moves (_unpack's pairs)."""
    whole, _, rows = _unpack_runs(p, distance, digit, radix)
    return tuple(n for n in (whole * distance, rows) if n)


def _nonempty(pairs: list) -> list:
    return [(into, source) for into, source in pairs if into.shape[0]]
