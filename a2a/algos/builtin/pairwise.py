"""p-1 Sendrecv steps (Open MPI pairwise, MPICH pairwise).

Cost: p-1 Sendrecv rounds, one message of m bytes each: T = (p-1) (alpha + m beta).
"""
from typing import Literal, overload

import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.cost import Formula, MatrixCost, Placement, off_diagonal
from a2a.algos.prebuilt import copier, sendrecv_steps, spec
from a2a.algos.registry import register
from a2a.algos.schedule import Exchanges
from a2a.errors import BadOption

SCHEDULES = ("shift", "xor")
LIMITS = {"schedule": (lambda s: s in SCHEDULES, "shift, or xor when p is a power of two")}


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """(p-1) (alpha + m beta)."""
    return {"alpha": s.nprocs - 1, "beta": (s.nprocs - 1) * m}


def matrix_terms(counts: np.ndarray, itemsize: int, options: dict) -> dict[str, float]:
    """Step s: r -> r+s for every r at once; the step waits for its largest block."""
    p, off = len(counts), off_diagonal(counts, itemsize)
    return {"rounds": float(p - 1), "bytes": float(sum(max(off[r, (r + s) % p] for r in range(p))
                                                       for s in range(1, p)))}


@overload
def steps(p: int, r: int, schedule: Literal["shift"]) -> Exchanges: ...
@overload
def steps(p: int, r: int, schedule: str) -> Exchanges | None: ...
def steps(p: int, r: int, schedule: str) -> Exchanges | None:
    """What exchange_pairs runs after copying its own block: step s sends to (r+s) mod p and receives from
    (r-s) mod p, or exchanges with r xor s; one block each way (None where xor refuses p)."""
    if schedule == "xor" and p & (p - 1):
        return None
    s = np.arange(1, p)
    return Exchanges(r, r ^ s, r ^ s) if schedule == "xor" else Exchanges(r, (r + s) % p, (r - s) % p)


COST = Formula("(p-1) (alpha + m beta)", ("alpha", "beta"), terms)


@register("pairwise", mirrors="Open MPI pairwise (2); MPICH pairwise", limits=LIMITS, cost=COST, steps=steps,
          twins={"Open MPI": lambda o, p: ("pairwise", 0), "MPICH": lambda o, p: ("pairwise",),
                 "Intel MPI": lambda o, p: "pairwise", "MPICH Ialltoall": lambda o, p: ("sched_pairwise",)},
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


def exchange_pairs(comm, send, recv, schedule: str):
    """The steps on per-peer byte blocks (rows of one array, or views of uneven length)."""
    p, r = comm.size, comm.rank
    mine = steps(p, r, schedule)
    if mine is None:
        raise BadOption(f"pairwise: schedule=xor needs a power-of-two process count, not {p}; use shift")
    specs = [(spec(send[d]), d, spec(recv[q]), q) for d, q in zip(mine.dests.tolist(), mine.sources.tolist())]
    return sendrecv_steps(comm, copier(recv[r], send[r]), specs)
