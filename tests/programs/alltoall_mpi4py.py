"""An mpi4py program that knows nothing of the testbed: comm.Alltoall from 1 B to 1 MiB per peer and one
comm.Alltoallv of uneven counts, each result checked. Prints "ok" on rank 0, else "wrong" and exits 1."""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
right = True
for n in (1, 64, 1000, 65536, 100000, 1 << 20):
    send = ((np.arange(size * n) // n) * 7 + rank * 13 + np.arange(size * n)).astype(np.uint8)
    got = np.empty_like(send)
    comm.Alltoall(send, got)
    want = np.concatenate([((rank * 7 + j * 13 + np.arange(rank * n, (rank + 1) * n)) % 256).astype(np.uint8)
                           for j in range(size)])
    right &= np.array_equal(got, want)
sendcounts = np.array([(rank + j) % 3 + 1 for j in range(size)])
recvcounts = np.array([(j + rank) % 3 + 1 for j in range(size)])
send = np.concatenate([np.full(sendcounts[j], 100 * rank + j, np.int32) for j in range(size)])
got = np.empty(recvcounts.sum(), np.int32)
comm.Alltoallv([send, sendcounts], [got, recvcounts])
right &= np.array_equal(got, np.concatenate([np.full(recvcounts[j], 100 * j + rank, np.int32) for j in range(size)]))
right = comm.allreduce(right, op=MPI.LAND)
if rank == 0:
    print("ok" if right else "wrong")
sys.exit(0 if right else 1)
