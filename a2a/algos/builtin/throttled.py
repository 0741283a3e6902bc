"""Linear exchange in batches of `window` peers, each ended by Waitall (MPICH scattered).

Cost: batches of w peers posted at once. The latencies within a batch overlap (alpha per
batch); the start-up of each message posted does not (alpha_msg, the CPU cost of posting and
matching it); the bytes leave one after another through the rank's link.
  T = ceil((p-1)/w) alpha + (p-1) (alpha_msg + m beta)
alpha_msg = 0 is the full-overlap bound, alpha = 0 its no-overlap bound (p-1)(alpha + m beta).
At one process count the two alphas cannot be told apart; alpha_msg keeps their sum, so
predictions for more processes take the pessimistic bound.

Twins: MPICH's scattered (its throttle is the window; 0 for all peers at once). Open MPI's
linear_sync is a sliding window, not batches, so only a single batch (window >= p-1) has an
Open MPI twin: basic linear.
"""
import math

import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.cost import DIRECT, Formula, Placement, option
from a2a.algos.registry import Twin, register
from a2a.algos.schedule import Batches, batch_plan

LIMITS = {"window": (lambda w: w >= 1, "an integer >= 1 (peers per batch)")}


def batch_terms(s: Placement, m: float, window: int) -> dict[str, float]:
    """ceil((p-1)/w) alpha + (p-1) (alpha_msg + m beta)."""
    p = s.nprocs
    return {"alpha": math.ceil((p - 1) / max(window, 1)), "alpha_msg": p - 1, "beta": (p - 1) * m}


def steps(p: int, r: int, window: int) -> Batches:
    """After its own block: batches of `window` shifts, 1..w, then w+1..2w, ... up to p-1; in each, receive
    from r - shift and send to r + shift (mod p)."""
    shifts = np.arange(1, p)
    return Batches.even((r - shifts) % p, (r + shifts) % p, window)


def one_batch(options: dict, p: int) -> bool:
    """Whether every peer goes in the first batch (the window covers p-1)."""
    return option(options, "window") >= p - 1


def scattered(options: dict, p: int) -> tuple:
    """MPICH's scattered with this window as its throttle (0: all at once)."""
    return ("scattered", 0 if one_batch(options, p) else option(options, "window"))


TWINS: dict[str, Twin] = {"Open MPI": lambda o, p: ("linear", 0) if one_batch(o, p) else None, "MPICH": scattered}
COST = Formula("ceil((p-1)/w) alpha + (p-1) (alpha_msg + m beta)", ("alpha_msg", "beta", "alpha"),
               lambda s, m, options: batch_terms(s, m, option(options, "window")))


@register("throttled", mirrors="MPICH scattered (MPIR_CVAR_ALLTOALL_THROTTLE); not Open MPI's linear_sync",
          limits=LIMITS, cost=COST, steps=steps, simplicity=4,
          twins={**TWINS, "MPICH Ialltoall": lambda o, p: ("sched_permuted_sendrecv", 0) if one_batch(o, p) else None})
def throttled(comm, sendbuf, recvbuf, *, window: int = 8):
    """Exchange with `window` peers at a time (Irecv/Isend, Waitall), in pairwise order."""
    return batches(comm, blocks(sendbuf, comm.size), blocks(recvbuf, comm.size), window)


@register("throttled", collective="alltoallv", limits=LIMITS,
          mirrors="MPICH alltoallv scattered (MPIR_CVAR_ALLTOALL_THROTTLE)", cost=DIRECT, twins=TWINS)
def throttled_v(comm, send, recv, *, window: int = 8):
    """The same batches of `window` peers with per-peer counts."""
    return batches(comm, send.blocks(), recv.blocks(), window)


def batches(comm, send, recv, window: int):
    """The schedule on per-peer byte blocks (rows of one array, or views of uneven length)."""
    return batch_plan(comm, send, recv, steps(comm.size, comm.rank, window))
