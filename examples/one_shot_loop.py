"""One-shot calls in a loop against the same plan called and the library's own call (docs/findings/one-shot-calls.md).

    mpiexec -n 2 python examples/one_shot_loop.py [CALLS [ROUNDS]]

Per algorithm (native, pairwise), size (8 B, 1 KiB, 64 KiB, 1 MiB per peer) and form (blocking, non-blocking):
microseconds per call of a loop of CALLS (10,000) calls (fewer above 64 KiB: as many bytes as 64 KiB's loop), each
loop run ROUNDS (5) times in turn with the others; the median printed. Then, as loops read a shared machine's load as
much as the calls, one-shot and plan calls in turn in one loop, each call timed alone: the median per call of each
(the slowest rank's) and their ratio. The one-shot calls are given the same arrays at every call, so they run on plans
bound to them (docs/library.md).
"""
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import a2a

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
comm = MPI.COMM_WORLD


def per_call(run, calls: int) -> float:
    """Microseconds per call of `run` in a loop of `calls`, after 100 to warm up; the slowest rank's."""
    for _ in range(100):
        run()
    comm.Barrier()
    began = time.perf_counter()
    for _ in range(calls):
        run()
    return comm.allreduce((time.perf_counter() - began) / calls * 1e6, op=MPI.MAX)


def in_turn(shot, plan, calls: int) -> tuple[float, float]:
    """Median microseconds of a one-shot call and of a plan call, made in turn, each timed alone; the slowest rank's."""
    for _ in range(100):
        shot()
        plan()
    comm.Barrier()
    times: tuple[list, list] = ([], [])
    for _ in range(calls):
        began = time.perf_counter()
        shot()
        middle = time.perf_counter()
        plan()
        times[0].append(middle - began)
        times[1].append(time.perf_counter() - middle)
    return tuple(comm.allreduce(statistics.median(t) * 1e6, op=MPI.MAX) for t in times)


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


for size in (8, 1024, 65536, 1048576):
    calls = max(100, CALLS * 65536 // max(size, 65536))
    send = np.ones(comm.size * size, np.uint8)
    recv = np.empty_like(send)
    for name in ("native", "pairwise"):
        timed = loops(name, send, recv)
        rounds = {label: [] for label in timed}
        for _ in range(ROUNDS):
            for label, run in timed.items():
                rounds[label].append(per_call(run, calls))
                print(comm.rank, label, flush=True) if "-v" in sys.argv else None
        if comm.rank == 0:
            for form in ("blocking", "non-blocking"):
                shot, plan, library = (sorted(rounds[f"{form} {k}"])[ROUNDS // 2] for k in ("one-shot", "plan",
                                                                                             "library"))
                print(f"{size:>7} B {name:<8} {form:<12} one-shot {shot:7.2f} us  plan {plan:7.2f}  library "
                      f"{library:7.2f}  one-shot/plan {shot / plan:4.2f}  one-shot/library {shot / library:4.2f}",
                      flush=True)
        for form in ("blocking", "non-blocking"):
            shot, plan = in_turn(timed[f"{form} one-shot"], timed[f"{form} plan"], calls)
            if comm.rank == 0:
                print(f"{size:>7} B {name:<8} {form:<12} in turn, per call: one-shot {shot:7.2f} us  plan {plan:7.2f}  "
                      f"one-shot/plan {shot / plan:4.2f}", flush=True)
