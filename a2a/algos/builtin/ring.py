"""Ring all-to-all: p-1 steps, each rank forwarding to its right neighbour every block not yet home.

Only neighbour links carry traffic, so on a ring (or along a torus line) no message crosses a
link it does not need and no two messages share one; the price is bytes: a block that
travels d hops is sent d times, p(p-1)/2 blocks per rank in all where a direct exchange sends
p-1. At step s (1 .. p-1) rank r sends to r+1 the p-s blocks that came from r-s+1 and go to
r+1 .. r+p-s, and receives from r-1 the p-s blocks of r-s, for r .. r+p-s-1: the first is
home, the others travel on. Each step is one Sendrecv whose datatypes read and write the
blocks where they lie (a2a.algos.schedule), so nothing is packed.

Cost: p-1 latencies in series, and the bytes one rank sends, (p-1) + (p-2) + ... + 1 blocks:
  T = (p-1) alpha + p(p-1)/2 m beta
No MPI library has it (no twin).
"""
from functools import partial

import numpy as np

from a2a.algos.cost import Formula, Placement
from a2a.algos.registry import register
from a2a.algos.schedule import Rounds, Step, pairs, zero_copy_plan


def steps(p: int, r: int) -> Rounds:
    """Rank r's rounds: to r+1 the p-s blocks that came from r-s+1, from r-1 the p-s blocks of r-s."""
    counts = p - np.arange(1, p)
    return Rounds(np.full(p - 1, (r + 1) % p), np.full(p - 1, (r - 1) % p), counts, counts, partial(named_steps, p, r))


def named_steps(p: int, r: int) -> list[Step]:
    """Rank r's steps: blocks named (source, destination), sent right, received from the left."""
    ahead = (r + np.arange(p)) % p  # the destinations r, r+1, ..., r+p-1
    return [Step((r + 1) % p, pairs((r - s + 1) % p, ahead[1:p - s + 1]),
                 (r - 1) % p, pairs((r - s) % p, ahead[:p - s])) for s in range(1, p)]


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """(p-1) alpha + p(p-1)/2 m beta."""
    p = s.nprocs
    return {"alpha": p - 1, "beta": p * (p - 1) / 2 * m}


@register("ring", mirrors="store-and-forward ring all-to-all (neighbour links only; no MPI library twin)",
          cost=Formula("(p-1) alpha + p(p-1)/2 m beta", ("alpha", "beta"), terms), steps=steps,
          simplicity=19)
def ring(comm, sendbuf, recvbuf):
    """p-1 steps to the right neighbour, each forwarding every block not yet home (zero-copy datatypes)."""
    return zero_copy_plan(comm, sendbuf, recvbuf, named_steps(comm.size, comm.rank))
