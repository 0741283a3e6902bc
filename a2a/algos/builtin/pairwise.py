"""p-1 Sendrecv steps (Open MPI pairwise, MPICH pairwise).

Cost: p-1 Sendrecv rounds, one message of m bytes each: T = (p-1) (alpha + m beta).
"""
import numpy as np

from a2a.algos.cost import Formula, MatrixCost, Placement, Round, off_diagonal
from a2a.algos.prebuilt import copier, sendrecv_steps, spec
from a2a.algos.registry import blocks, register
from a2a.errors import BadOption

SCHEDULES = ("shift", "xor")
LIMITS = {"schedule": (lambda s: s in SCHEDULES, "shift, or xor when p is a power of two")}


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """(p-1) (alpha + m beta)."""
    return {"alpha": s.nprocs - 1, "beta": (s.nprocs - 1) * m}


def traffic(p: int, m: float, options: dict) -> list[Round]:
    """Step s: every rank r sends m bytes to its step-s partner (r + s mod p, or r xor s)."""
    steps = [partners(p, r, options["schedule"]) for r in range(p)]
    return [[(r, steps[r][s][0], m) for r in range(p)] for s in range(p - 1)]


def matrix_terms(counts: np.ndarray, itemsize: int, options: dict) -> dict[str, float]:
    """Step s: r -> r+s for every r at once; the step waits for its largest block."""
    p, off = len(counts), off_diagonal(counts, itemsize)
    return {"rounds": float(p - 1), "bytes": float(sum(max(off[r, (r + s) % p] for r in range(p))
                                                       for s in range(1, p)))}


COST = Formula("(p-1) (alpha + m beta)", ("alpha", "beta"), terms)


@register("pairwise", mirrors="Open MPI pairwise (2); MPICH pairwise", limits=LIMITS, cost=COST, traffic=traffic,
          twins={"Open MPI": lambda o, p: ("pairwise", 0), "MPICH": lambda o, p: ("pairwise",),
                 "Intel MPI": lambda o, p: "pairwise"},
          simplicity=2)
def pairwise(comm, sendbuf, recvbuf, *, schedule: str = "shift"):
    """Step s sends to (r+s) mod p and receives from (r-s) mod p, or exchanges with r xor s."""
    return exchange_pairs(comm, blocks(sendbuf, comm.size), blocks(recvbuf, comm.size), schedule)


@register("pairwise", collective="alltoallv", limits=LIMITS,
          mirrors="Open MPI alltoallv pairwise (coll_tuned_alltoallv_algorithm 2)",
          cost=MatrixCost("p-1 rounds; each step's largest block", matrix_terms),
          twins={"Open MPI": lambda o, p: ("pairwise", 0)})
def pairwise_v(comm, send, recv, *, schedule: str = "shift"):
    """The same p-1 Sendrecv steps with per-peer counts."""
    return exchange_pairs(comm, send.blocks(), recv.blocks(), schedule)


def partners(p: int, r: int, schedule: str) -> list[tuple[int, int]]:
    """(destination, source) of rank r at each of the p-1 steps."""
    return [(r ^ s, r ^ s) if schedule == "xor" else ((r + s) % p, (r - s) % p) for s in range(1, p)]


def exchange_pairs(comm, send, recv, schedule: str):
    """The schedule on per-peer byte blocks (rows of one array, or views of uneven length)."""
    p, r = comm.size, comm.rank
    if schedule == "xor" and p & (p - 1):
        raise BadOption(f"pairwise: schedule=xor needs a power-of-two process count, not {p}; use shift")
    steps = [(spec(send[dst]), dst, spec(recv[src]), src) for dst, src in partners(p, r, schedule)]
    return sendrecv_steps(comm, copier(recv[r], send[r]), steps)
