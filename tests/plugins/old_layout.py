"""A plug-in written for the layout before a2a.schedules and a2a.execute: it imports every name a plug-in took from
a2a.algos then, and runs one exchange through them."""
import numpy as np

import a2a
from a2a.algos import registry
from a2a.algos.buffers import blocks
from a2a.algos.cost import Formula
from a2a.algos.plan import Prepared
from a2a.algos.prebuilt import copier, sendrecv_steps, spec
from a2a.algos.schedule import Exchanges


def steps(p, r):
    """Step k sends to r + k and receives from r - k."""
    shifts = np.arange(1, p)
    return Exchanges(r, (r + shifts) % p, (r - shifts) % p)


@registry.register("old_layout_pairwise", steps=steps,
                   cost=Formula("(p-1) (alpha + m beta)", ("alpha", "beta"),
                                lambda s, m, o: {"alpha": s.nprocs - 1, "beta": (s.nprocs - 1) * m}))
def old_layout_pairwise(comm, sendbuf, recvbuf):
    """Pairwise Sendrecv through the prebuilt specs and copier."""
    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    mine = steps(p, r)
    calls = [(spec(send[d]), d, spec(recv[q]), q) for d, q in zip(mine.dests.tolist(), mine.sources.tolist())]
    return Prepared(sendrecv_steps(comm, copier(recv[r], send[r]), calls), note="old layout")


@a2a.register("old_layout_copy")
def old_layout_copy(comm, sendbuf, recvbuf):
    """Only valid on one rank: the own block copied."""
    return lambda: np.copyto(recvbuf, sendbuf)
