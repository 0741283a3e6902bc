"""Start an executor=c plan of each algorithm named (argv[1:]) at 8 B and 64 KiB per peer and make no MPI call until
its state says complete (up to 20 s each), then test and check it: what progresses the executor here must do it all.

Rank 0 prints how started exchanges progress here (the executor's mode), then "ok", or the exchanges that did not
complete or came out wrong. Run it with A2A_EXECUTOR_PROGRESS=thread (the executor's own thread), or with MPICH's
progress thread (MPIR_CVAR_ASYNC_PROGRESS=1); polled by nothing, no exchange would complete.
"""
import sys
import time

import numpy as np
from mpi4py import MPI

import a2a

comm = MPI.COMM_WORLD
failed, progress = [], ""
for name in sys.argv[1:]:
    for count in (2, 1 << 14):
        send = (np.arange(comm.size * count, dtype=np.float32) + 1000 * comm.rank)
        want, got = np.empty_like(send), np.zeros_like(send)
        comm.Alltoall(send, want)
        with a2a.get(name).init(comm, send, got) as plan:
            plan.start()
            executed = plan.progression._request  # the C executor's exchange: its state, read with no call
            progress = executed.progress
            deadline = time.monotonic() + 20
            while not executed.peek() and time.monotonic() < deadline:
                time.sleep(0.0001)
            unattended = executed.peek()
            if not (unattended and plan.test() and np.array_equal(got, want)):
                failed.append((name, count * 4, unattended))
failed = sum(comm.allgather(failed), [])
if comm.rank == 0:
    print(progress)
    print("ok" if not failed else f"not complete or wrong: {failed}")
