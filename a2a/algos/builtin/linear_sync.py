"""Open MPI's linear_sync: a sliding window of receives and sends, each refilled as it completes."""
from a2a.algos.prebuilt import copier
from a2a.algos.registry import blocks, register


@register("linear_sync", mirrors="Open MPI linear_sync (coll_tuned alltoall algorithm 4, max requests = window); "
          "source: ompi/mca/coll/base/coll_base_alltoall.c",
          limits={"window": (lambda w: w >= 0, "0 (all peers at once) or an integer >= 1 (requests of each kind)")})
def linear_sync(comm, sendbuf, recvbuf, *, window: int = 0):
    """Post `window` Irecv from r+1, r+2, ... and Isend to r-1, r-2, ...; Waitany refills each kind."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    k = p - 1 if window <= 0 or window > p - 1 else window
    receives = [comm.Recv_init(recv[(r + s) % p], (r + s) % p) for s in range(1, p)]
    sends = [comm.Send_init(send[(r - s) % p], (r - s) % p) for s in range(1, p)]
    startall, waitall, waitany = MPI.Prequest.Startall, MPI.Request.Waitall, MPI.Request.Waitany
    own = copier(recv[r], send[r])

    def run():
        own()
        active = receives[:k] + sends[:k]  # slots 0..k-1 receive, k..2k-1 send
        startall(active)
        if k == p - 1:  # every request posted at once: Open MPI waits for all
            waitall(active)
            return
        posted = [k, k]
        for _ in range(2 * (p - 1)):
            slot = waitany(active)  # a completed persistent request is inactive, so never returned again
            kind, queue = (0, receives) if slot < k else (1, sends)
            if posted[kind] < p - 1:  # refill the slot with the next peer of the same kind, as Open MPI does
                active[slot] = queue[posted[kind]]
                posted[kind] += 1
                active[slot].Start()

    return run, lambda: [q.Free() for q in receives + sends]
