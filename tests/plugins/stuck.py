"""A plug-in whose calls never end from a size on, as a collective stuck for good: with A2A_TEST_STUCK_FROM set (bytes
per peer), every rank but 0 waits in a barrier that rank 0 never joins."""
import os

import a2a


@a2a.register("stuck")
def stuck(comm, sendbuf, recvbuf):
    """MPI_Alltoall; from A2A_TEST_STUCK_FROM bytes per peer on, ranks 1.. wait for ever in a barrier instead."""
    limit = os.environ.get("A2A_TEST_STUCK_FROM")
    if limit is None or sendbuf.nbytes // comm.size < int(limit):
        return lambda: comm.Alltoall(sendbuf, recvbuf)

    def run():
        if comm.rank != 0:
            comm.Barrier()
    return run
