"""Open MPI coll/acoll's parallel split: exchange f-block aggregates across groups, then finish inside them."""
from functools import partial

import numpy as np

from a2a.algos.prebuilt import copier, spec
from a2a.algos.registry import blocks, register

FACTORS = (2, 4, 8)
SUBGROUP = 8  # acoll's sg_size default: ranks per leader that relays an odd p's last rank
AGGREGATES, INSIDE, LAST = 1, 2, 3  # one tag per phase


def split_factor(p: int, factor: int) -> int:
    """The factor acoll uses: halved while above 2 and p mod factor > 1, so p mod factor is 0 or 1."""
    while factor > 2 and p % factor > 1:
        factor //= 2
    return factor


@register("parallel_split",
          mirrors="Open MPI coll/acoll alltoall (parallel split, split_factor 2/4/8; odd p: the last rank "
                  "through subgroup leaders)",
          limits={"factor": (lambda f: f in FACTORS, "2, 4 or 8 (halved as acoll does while p mod f > 1)")})
def parallel_split(comm, sendbuf, recvbuf, *, factor: int = 2):
    """Ranks equal mod f swap f-block aggregates (Isend/Irecv); then f consecutive ranks do f-1 Sendrecv."""

    p, r = comm.size, comm.rank
    f = split_factor(p, factor)
    body = p - p % f  # ranks below it run both phases; p % f is 0, or 1 when p is odd
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    steps, owned = (_split_steps(comm, send, recv, f, body) if r < body else ([], []))
    if body < p:
        steps += _last_rank_steps(comm, send, recv)

    def run():
        for step in steps:
            step()

    def free():
        for handle in owned:
            handle.Free()

    return run, free


def _split_steps(comm, send: np.ndarray, recv: np.ndarray, f: int, body: int) -> tuple[list, list]:
    """Steps of a rank below `body`, and the MPI handles they hold."""
    from mpi4py import MPI

    r, width = comm.rank, send.shape[1]
    j, mine, count = r % f, r - r % f, body // f  # my lane, my group's first rank, groups
    # phase 1: to lane-mate k*f+j the f blocks for group k; its f blocks for my group land in recv[k*f:]
    rows = [slice(k * f, k * f + f) for k in range(count)]
    requests = [comm.Recv_init(recv[rows[k]], k * f + j, AGGREGATES) for k in range(count) if k * f != mine]
    requests += [comm.Send_init(send[rows[k]], k * f + j, AGGREGATES) for k in range(count) if k * f != mine]
    # now recv[k*f + t] holds lane-mate k's block for member t of my group; step s sends member
    # j+s its column (one strided datatype, as acoll) and takes member j-s's column of blocks for me
    column = MPI.BYTE.Create_vector(count, width, f * width).Commit()
    work = np.empty((max(f - 1, 0), count, width), np.uint8)
    swaps, places = [], []
    for s in range(1, f):
        swaps.append(partial(comm.Sendrecv, (MPI.buffer(recv[(j + s) % f:]), 1, column), mine + (j + s) % f,
                             INSIDE, spec(work[s - 1]), mine + (j - s) % f, INSIDE))
        places.append(copier(recv[(j - s) % f: body: f], work[s - 1]))
    start, wait = MPI.Prequest.Startall, MPI.Request.Waitall
    steps = [partial(start, requests), copier(recv[mine: mine + f], send[mine: mine + f]),
             partial(wait, requests), *swaps, *places]
    return steps, [*requests, column]


def _last_rank_steps(comm, send: np.ndarray, recv: np.ndarray) -> list:
    """Odd p: the last rank swaps whole subgroups' blocks with their leaders, who relay to members."""
    p, r = comm.size, comm.rank
    last = p - 1
    if r == last:
        spans = [slice(lead, min(lead + SUBGROUP, last)) for lead in range(0, last, SUBGROUP)]
        return ([copier(recv[last], send[last])]
                + [partial(comm.Send, spec(send[span]), span.start, LAST) for span in spans]
                + [partial(comm.Recv, spec(recv[span]), span.start, LAST) for span in spans])
    lead = r - r % SUBGROUP
    if r != lead:
        return [partial(comm.Recv, spec(recv[last]), lead, LAST), partial(comm.Send, spec(send[last]), lead, LAST)]
    members = range(r + 1, min(r + SUBGROUP, last))
    relay = np.empty((len(members) + 1, send.shape[1]), np.uint8)  # row 0: mine, row c - r: member c's
    return ([partial(comm.Recv, spec(relay), last, LAST), copier(recv[last], relay[0])]
            + [partial(comm.Send, spec(relay[c - r]), c, LAST) for c in members]
            + [copier(relay[0], send[last])]
            + [partial(comm.Recv, spec(relay[c - r]), c, LAST) for c in members]
            + [partial(comm.Send, spec(relay), last, LAST)])
