"""Bruck's all-to-all without copies: derived datatypes replace the rotations and the per-round packing.

Cost at radix k: Bruck's R rounds and B blocks, with no rotation and no packing by us: MPI
gathers each round's blocks through a datatype, bytes proportional to B, folded into beta.
  T = R alpha + B m beta
Its messages are MPICH's brucks / k_brucks and Open MPI's modified_bruck: Bruck's twins.
"""
from __future__ import annotations

import functools

import numpy as np

from a2a.algos.builtin.bruck import RADIX, TWINS, bruck_rounds, offsets, schedule_size
from a2a.algos.cost import Formula, Placement, option
from a2a.algos.registry import register
from a2a.algos.schedule import Rounds, Step, pairs, zero_copy_plan


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """R alpha + B m beta."""
    rounds, sent = schedule_size(s.nprocs, option(options, "radix"))
    return {"alpha": rounds, "beta": sent * m}


def rounds(p: int, rank: int, radix: int) -> list[Step]:
    """Bruck's rounds for `rank`: round (d, v) moves every block whose distance i has base-radix digit d = v.

    A block travelling i ranks forward (from s to s + i) has covered the digits below d before
    round (d, v), so the one sent from `rank` came from rank - (i mod radix^d); the one received
    has then covered i mod radix^(d+1). No rotation: blocks are named by source and destination.
    """
    mine = []
    for span, digit, moved in bruck_rounds(p, radix):
        origin, start = rank - moved % span, rank - moved % (span * radix)
        mine.append(Step((rank + digit * span) % p, pairs(origin % p, (origin + moved) % p),
                         (rank - digit * span) % p, pairs(start % p, (start + moved) % p)))
    return mine


def steps(p: int, rank: int, radix: int) -> Rounds:
    """The rounds as peers and block counts, the blocks named only for the real run (a simulation reads their
    number)."""
    shift, sent = np.array(offsets(p, radix), np.int64).reshape(-1, 2).T
    return Rounds((rank + shift) % p, (rank - shift) % p, sent, sent, named=functools.partial(rounds, p, rank, radix))


@register("bruck_zero_copy", mirrors="Bruck with MPI datatypes and double buffering instead of rotations and "
          "packing; the messages of MPICH brucks (radix 2) / k_brucks (radix k); source: Traff, Rougier, Hunold, "
          "Implementing a classic: zero-copy all-to-all communication with MPI datatypes (ICS 2014)",
          limits=RADIX, cost=Formula("R alpha + B m beta  (Bruck's R rounds, B blocks sent; no copies)",
                                     ("alpha", "beta"), terms),
          steps=steps, twins=TWINS, simplicity=8)
def bruck_zero_copy(comm, sendbuf, recvbuf, *, radix: int = 2):
    """Bruck's rounds (any p, base `radix`); each block is sent from and received into where it lies."""
    return zero_copy_plan(comm, sendbuf, recvbuf, list(steps(comm.size, comm.rank, radix)))
