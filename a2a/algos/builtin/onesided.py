"""MPI one-sided (RMA): every rank puts its blocks into, or gets them from, the peers' windows."""
import math

from a2a.algos.buffers import blocks
from a2a.algos.cost import Formula, Placement
from a2a.algos.prebuilt import copier, spec
from a2a.algos.registry import register

SYNCS = ("fence", "lock", "pscw")
OPS = ("put", "get")


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """p-1 puts (or gets) of m bytes issued back to back inside one epoch, opened and closed by two
    collective synchronisations (fence: two fences; lock: two barriers around the flush), each
    ceil(lg p) rounds; pscw instead sends a post and a completion notice to each peer."""
    p = s.nprocs
    if options.get("sync") == "pscw":
        return {"alpha": 2 if p > 1 else 0, "alpha_msg": 3 * (p - 1), "beta": (p - 1) * m}
    return {"alpha": 2 * math.ceil(math.log2(p)) if p > 1 else 0, "alpha_msg": p - 1, "beta": (p - 1) * m}


@register("onesided",
          mirrors="UCC tl/ucp alltoall onesided (put, or get as its auto picks at >= 8 ranks per node); "
                  "MPI-3 RMA synchronisation",
          limits={"sync": (lambda s: s in SYNCS, "fence, lock (lock_all + flush + barrier) or pscw"),
                  "op": (lambda s: s in OPS, "put (into the peers' receive buffers) or get "
                                             "(from their send buffers)")},
          cost=Formula("2 ceil(lg p) alpha + (p-1) (alpha_msg + m beta)  (pscw: 2 alpha + 3 (p-1) alpha_msg"
                       " + (p-1) m beta)", ("alpha_msg", "beta", "alpha"), terms),
          simplicity=15)
def onesided(comm, sendbuf, recvbuf, *, sync: str = "fence", op: str = "put"):
    """One window per plan; peers r+1, r+2, ... each get one Put (or Get) of m bytes inside one epoch."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    width = send.shape[1]
    window = MPI.Win.Create(recv if op == "put" else send, disp_unit=1, comm=comm)
    at = (r * width, width, MPI.BYTE)  # my block's place in every peer's window
    peers = [(r + s) % p for s in range(1, p)]
    move, local = (window.Put, send) if op == "put" else (window.Get, recv)
    transfers = [(spec(local[q]), q) for q in peers]
    own = copier(recv[r], send[r])

    def transfer():
        for origin, q in transfers:
            move(origin, q, at)

    if sync == "fence":
        fence, first, last = window.Fence, MPI.MODE_NOPRECEDE, MPI.MODE_NOSUCCEED

        def run():
            own()  # before the epoch: a local store to my own window
            fence(first)
            transfer()
            fence(last)

        return run, window.Free

    if sync == "lock":
        window.Lock_all(MPI.MODE_NOCHECK)  # one passive-target epoch for the plan's life
        barrier, flush, synchronise = comm.Barrier, window.Flush_all, window.Sync

        def run():
            own()
            synchronise()  # my stores reach the window before peers access it
            barrier()  # every target is inside the call: its buffers are ours
            transfer()
            flush()  # my puts landed at their targets (my gets landed here)
            barrier()  # every rank's did: targets may read (and overwrite) their buffers
            synchronise()

        def free():
            window.Unlock_all()
            window.Free()

        return run, free

    everyone = comm.Get_group()
    others = everyone.Excl([r])
    everyone.Free()
    post, begin, complete, finish = window.Post, window.Start, window.Complete, window.Wait

    def run_pscw():
        own()
        post(others)  # exposure: peers may access my window
        begin(others)  # access: I may access theirs
        transfer()
        complete()
        finish()  # every peer's access to my window is done

    def free_pscw():
        others.Free()
        window.Free()

    return run_pscw, free_pscw
