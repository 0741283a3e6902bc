"""A plug-in in one file that declares its steps: pairwise mirrored (step s sends to r-s, receives from r+s).

tests/test_executor.py runs it with executor=c: its schedule is traced from this code, and no C changes."""
import numpy as np

import a2a
from a2a.algos.buffers import blocks
from a2a.algos.schedule import Exchanges


def steps(p, r):
    """Step s sends to (r-s) mod p and receives from (r+s) mod p, one block each way."""
    s = np.arange(1, p)
    return Exchanges(r, (r - s) % p, (r + s) % p)


@a2a.register("mirrored", steps=steps)
def mirrored(comm, sendbuf, recvbuf):
    """Copy the own block, then p-1 Sendrecv steps to r-s and from r+s."""
    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    mine = steps(p, r)

    def run():
        recv[r] = send[r]
        for d, q in zip(mine.dests.tolist(), mine.sources.tolist()):
            comm.Sendrecv(send[d], d, 0, recv[q], q, 0)
    return run
