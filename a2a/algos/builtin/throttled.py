"""Linear exchange in batches of `window` peers, each ended by Waitall (MPICH scattered)."""
from a2a.algos.prebuilt import copier
from a2a.algos.registry import blocks, register

LIMITS = {"window": (lambda w: w >= 1, "an integer >= 1 (peers per batch)")}


@register("throttled", mirrors="MPICH scattered (MPIR_CVAR_ALLTOALL_THROTTLE); not Open MPI's linear_sync",
          limits=LIMITS)
def throttled(comm, sendbuf, recvbuf, *, window: int = 8):
    """Exchange with `window` peers at a time (Irecv/Isend, Waitall), in pairwise order."""
    return batches(comm, blocks(sendbuf, comm.size), blocks(recvbuf, comm.size), window)


@register("throttled", collective="alltoallv", limits=LIMITS,
          mirrors="MPICH alltoallv scattered (MPIR_CVAR_ALLTOALL_THROTTLE)")
def throttled_v(comm, send, recv, *, window: int = 8):
    """The same batches of `window` peers with per-peer counts."""
    return batches(comm, send.blocks(), recv.blocks(), window)


def windows(p: int, window: int) -> list[range]:
    """The shifts of each batch: 1..w, then w+1..2w, ... up to p-1 (rank r sends to r + shift)."""
    return [range(first, min(first + window, p)) for first in range(1, p, window)]


def batches(comm, send, recv, window: int):
    """The schedule on per-peer byte blocks (rows of one array, or views of uneven length)."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    steps = [[comm.Recv_init(recv[(r - s) % p], (r - s) % p) for s in shifts]
             + [comm.Send_init(send[(r + s) % p], (r + s) % p) for s in shifts] for shifts in windows(p, window)]
    start, wait, own = MPI.Prequest.Startall, MPI.Request.Waitall, copier(recv[r], send[r])

    def run():
        own()
        for requests in steps:
            start(requests)
            wait(requests)

    return run, lambda: [q.Free() for batch in steps for q in batch]
