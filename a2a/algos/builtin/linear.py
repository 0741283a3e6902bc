"""Post every receive and send at once, then wait for all (Open MPI basic linear).

Cost: throttled's with one batch of all p-1 peers: T = alpha + (p-1) (alpha_msg + m beta).
"""
from a2a.algos.builtin.throttled import batch_terms
from a2a.algos.cost import DIRECT, Formula, everything
from a2a.algos.prebuilt import copier
from a2a.algos.registry import blocks, register

TWINS = {"Open MPI": lambda o, p: ("linear", 0), "MPICH": lambda o, p: ("scattered", 0),
         "Intel MPI": lambda o, p: "isend_irecv"}
COST = Formula("alpha + (p-1) (alpha_msg + m beta)", ("alpha_msg", "beta", "alpha"),
               lambda s, m, options: batch_terms(s, m, max(s.nprocs - 1, 1)))


@register("linear", mirrors="Open MPI basic linear (coll_tuned_alltoall_algorithm 1)", cost=COST, traffic=everything,
          twins=TWINS, simplicity=1)
def linear(comm, sendbuf, recvbuf):
    """Post all p-1 receives and sends at once, then Waitall."""
    return spread_out(comm, blocks(sendbuf, comm.size), blocks(recvbuf, comm.size))


@register("linear", collective="alltoallv",
          mirrors="Open MPI alltoallv basic linear (coll_tuned_alltoallv_algorithm 1)", cost=DIRECT,
          twins={"Open MPI": TWINS["Open MPI"], "MPICH": TWINS["MPICH"]})
def linear_v(comm, send, recv):
    """Post all p-1 receives and sends (per-peer counts) at once, then Waitall."""
    return spread_out(comm, send.blocks(), recv.blocks())


def spread_out(comm, send, recv):
    """The schedule on per-peer byte blocks (rows of one array, or views of uneven length)."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    peers = [(r + s) % p for s in range(1, p)]
    requests = [comm.Recv_init(recv[q], q) for q in peers] + [comm.Send_init(send[q], q) for q in peers]
    start, wait, own = MPI.Prequest.Startall, MPI.Request.Waitall, copier(recv[r], send[r])

    def run():
        start(requests)
        own()
        wait(requests)

    return run, lambda: [q.Free() for q in requests]
