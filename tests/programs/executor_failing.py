"""A plan of the C executor whose exchange an MPI_Isend fails (tests/programs/failing_isend.c preloaded with
A2A_TEST_FAIL_ISEND): the call (argv[1] "run": blocking; "start": started, then waited for) raises ExchangeFailed
naming MPI_Isend on every rank, and the next call of the same plan is right. Prints ok on rank 0, else what was
wrong."""
import sys

import numpy as np
from mpi4py import MPI

import a2a
from a2a.execute.executor import ExchangeFailed

comm = MPI.COMM_WORLD
send = (np.arange(comm.size * 4) + comm.rank * 1000).astype(np.int32)
recv = np.zeros_like(send)
said = ""
with a2a.get("pairwise").plan(comm, send, recv, executor="c") as plan:
    try:
        if sys.argv[1:] == ["start"]:
            plan.start()
            plan.wait()
        else:
            plan()
        said = "no error"
    except ExchangeFailed as failed:
        said = "" if failed.call == "MPI_Isend" and "MPI_Isend returned MPI error" in str(failed) else str(failed)
    plan()
    expected = (np.repeat(np.arange(comm.size), 4) * 1000 + comm.rank * 4 + np.tile(np.arange(4), comm.size))
    if not np.array_equal(recv, expected.astype(np.int32)):
        said += " the next call's data is wrong"
told = comm.gather(said)
if told is not None:  # rank 0, which gathered
    print("ok" if not any(told) else f"WRONG: {told}")
