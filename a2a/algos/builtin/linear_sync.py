"""Open MPI's linear_sync: a sliding window of receives and sends, each refilled as it completes.

Cost with window w: no batch ends in a Waitall, so the latencies pipeline: about (p-1)/w of
them are exposed (one when w = 0 or w >= p-1, all posted at once); posting and matching each
message costs alpha_msg and the bytes leave one after another.
  T = (p-1)/w alpha + (p-1) (alpha_msg + m beta)
Twins: Open MPI's own linear_sync (max requests = window); all at once, it is also MPICH's
scattered without a throttle and Intel's Isend/Irecv + waitall. A narrower window has no other twin.
"""
from a2a.algos.cost import Formula, Placement, option
from a2a.algos.prebuilt import copier
from a2a.algos.registry import blocks, register


def all_at_once(options: dict, p: int) -> bool:
    """Whether the window holds every peer (0 means all)."""
    window = option(options, "window")
    return window <= 0 or window >= p - 1


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """(p-1)/w alpha + (p-1) (alpha_msg + m beta)."""
    p = s.nprocs
    exposed = 1 if all_at_once(options, p) else (p - 1) / option(options, "window")
    return {"alpha": exposed, "alpha_msg": p - 1, "beta": (p - 1) * m}


TWINS = {"Open MPI": lambda o, p: ("linear_sync", option(o, "window")),
         "MPICH": lambda o, p: ("scattered", 0) if all_at_once(o, p) else None,
         "Intel MPI": lambda o, p: "isend_irecv" if all_at_once(o, p) else None}


@register("linear_sync", mirrors="Open MPI linear_sync (coll_tuned alltoall algorithm 4, max requests = window); "
          "source: ompi/mca/coll/base/coll_base_alltoall.c",
          limits={"window": (lambda w: w >= 0, "0 (all peers at once) or an integer >= 1 (requests of each kind)")},
          cost=Formula("(p-1)/w alpha + (p-1) (alpha_msg + m beta)  (w = p-1 when 0 or larger)",
                       ("alpha_msg", "beta", "alpha"), terms),
          twins=TWINS, simplicity=6)
def linear_sync(comm, sendbuf, recvbuf, *, window: int = 0):
    """Post `window` Irecv from r+1, r+2, ... and Isend to r-1, r-2, ...; Waitany refills each kind."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    k = p - 1 if window <= 0 or window > p - 1 else window
    receives = [comm.Recv_init(recv[(r + s) % p], (r + s) % p) for s in range(1, p)]
    sends = [comm.Send_init(send[(r - s) % p], (r - s) % p) for s in range(1, p)]
    startall, waitall, waitany = MPI.Prequest.Startall, MPI.Request.Waitall, MPI.Request.Waitany
    own = copier(recv[r], send[r])

    def run():
        own()
        active = receives[:k] + sends[:k]  # slots 0..k-1 receive, k..2k-1 send
        startall(active)
        if k == p - 1:  # every request posted at once: Open MPI waits for all
            waitall(active)
            return
        posted = [k, k]
        for _ in range(2 * (p - 1)):
            slot = waitany(active)  # a completed persistent request is inactive, so never returned again
            kind, queue = (0, receives) if slot < k else (1, sends)
            if posted[kind] < p - 1:  # refill the slot with the next peer of the same kind, as Open MPI does
                active[slot] = queue[posted[kind]]
                posted[kind] += 1
                active[slot].Start()

    return run, lambda: [q.Free() for q in receives + sends]
