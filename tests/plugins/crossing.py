"""Two plug-ins whose winner changes at 4 KiB per peer: `small` is 20 ms late from 4 KiB on, `large` below it.

So a sweep of 8 B and 1 MiB alone has one crossover somewhere in between, which `bench run --refine` must find.
"""
import time

import a2a

CROSSOVER = 4096  # bytes per peer


def exchange(comm, sendbuf, recvbuf, late: bool):
    def run():
        if late:
            time.sleep(0.02)  # far above what a loaded machine adds to these exchanges
        comm.Alltoall(sendbuf, recvbuf)
    return run


@a2a.register("small")
def small(comm, sendbuf, recvbuf):
    """MPI_Alltoall, 20 ms late from 4 KiB per peer on."""
    return exchange(comm, sendbuf, recvbuf, sendbuf.nbytes // comm.size >= CROSSOVER)


@a2a.register("large")
def large(comm, sendbuf, recvbuf):
    """MPI_Alltoall, 20 ms late below 4 KiB per peer."""
    return exchange(comm, sendbuf, recvbuf, sendbuf.nbytes // comm.size < CROSSOVER)
