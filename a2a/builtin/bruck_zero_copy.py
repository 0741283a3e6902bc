"""Bruck's all-to-all without copies: derived datatypes replace the rotations and the per-round packing."""
from __future__ import annotations

from ..registry import register
from .zero_copy import Round, zero_copy_plan


def rounds(p: int, rank: int, radix: int) -> list[Round]:
    """Bruck's rounds for `rank`: round (d, v) moves every block whose distance i has base-radix digit d = v.

    A block travelling i ranks forward (from s to s + i) has covered the digits below d before
    round (d, v), so the one sent from `rank` came from rank - (i mod radix^d); the one received
    has then covered i mod radix^(d+1). No rotation: blocks are named by source and destination.
    """
    mine = []
    span = 1
    while span < p:
        for digit in range(1, radix):
            moved = [i for i in range(p) if (i // span) % radix == digit]
            if not moved:
                continue
            sent = [((rank - i % span) % p, (rank - i % span + i) % p) for i in moved]
            covered = [i % (span * radix) for i in moved]
            received = [((rank - c) % p, (rank - c + i) % p) for c, i in zip(covered, moved)]
            mine.append(Round((rank + digit * span) % p, sent, (rank - digit * span) % p, received))
        span *= radix
    return mine


@register("bruck_zero_copy", mirrors="Bruck with MPI datatypes and double buffering instead of rotations and "
          "packing; the messages of MPICH brucks (radix 2) / k_brucks (radix k); source: Traff, Rougier, Hunold, "
          "Implementing a classic: zero-copy all-to-all communication with MPI datatypes (ICS 2014)",
          limits={"radix": (lambda k: k >= 2, "an integer >= 2")})
def bruck_zero_copy(comm, sendbuf, recvbuf, *, radix: int = 2):
    """Bruck's rounds (any p, base `radix`); each block is sent from and received into where it lies."""
    return zero_copy_plan(comm, sendbuf, recvbuf, rounds(comm.size, comm.rank, radix))
