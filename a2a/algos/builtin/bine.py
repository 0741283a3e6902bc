"""Bine butterfly all-to-all (De Sensi et al., SC'25): log2 p steps, partners at negabinary distances.

Cost: at a power of two, lg p Sendrecv steps of p/2 blocks each (the datatypes' gathering and
scattering of those blocks is proportional to the same bytes, so it folds into beta); at any
other p it runs pairwise.   T = lg p (alpha + (p/2) m beta), else (p-1) (alpha + m beta)
Open MPI 5 has no Bine alltoall (`ompi_info --all` lists ignore, linear, pairwise,
modified_bruck, linear_sync, two_proc), so it has no twin.
"""
from __future__ import annotations

import functools

import numpy as np

from a2a.algos.builtin.pairwise import pairwise
from a2a.algos.builtin.pairwise import steps as pairwise_steps
from a2a.algos.builtin.pairwise import terms as pairwise_terms
from a2a.algos.cost import Formula, Placement
from a2a.algos.plan import Prepared
from a2a.algos.registry import register
from a2a.algos.schedule import Exchanges, Rounds, Step, pairs, zero_copy_plan

MASK = 0xAAAAAAAA  # negabinary <-> binary through the alternating-bit mask (32-bit words)


def to_negabinary(x: int) -> int:
    """The base -2 digits of x, as the bits of a non-negative int (x >= -0x55555555 * 2)."""
    return ((MASK + x) ^ MASK) & 0xFFFFFFFF


def from_negabinary(bits: int) -> int:
    """The integer whose base -2 digits are `bits`."""
    return (MASK ^ bits) - MASK


def distance(step: int) -> int:
    """rho_s: the step's signed partner distance, 1, -1, 3, -5, 11, ... (negabinary 1, 11, 111, ...)."""
    return from_negabinary((1 << (step + 1)) - 1)


def partner(rank: int, step: int, p: int) -> int:
    """Even ranks add rho_s, odd ranks subtract it (mod p)."""
    return (rank + distance(step) if rank % 2 == 0 else rank - distance(step)) % p


def _negabinary_range(bits: int) -> tuple[int, int]:
    """Smallest and largest integer that `bits` negabinary digits can write."""
    return (-sum(2 << (2 * i) for i in range(bits) if 2 * i + 1 < bits),
            sum(1 << (2 * i) for i in range(bits) if 2 * i < bits))


def remap_rank(p: int, rank: int) -> int:
    """The rank's position among the Bine tree's leaves (Open MPI's ompi_coll_bine_remap_rank)."""
    if p == 1:
        return 0
    bits = (p - 1).bit_length()
    low, high = _negabinary_range(bits)
    candidates = (rank, rank - p) if rank % 2 else (-rank, p - rank)
    found = [to_negabinary(x) for x in candidates if low <= x <= high]
    nb = found[0] if len(found) == 1 or found[0] >> (bits - 1) & 1 else found[1]
    gray = nb ^ (nb >> 1)
    return int(f"{gray:0{bits}b}"[::-1], 2)  # the low `bits` bits reversed


def rounds(p: int, rank: int) -> list[Step]:
    """Every step's blocks for `rank`, p a power of two: each rank keeps the half whose destinations
    lie in its own subtree and sends the partner's half (Open MPI's block ranges)."""
    mine = []
    for peer, source, dest in moves(p):
        q = int(peer[rank])
        mine.append(Step(q, pairs(source[rank], dest[rank]), q, pairs(source[q], dest[q])))
    return mine


def steps(p: int, rank: int) -> Rounds | Exchanges:
    """What the factory runs: the rounds at a power of two, half of the blocks each (named only for the real run:
    a simulation reads their number), else pairwise's steps."""
    if p & (p - 1):
        return pairwise_steps(p, rank, "shift")
    peers = np.array([partner(rank, step, p) for step in range(p.bit_length() - 1)], np.int64)
    half = np.full(len(peers), p // 2)
    return Rounds(peers, peers, half, half, named=functools.partial(rounds, p, rank))


@functools.lru_cache(maxsize=2)  # the same for every rank: one simulation per process count (a capture runs p ranks)
def moves(p: int) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    """Per step, simulated for all ranks: each rank's partner and the (source, destination) of the blocks it sends."""
    steps = p.bit_length() - 1
    kind = np.int32 if p < 1 << 31 else np.int64
    leaf = np.array([remap_rank(p, q) for q in range(p)])
    source = np.repeat(np.arange(p, dtype=kind), p).reshape(p, p)  # [holder, slot]: each block's source rank ...
    dest = np.tile(np.arange(p, dtype=kind), (p, 1))                # ... and destination rank
    span, first = p >> 1, ~((p >> 1) - 1)
    out = []
    for step in range(steps):
        peer = np.array([partner(q, step, p) for q in range(p)])
        low = leaf[peer] & first
        moving = (leaf[dest] >= low[:, None]) & (leaf[dest] < low[:, None] + span)
        half = p // 2
        sent = source[moving].reshape(p, half), dest[moving].reshape(p, half)
        kept = source[~moving].reshape(p, half), dest[~moving].reshape(p, half)
        out.append((peer, *sent))
        source = np.concatenate([kept[0], sent[0][peer]], axis=1)
        dest = np.concatenate([kept[1], sent[1][peer]], axis=1)
        span, first = span >> 1, first >> 1
    return tuple(out)


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """lg p (alpha + (p/2) m beta) at a power of two, else pairwise's."""
    p = s.nprocs
    if p & (p - 1):
        return pairwise_terms(s, m, options)
    steps = p.bit_length() - 1
    return {"alpha": steps, "beta": steps * p / 2 * m}


@register("bine", mirrors="Open MPI base alltoall_intra_bine (pairwise at non-powers of two); "
          "source: De Sensi et al., Bine Trees, SC'25 (arXiv 2508.17311)",
          cost=Formula("lg p (alpha + p/2 m beta) at powers of two, else pairwise's (p-1) (alpha + m beta)",
                       ("alpha", "beta"), terms),
          steps=steps, simplicity=7)
def bine(comm, sendbuf, recvbuf):
    """log2 p Sendrecv steps with partner r +- rho_s, half of the blocks each; any other p: pairwise."""
    p = comm.size
    if p & (p - 1):
        return Prepared(pairwise(comm, sendbuf, recvbuf),
                        note=f"bine: {p} ranks is not a power of two; ran pairwise, as Open MPI does")
    run, free = zero_copy_plan(comm, sendbuf, recvbuf, list(steps(p, comm.rank)))
    return Prepared(run, free)
