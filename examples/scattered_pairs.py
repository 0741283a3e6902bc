"""Example plug-in: pairwise exchange in a random (seeded) order, the same on every rank."""
import random

import numpy as np

import a2a


@a2a.register("shuffled_pairwise")
def shuffled_pairwise(comm, sendbuf, recvbuf, *, seed: int = 1):
    """Pairwise Sendrecv, shifts visited in a seeded random order."""
    p, r = comm.size, comm.rank
    send, recv = sendbuf.reshape(p, -1), recvbuf.reshape(p, -1)
    shifts = random.Random(seed).sample(range(1, p), p - 1)   # all ranks draw the same order

    def run():
        np.copyto(recv[r], send[r])
        for s in shifts:
            comm.Sendrecv(send[(r + s) % p], (r + s) % p, 0, recv[(r - s) % p], (r - s) % p, 0)
    return run
