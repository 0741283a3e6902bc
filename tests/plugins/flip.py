"""Two plug-ins whose speed alternates between launches: in sweep-N with N odd flip_a is slow, with N even flip_b.

So a decision from two launches has a cell whose winner changed: a verdict that resamples launches calls it a tie.
"""
import re
import sys
import time

import a2a


def launch() -> int:
    """N of the `--output .../sweep-N` this job writes (0 elsewhere)."""
    found = re.search(r"sweep-(\d+)", " ".join(sys.argv))
    return int(found.group(1)) if found else 0


def exchange(comm, sendbuf, recvbuf, slow: bool):
    def run():
        if slow:
            time.sleep(0.02)  # far above what a loaded machine adds to an 8-byte exchange
        comm.Alltoall(sendbuf, recvbuf)
    return run


@a2a.register("flip_a")
def flip_a(comm, sendbuf, recvbuf):
    """MPI_Alltoall, 20 ms late in odd launches."""
    return exchange(comm, sendbuf, recvbuf, launch() % 2 == 1)


@a2a.register("flip_b")
def flip_b(comm, sendbuf, recvbuf):
    """MPI_Alltoall, 20 ms late in even launches."""
    return exchange(comm, sendbuf, recvbuf, launch() % 2 == 0)
