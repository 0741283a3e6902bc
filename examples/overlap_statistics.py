"""Where the overlap protocol's pure time parts from IMB-NBC's and IMB-MPI4's (docs/findings/overlap.md).

    mpiexec -n 2 python examples/overlap_statistics.py [ITERATIONS] [SIZES...]

Times one exchange, start then wait, ITERATIONS (200) times per size (64 KiB and 1 MiB per peer by default), for
the library's non-blocking (MPI_Ialltoall) and persistent (MPI_Alltoall_init) forms, by two paths in turn:
- mpi4py: the library's request made and waited for straight from Python, as IMB's C loop does;
- plan: the testbed's plan of `native` with that form (start(), wait()), the path `--timing overlap` times.
Each iteration is begun after a barrier, as in both, on buffers placed as the driver places them (each on pages of
its own, as C's malloc maps a large buffer: numpy's heap can put the receive buffer 16 bytes past the send buffer
modulo 4 KiB, where a copy from one to the other aliases; docs/findings/overlap.md). Each is read with two
statistics:
- IMB: each rank's mean over the iterations, the slowest rank's printed (IMB prints the rank with the largest
  overlapped time; on the pure part alone, the slowest mean);
- ours: each iteration's maximum over the ranks, their median (the protocol's t_pure_us).
Both take MPI_Wtime, as IMB does. So plan/IMB over mpi4py/IMB is what the testbed adds to a call, ours over IMB
on one path is the statistic, and mpi4py/IMB against IMB's own figure is Python's call.
"""
import sys

import numpy as np
from mpi4py import MPI

import a2a
from a2a.measure.cache import buffer_sets
from a2a.units import human_bytes, parse_size

ITERATIONS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
SIZES = [parse_size(s) for s in sys.argv[2:]] or [1 << 16, 1 << 20]
WARMUP = 10
comm = MPI.COMM_WORLD


def samples(start, wait) -> np.ndarray:
    """This rank's time of each start-then-wait, after WARMUP of them, each begun after a barrier."""
    for _ in range(WARMUP):
        start()
        wait()
    times = np.empty(ITERATIONS)
    for i in range(ITERATIONS):
        comm.Barrier()
        began = MPI.Wtime()
        start()
        wait()
        times[i] = MPI.Wtime() - began
    return times


def mpi4py_path(form: str, send: np.ndarray, recv: np.ndarray):
    """(start, wait, free) of the library's own request, straight from mpi4py."""
    if form == "persistent":
        request = comm.Alltoall_init(send, recv)
        return request.Start, request.Wait, request.Free
    held = []
    return (lambda: held.append(comm.Ialltoall(send, recv))), (lambda: held.pop().Wait()), (lambda: None)


def statistics(times: np.ndarray) -> tuple[float, float]:
    """(IMB's: the slowest rank's mean, ours: the median of each iteration's maximum), in microseconds."""
    imb = comm.allreduce(float(times.mean()), op=MPI.MAX)
    worst = np.empty_like(times)
    comm.Allreduce(times, worst, op=MPI.MAX)
    return imb * 1e6, float(np.median(worst)) * 1e6


def main() -> None:
    rows = []
    for size in SIZES:
        template = np.ones(size * comm.size, np.uint8), np.zeros(size * comm.size, np.uint8)
        [(send, recv)], _ = buffer_sets(comm, "warm", template, ITERATIONS, 1 << 30)
        for form in ("nonblocking", "persistent"):
            plan = a2a.get("native").init(comm, send, recv, form=form)
            for path, (start, wait, free) in (("mpi4py", mpi4py_path(form, send, recv)),
                                              ("plan", (plan.start, plan.wait, plan.free))):
                rows.append((human_bytes(size), form, path, *statistics(samples(start, wait))))
                free()
    if comm.rank == 0:
        print(f"# {comm.size} ranks, {ITERATIONS} iterations after {WARMUP}, MPI_Wtime; pure time in us")
        print(f"{'size':>6} {'form':>12} {'path':>7} {'IMB stat':>9} {'ours':>9} {'ours/IMB':>9}")
        for size, form, path, imb, ours in rows:
            print(f"{size:>6} {form:>12} {path:>7} {imb:9.1f} {ours:9.1f} {ours / imb:9.2f}")


if __name__ == "__main__":
    main()
