"""Call MPI_Alltoall at each size given (bytes per peer); rank 0 prints the sizes that failed.

Imports only mpi4py and numpy, so it runs under any MPI library's venv. A size fails with
the MPI error class it raised, or "wrong" when the data came out wrong. Extra collectives
(Allreduce, Bcast, Barrier, Gather) run first with --collectives; --alltoallv calls
MPI_Alltoallv instead, with size + (i + j) % 3 bytes from rank i to rank j; --ialltoall calls
MPI_Ialltoall and waits; --alltoall goes back to MPI_Alltoall. Each of these holds for the sizes
after it (one job probes several calls); a size that failed under a call other than the one the
job began with is printed with that call's flag before it (--ialltoall:256:wrong).
"""
import sys

import numpy as np
from mpi4py import MPI


def other_collectives(comm):
    """Allreduce, Bcast, Barrier and Gather, each checked."""
    total = np.empty(1)
    comm.Allreduce(np.array([float(comm.rank)]), total)
    value = np.array([7.0]) if comm.rank == 0 else np.empty(1)
    comm.Bcast(value)
    comm.Barrier()
    gathered = np.empty(comm.size) if comm.rank == 0 else None
    comm.Gather(np.array([float(comm.rank)]), gathered)
    ok = total[0] == comm.size * (comm.size - 1) / 2 and value[0] == 7.0
    return ok and (gathered is None or list(gathered) == list(range(comm.size)))


def probe(comm, size, uneven=False, started=False):
    """None if Alltoall (uneven: Alltoallv; started: Ialltoall) of about `size` bytes per peer works, else why not."""
    p, r = comm.size, comm.rank
    counts = size + (r + np.arange(p)) % 3 if uneven else np.full(p, size)
    send = np.repeat((np.arange(p) + 16 * r).astype(np.uint8), counts)
    recv = np.zeros(counts.sum(), np.uint8)
    try:
        if uneven:
            comm.Alltoallv([send, counts], [recv, counts])
        elif started:
            comm.Ialltoall(send, recv).Wait()
        else:
            comm.Alltoall(send, recv)
    except MPI.Exception as error:
        return f"error{MPI.Get_error_class(error.Get_error_code())}"
    good = np.array_equal(recv, np.repeat((r + 16 * np.arange(p)).astype(np.uint8), counts))
    return None if all(comm.allgather(good)) else "wrong"


def main(args):
    comm = MPI.COMM_WORLD
    if args and args[0] == "--collectives":
        args = args[1:]
        if not all(comm.allgather(other_collectives(comm))):
            print("OTHER COLLECTIVES WRONG", flush=True)
            return 1
    failed, call = [], args[0] if args[:1] in (["--alltoallv"], ["--ialltoall"]) else "--alltoall"
    opening = call  # the call the job began with: its failures keep the plain SIZE:WHY
    for arg in args:
        if arg.startswith("--"):
            call = arg
        elif why := probe(comm, int(arg), call == "--alltoallv", call == "--ialltoall"):
            failed.append(f"{arg}:{why}" if call == opening else f"{call}:{arg}:{why}")
    if comm.rank == 0:
        print("FAILED", *failed, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
