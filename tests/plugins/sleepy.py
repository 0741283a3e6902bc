"""A plug-in that stalls on chosen calls, to test stall and outlier flags."""
import time

import a2a


@a2a.register("sleepy")
def sleepy(comm, sendbuf, recvbuf, *, stall_calls: str = "", seconds: float = 0.25, from_bytes: int = 0):
    """MPI_Alltoall; rank 0 sleeps on the calls listed ('3/6', from 0, warm-up included)."""
    big_enough = sendbuf.nbytes // comm.size >= from_bytes
    stalls = {int(c) for c in stall_calls.split("/") if c} if big_enough else set()
    calls = iter(range(1 << 62))

    def run():
        if next(calls) in stalls and comm.rank == 0:
            time.sleep(seconds)
        comm.Alltoall(sendbuf, recvbuf)
    return run
