"""Post every receive and send at once, then wait for all (Open MPI basic linear)."""
from a2a.algos.prebuilt import copier
from a2a.algos.registry import blocks, register


@register("linear", mirrors="Open MPI basic linear (coll_tuned_alltoall_algorithm 1)")
def linear(comm, sendbuf, recvbuf):
    """Post all p-1 receives and sends at once, then Waitall."""
    return spread_out(comm, blocks(sendbuf, comm.size), blocks(recvbuf, comm.size))


@register("linear", collective="alltoallv",
          mirrors="Open MPI alltoallv basic linear (coll_tuned_alltoallv_algorithm 1)")
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
