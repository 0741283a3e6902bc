"""Pairwise exchange in place with Sendrecv_replace (MPICH pairwise_sendrecv_replace)."""
from a2a.algos.prebuilt import copier, spec
from a2a.algos.registry import blocks, register


def one_factor(p: int, r: int) -> list[int]:
    """Rank r's partner in each round of a round-robin tournament of p ranks (-1: idle)."""
    if p % 2:
        return [q if (q := (k - r) % p) != r else -1 for k in range(p)]
    n = p - 1
    if r == n:
        return [k * (n + 1) // 2 % n for k in range(n)]  # (n+1)/2 inverts 2 modulo odd n
    return [q if (q := (k - r) % n) != r else n for k in range(n)]


@register("pairwise_inplace", mirrors="MPICH pairwise_sendrecv_replace (its in-place alltoall)")
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
