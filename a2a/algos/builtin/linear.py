"""Post every receive and send at once, then wait for all (Open MPI basic linear).

Cost: throttled's with one batch of all p-1 peers: T = alpha + (p-1) (alpha_msg + m beta).
"""
import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.builtin.throttled import batch_terms
from a2a.algos.cost import DIRECT, Formula
from a2a.algos.registry import Twin, register
from a2a.algos.schedule import Batches, batch_plan

TWINS: dict[str, Twin] = {
    "Open MPI": lambda o, p: ("linear", 0), "MPICH": lambda o, p: ("scattered", 0),
    "Intel MPI": lambda o, p: "isend_irecv", "MPICH Ialltoall": lambda o, p: ("sched_permuted_sendrecv", 0)}
COST = Formula("alpha + (p-1) (alpha_msg + m beta)", ("alpha_msg", "beta", "alpha"),
               lambda s, m, options: batch_terms(s, m, max(s.nprocs - 1, 1)))


def steps(p: int, r: int) -> Batches:
    """After its own block (copied first, as Open MPI's does): one batch from and to r+1, r+2, ... mod p."""
    peers = (r + np.arange(1, p)) % p
    return Batches.even(peers, peers, p - 1)


@register("linear", mirrors="Open MPI basic linear (coll_tuned_alltoall_algorithm 1)", cost=COST, steps=steps,
          twins=TWINS, simplicity=1)
def linear(comm, sendbuf, recvbuf):
    """Copy the own block, post all p-1 receives and sends at once, then Waitall."""
    return spread_out(comm, blocks(sendbuf, comm.size), blocks(recvbuf, comm.size))


@register("linear", collective="alltoallv",
          mirrors="Open MPI alltoallv basic linear (coll_tuned_alltoallv_algorithm 1)", cost=DIRECT,
          twins={"Open MPI": TWINS["Open MPI"], "MPICH": TWINS["MPICH"]})
def linear_v(comm, send, recv):
    """Copy the own block, post all p-1 receives and sends (per-peer counts) at once, then Waitall."""
    return spread_out(comm, send.blocks(), recv.blocks())


def spread_out(comm, send, recv):
    """The schedule on per-peer byte blocks (rows of one array, or views of uneven length)."""
    return batch_plan(comm, send, recv, steps(comm.size, comm.rank))
