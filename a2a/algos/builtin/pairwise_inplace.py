"""Pairwise exchange in place with Sendrecv_replace (MPICH pairwise_sendrecv_replace).

Cost: copy the whole send buffer, then p-1 Sendrecv_replace rounds (even p; odd p has p rounds
with one idle).   T = R alpha + (p-1) m beta + p m gamma
It has no twin a tuning file could name: MPICH's asserts an in-place call, which the table
does not measure.
"""
from a2a.algos.cost import Formula, Placement
from a2a.algos.prebuilt import copier, spec
from a2a.algos.registry import blocks, register


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """R alpha + (p-1) m beta + p m gamma."""
    p = s.nprocs
    return {"alpha": p - 1 if p % 2 == 0 else p, "beta": (p - 1) * m, "gamma": p * m}


def one_factor(p: int, r: int) -> list[int]:
    """Rank r's partner in each round of a round-robin tournament of p ranks (-1: idle)."""
    if p % 2:
        return [q if (q := (k - r) % p) != r else -1 for k in range(p)]
    n = p - 1
    if r == n:
        return [k * (n + 1) // 2 % n for k in range(n)]  # (n+1)/2 inverts 2 modulo odd n
    return [q if (q := (k - r) % n) != r else n for k in range(n)]


@register("pairwise_inplace", mirrors="MPICH pairwise_sendrecv_replace (its in-place alltoall)",
          cost=Formula("R alpha + (p-1) m beta + p m gamma  (R = p-1, or p if p odd)", ("alpha", "beta", "gamma"),
                       terms),
          simplicity=5)
def pairwise_inplace(comm, sendbuf, recvbuf):
    """Copy sendbuf to recvbuf, then swap blocks with one partner per round via Sendrecv_replace."""
    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    swaps = [(spec(recv[q]), q) for q in one_factor(p, r) if q >= 0]
    replace, copy = comm.Sendrecv_replace, copier(recv, send)

    def run():
        copy()
        for block, q in swaps:
            replace(block, q, 0, q, 0)

    return run
