"""What an idle test() costs: a test of a started exchange that finds nothing to do (docs/findings/overlap.md).

    mpirun -n P python examples/test_cost.py [VARIANT...] [--sizes 8,65536] [--tests 2000] [--reps 7]

VARIANT as bench spells it (default: pairwise, native:form=nonblocking). Per variant and size, `--reps` times:
rank 0 starts the exchange and times `--tests` test() calls in a row while every other rank waits in MPI_Recv on
another communicator before starting its own, so nothing can arrive and each test is idle; then rank 0 lets them go
and every rank waits. Prints one CSV line per variant and size: how the exchange progresses, the median of the reps'
microseconds per test(), and the fastest rep's.
"""
import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import a2a
from a2a.sweep.variants import parse_variant


def idle_tests(comm, side, plan, tests: int) -> float:
    """Seconds per test() on rank 0 while the others have not started (nan where a test found it complete)."""
    spent, found_complete = 0.0, False
    if comm.rank == 0:
        plan.start()
        began = time.perf_counter()
        for _ in range(tests):
            found_complete |= plan.test()
        spent = time.perf_counter() - began
        for peer in range(1, comm.size):
            side.Send(b"", dest=peer)
    else:
        side.Recv(bytearray(0), source=0)
        plan.start()
    plan.wait()
    return float("nan") if found_complete else spent / tests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variants", nargs="*", default=["pairwise", "native:form=nonblocking"])
    parser.add_argument("--sizes", default="8,65536")
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    side = comm.Dup()
    if comm.rank == 0:
        print("variant,bytes_per_peer,executor,progress,idle_test_us_median,idle_test_us_fastest")
    for size in map(int, args.sizes.split(",")):
        send = np.full(comm.size * size, comm.rank % 251, np.uint8)
        recv = np.empty_like(send)
        for spec in args.variants:
            name, options = parse_variant(spec)
            with a2a.get(name).init(comm, send, recv, **options) as plan:
                idle_tests(comm, side, plan, 10)  # warm: the path through test() and the first exchange
                times = [idle_tests(comm, side, plan, args.tests) for _ in range(args.reps)]
                executed = getattr(plan.progression.request, "__self__", None)  # the C executor's, if it runs it
                progress = getattr(executed, "progress", "library")
                if comm.rank == 0:
                    print(f"{spec},{size},{plan.executor},{progress},{statistics.median(times) * 1e6:.3f},"
                          f"{min(times) * 1e6:.3f}", flush=True)
    side.Free()


if __name__ == "__main__":
    main()
