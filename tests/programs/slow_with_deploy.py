"""A program that runs 1 s slower when a deploy file is set (A2A_DEPLOY): a verifier must refuse such a file (a
slowdown each of the 6 pairs of launches shows beside their start-up times on a loaded machine)."""
import os
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
send = np.arange(comm.size * 16, dtype=np.int32)
recv = np.empty_like(send)
for _ in range(3):
    comm.Alltoall(send, recv)
if os.environ.get("A2A_DEPLOY"):
    time.sleep(1.0)
comm.Barrier()
