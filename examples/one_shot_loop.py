"""One-shot calls in a loop against the same plan called and the library's own call (docs/findings/one-shot-calls.md).

    mpiexec -n 2 python examples/one_shot_loop.py [CALLS]

Per algorithm (native, pairwise), size (8 B, 64 KiB per peer) and form (blocking, non-blocking): microseconds
per call of a loop of CALLS (10,000) calls, each loop run three times in turn with the others; the median printed.
"""
import sys
import time

import numpy as np
from mpi4py import MPI

import a2a

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
comm = MPI.COMM_WORLD


def per_call(run) -> float:
    """Microseconds per call of `run` in a loop of CALLS, after 100 to warm up; the slowest rank's."""
    for _ in range(100):
        run()
    comm.Barrier()
    began = time.perf_counter()
    for _ in range(CALLS):
        run()
    return comm.allreduce((time.perf_counter() - began) / CALLS * 1e6, op=MPI.MAX)


def loops(name: str, send: np.ndarray, recv: np.ndarray) -> dict[str, callable]:
    blocking_plan = a2a.get(name).plan(comm, send, recv)
    nonblocking_plan = a2a.get(name).init(comm, send, recv, **({"form": "nonblocking"} if name == "native" else {}))

    def started() -> None:
        nonblocking_plan.start()
        nonblocking_plan.wait()
    return {
        "blocking one-shot": lambda: a2a.alltoall(comm, send, recv, name),
        "blocking plan": blocking_plan,
        "blocking library": lambda: comm.Alltoall(send, recv),
        "non-blocking one-shot": lambda: a2a.ialltoall(comm, send, recv, name).wait(),
        "non-blocking plan": started,
        "non-blocking library": lambda: comm.Ialltoall(send, recv).Wait(),
    }


for size in (8, 65536):
    send = np.ones(comm.size * size, np.uint8)
    recv = np.empty_like(send)
    for name in ("native", "pairwise"):
        timed = loops(name, send, recv)
        rounds = {label: [] for label in timed}
        for _ in range(3):
            for label, run in timed.items():
                rounds[label].append(per_call(run))
                print(comm.rank, label, flush=True) if "-v" in sys.argv else None
        if comm.rank == 0:
            for form in ("blocking", "non-blocking"):
                shot, plan, library = (rounds[f"{form} {k}"][1] for k in ("one-shot", "plan", "library"))
                print(f"{size:>6} B {name:<8} {form:<12} one-shot {shot:7.2f} us  plan {plan:7.2f}  library "
                      f"{library:7.2f}  one-shot/plan {shot / plan:4.2f}  one-shot/library {shot / library:4.2f}",
                      flush=True)
