"""Linear exchange with a bounded number of requests in flight (MPICH scattered, Open MPI linear_sync)."""
import numpy as np

from ..registry import blocks, register


@register("throttled", mirrors="MPICH scattered (MPIR_CVAR_ALLTOALL_THROTTLE); Open MPI linear_sync (4)",
          limits={"window": (lambda w: w >= 1, "an integer >= 1 (peers per batch)")})
def throttled(comm, sendbuf, recvbuf, *, window: int = 8):
    """Exchange with `window` peers at a time (Irecv/Isend, Waitall), in pairwise order."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    batches = []
    for first in range(1, p, window):
        shifts = range(first, min(first + window, p))
        batches.append([comm.Recv_init(recv[(r - s) % p], (r - s) % p) for s in shifts]
                       + [comm.Send_init(send[(r + s) % p], (r + s) % p) for s in shifts])
    start, wait, copy = MPI.Prequest.Startall, MPI.Request.Waitall, np.copyto

    def run():
        copy(recv[r], send[r])
        for requests in batches:
            start(requests)
            wait(requests)

    return run, lambda: [q.Free() for batch in batches for q in batch]
