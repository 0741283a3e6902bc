"""All-to-alls on MPI_COMM_WORLD and on halves of it, in turn, at 1 KiB and 64 KiB per peer, every result checked:
prints ok (on rank 0) when every element arrived where MPI_Alltoall puts it."""
import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
half = world.Split(world.rank % 2, world.rank)
wrong = 0
for call in range(100):
    for comm in (world, half):
        for n in (256, 16384):  # int32 per peer
            send = (comm.rank * 1_000_003 + call + np.arange(comm.size * n)).astype(np.int32)
            recv = np.empty_like(send)
            comm.Alltoall(send, recv)
            source = np.repeat(np.arange(comm.size), n)
            expected = (source * 1_000_003 + call + comm.rank * n + np.tile(np.arange(n), comm.size)).astype(np.int32)
            wrong += int(np.count_nonzero(recv != expected))
wrong = world.allreduce(wrong)
if world.rank == 0:
    print("ok" if wrong == 0 else f"WRONG {wrong} elements")
