"""Open MPI's linear_sync: a sliding window of receives and sends, each refilled as it completes.

Cost with window w: no batch ends in a Waitall, so the latencies pipeline: about (p-1)/w of
them are exposed (one when w = 0 or w >= p-1, all posted at once); posting and matching each
message costs alpha_msg and the bytes leave one after another.
  T = (p-1)/w alpha + (p-1) (alpha_msg + m beta)
Twins: Open MPI's own linear_sync (max requests = window); all at once, it is also MPICH's
scattered without a throttle and Intel's Isend/Irecv + waitall. A narrower window has no other twin.
"""
import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.cost import Formula, Placement, option
from a2a.algos.prebuilt import copier
from a2a.algos.registry import Twin, register
from a2a.algos.schedule import Batches, batch_plan


def all_at_once(options: dict, p: int) -> bool:
    """Whether the window holds every peer (0 means all)."""
    window = option(options, "window")
    return window <= 0 or window >= p - 1


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """(p-1)/w alpha + (p-1) (alpha_msg + m beta)."""
    p = s.nprocs
    exposed = 1 if all_at_once(options, p) else (p - 1) / option(options, "window")
    return {"alpha": exposed, "alpha_msg": p - 1, "beta": (p - 1) * m}


def steps(p: int, r: int, window: int) -> Batches | None:
    """With every peer at once, after its own block: one batch from r+1, r+2, ... and to r-1, r-2, ... (mod p);
    None for a narrower window, whose refills follow the order in which requests complete."""
    if not all_at_once({"window": window}, p):
        return None
    shifts = np.arange(1, p)
    return Batches.even((r + shifts) % p, (r - shifts) % p, p - 1)


TWINS: dict[str, Twin] = {
    "Open MPI": lambda o, p: ("linear_sync", option(o, "window")),
    "MPICH": lambda o, p: ("scattered", 0) if all_at_once(o, p) else None,
    "Intel MPI": lambda o, p: "isend_irecv" if all_at_once(o, p) else None,
    "MPICH Ialltoall": lambda o, p: ("sched_permuted_sendrecv", 0) if all_at_once(o, p) else None}


@register("linear_sync", mirrors="Open MPI linear_sync (coll_tuned alltoall algorithm 4, max requests = window); "
          "source: ompi/mca/coll/base/coll_base_alltoall.c",
          limits={"window": (lambda w: w >= 0, "0 (all peers at once) or an integer >= 1 (requests of each kind)")},
          cost=Formula("(p-1)/w alpha + (p-1) (alpha_msg + m beta)  (w = p-1 when 0 or larger)",
                       ("alpha_msg", "beta", "alpha"), terms),
          steps=steps, twins=TWINS, simplicity=6)
def linear_sync(comm, sendbuf, recvbuf, *, window: int = 0):
    """Post `window` Irecv from r+1, r+2, ... and Isend to r-1, r-2, ...; Waitany refills each kind (every
    peer at once: one batch, waited for as a whole)."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    every = steps(p, r, window)
    if every is not None:  # every request posted at once: Open MPI waits for all
        return batch_plan(comm, send, recv, every)
    receives = [comm.Recv_init(recv[(r + s) % p], (r + s) % p) for s in range(1, p)]
    sends = [comm.Send_init(send[(r - s) % p], (r - s) % p) for s in range(1, p)]
    startall, waitany = MPI.Prequest.Startall, MPI.Request.Waitany
    own = copier(recv[r], send[r])

    def run():
        own()
        active = receives[:window] + sends[:window]  # slots 0..w-1 receive, w..2w-1 send
        startall(active)
        posted = [window, window]
        for _ in range(2 * (p - 1)):
            slot = waitany(active)  # a completed persistent request is inactive, so never returned again
            kind, queue = (0, receives) if slot < window else (1, sends)
            if posted[kind] < p - 1:  # refill the slot with the next peer of the same kind, as Open MPI does
                active[slot] = queue[posted[kind]]
                posted[kind] += 1
                active[slot].Start()

    return run, lambda: [q.Free() for q in receives + sends]
