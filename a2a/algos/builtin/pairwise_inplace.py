"""Pairwise exchange in place with Sendrecv_replace (MPICH pairwise_sendrecv_replace).

Cost: copy the whole send buffer, then p-1 Sendrecv_replace rounds (even p; odd p has p rounds
with one idle).   T = R alpha + (p-1) m beta + p m gamma
It has no twin a tuning file could name: MPICH's asserts an in-place call, which the table
does not measure.
"""
import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.cost import Formula, Placement
from a2a.algos.prebuilt import copier, spec
from a2a.algos.registry import register
from a2a.algos.schedule import Exchanges


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """R alpha + (p-1) m beta + p m gamma."""
    p = s.nprocs
    return {"alpha": p - 1 if p % 2 == 0 else p, "beta": (p - 1) * m, "gamma": p * m}


def one_factor(p: int, r: int) -> np.ndarray:
    """Rank r's partner in each round of a round-robin tournament of p ranks (-1: idle)."""
    if p % 2:
        q = (np.arange(p) - r) % p
        return np.where(q == r, -1, q)
    n = p - 1
    if r == n:
        return np.arange(n) * ((n + 1) // 2) % n  # (n+1)/2 inverts 2 modulo odd n
    q = (np.arange(n) - r) % n
    return np.where(q == r, n, q)


def steps(p: int, r: int) -> Exchanges:
    """After copying the whole send buffer: one block each way with each round's partner, idle rounds left out."""
    partners = one_factor(p, r)
    partners = partners[partners >= 0]
    return Exchanges(r, partners, partners, copied=p)


@register("pairwise_inplace", mirrors="MPICH pairwise_sendrecv_replace (its in-place alltoall)",
          cost=Formula("R alpha + (p-1) m beta + p m gamma  (R = p-1, or p if p odd)", ("alpha", "beta", "gamma"),
                       terms),
          steps=steps, simplicity=5)
def pairwise_inplace(comm, sendbuf, recvbuf):
    """Copy sendbuf to recvbuf, then swap blocks with one partner per round via Sendrecv_replace."""
    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    swaps = [(spec(recv[q]), q) for q in steps(p, r).dests.tolist()]
    replace, copy = comm.Sendrecv_replace, copier(recv, send)

    def run():
        copy()
        for block, q in swaps:
            replace(block, q, 0, q, 0)

    return run
