"""An IMB-style race of the executors (docs/findings/executor.md).

    mpirun -n P python examples/executor_race.py VARIANT... [--sizes 8,1024] [--reps 7]

Per variant (bench's spelling: pairwise, pairwise:executor=python, native) and size: a loop of back-to-back
calls, timed on every rank, the slowest rank's time per call, the median of `--reps` loops; and the fastest single
call (IMB's t_min: on a shared, loaded machine the call's own cost, when both ranks happened to run). The same plan
blocking and as start() + wait(); and, for the start()ed exchange, the median cost of a test() that finds it not
yet complete. Prints one CSV line per variant and size.
"""
import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import a2a
from a2a.sweep.variants import parse_variant


def loop(comm, call, iterations: int) -> float:
    """Seconds per call of `iterations` back-to-back calls, the slowest rank's."""
    comm.Barrier()
    began = time.perf_counter()
    for _ in range(iterations):
        call()
    return comm.allreduce((time.perf_counter() - began) / iterations, op=MPI.MAX)


def fastest_call(comm, call, iterations: int) -> float:
    """The fastest of `iterations` calls each timed alone (IMB's t_min), the slowest rank's: on a loaded machine, the
    call's own cost, when both ranks happened to run."""
    comm.Barrier()
    best = float("inf")
    for _ in range(iterations):
        began = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - began)
    return comm.allreduce(best, op=MPI.MAX)


def idle_test(plan, samples: int = 50) -> float:
    """Median seconds of a test() that finds the exchange not complete (NaN if every first test completed it)."""
    found = []
    for _ in range(samples):
        plan.start()
        began = time.perf_counter()
        done = plan.test()
        spent = time.perf_counter() - began
        if not done:
            found.append(spent)
        plan.wait()
    return statistics.median(found) if found else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variants", nargs="+")
    parser.add_argument("--sizes", default="8,1024,65536,1048576")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--budget", type=float, default=0.05, help="seconds per timed loop")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        print("variant,bytes_per_peer,executor,blocking_us,start_wait_us,ratio,fastest_call_us,"
              "fastest_start_wait_us,ratio_fastest,idle_test_us")
    for size in map(int, args.sizes.split(",")):
        send = np.full(comm.size * size, comm.rank % 251, np.uint8)
        recv = np.empty_like(send)
        for spec in args.variants:
            name, options = parse_variant(spec)
            with a2a.get(name).plan(comm, send, recv, **options) as plan:
                plan()
                once = loop(comm, plan, 3)
                iterations = max(5, min(2000, int(args.budget / max(once, 1e-7))))
                iterations = comm.bcast(iterations)

                def started():
                    plan.start()
                    plan.wait()
                blocking = [loop(comm, plan, iterations) for _ in range(args.reps)]
                nonblocking = [loop(comm, started, iterations) for _ in range(args.reps)]
                calls = max(iterations, 200)
                blocking_call, started_call = fastest_call(comm, plan, calls), fastest_call(comm, started, calls)
                idle = comm.allreduce(idle_test(plan), op=MPI.MAX)
                if comm.rank == 0:
                    ran = plan.executor if "executor" in a2a.get(name).options else "library"
                    times = [statistics.median(blocking), statistics.median(nonblocking), blocking_call, started_call]
                    print(f"{spec},{size},{ran},{times[0] * 1e6:.2f},{times[1] * 1e6:.2f},{times[1] / times[0]:.3f},"
                          f"{times[2] * 1e6:.2f},{times[3] * 1e6:.2f},{times[3] / times[2]:.3f},{idle * 1e6:.2f}",
                          flush=True)


if __name__ == "__main__":
    main()
