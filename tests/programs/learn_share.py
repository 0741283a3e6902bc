"""Two communicators of 2 ranks that share rank 0, {0, 1} and {0, 2} of 3 ranks: rank 0 meets the first's class
before the second's, ranks 1 and 2 each meet only their own. 8-byte all-to-alls (int32 pairs) on each, every result
checked; both freed before MPI_Finalize. Prints ok (on rank 0) when every element arrived where MPI_Alltoall puts
it. `learn_share.py CALLS alltoallv`: the same exchanges by MPI_Alltoallv, and only the first communicator freed (the
second left to MPI_Finalize)."""
import sys

import numpy as np
from mpi4py import MPI

alltoallv = sys.argv[2:] == ["alltoallv"]
world = MPI.COMM_WORLD
first = world.Split(0 if world.rank in (0, 1) else MPI.UNDEFINED, world.rank)
second = world.Split(0 if world.rank in (0, 2) else MPI.UNDEFINED, world.rank)
wrong = 0
for call in range(int(sys.argv[1])):
    for comm in (first, second):
        if comm == MPI.COMM_NULL:
            continue
        send = (comm.rank * 1_000_003 + call + np.arange(4)).astype(np.int32)
        recv = np.empty_like(send)
        if alltoallv:
            comm.Alltoallv([send, [2, 2], [0, 2], MPI.INT], [recv, [2, 2], [0, 2], MPI.INT])
        else:
            comm.Alltoall(send, recv)
        expected = (np.repeat(np.arange(2), 2) * 1_000_003 + call + comm.rank * 2 + np.tile(np.arange(2), 2))
        wrong += int(np.count_nonzero(recv != expected.astype(np.int32)))
for comm in (first,) if alltoallv else (first, second):
    if comm != MPI.COMM_NULL:
        comm.Free()
wrong = world.allreduce(wrong)
if world.rank == 0:
    print("ok" if wrong == 0 else f"WRONG {wrong} elements")
