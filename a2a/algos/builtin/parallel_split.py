"""Open MPI coll/acoll's parallel split: exchange f-block aggregates across groups, then finish inside them.

Cost with f as acoll lowers it and g = floor(p/f) groups: phase 1 posts g-1 messages of f m at
once; phase 2 is f-1 Sendrecv of g m, each then copied into place. An odd p's last rank goes
through a leader of s = min(8, p-1) ranks, which receives s m, relays s-1 blocks each way and
sends s m back, after its own phases.
  T = (f + [p odd] 2s) alpha + (g-1) alpha_msg + ((g-1) f + (f-1) g + [p odd] (4s-2)) m beta
      + (f-1) g m gamma
"""
from functools import partial

import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.cost import Formula, Placement, option
from a2a.algos.prebuilt import copier, spec
from a2a.algos.registry import register
from a2a.algos.schedule import Copied, Phases, Posted, Rounds

FACTORS = (2, 4, 8)
SUBGROUP = 8  # acoll's sg_size default: ranks per leader that relays an odd p's last rank
AGGREGATES, INSIDE, LAST = 1, 2, 3  # one tag per phase


def split_factor(p: int, factor: int) -> int:
    """The factor acoll uses: halved while above 2 and p mod factor > 1, so p mod factor is 0 or 1."""
    while factor > 2 and p % factor > 1:
        factor //= 2
    return factor


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """See the module's docstring."""
    p = s.nprocs
    f = split_factor(p, option(options, "factor"))
    g = p // f
    relay = min(SUBGROUP, p - 1) if p % f else 0
    lanes = max(g - 1, 0)
    return {"alpha": (f if g else 0) + 2 * relay, "alpha_msg": lanes,
            "beta": (lanes * f + (f - 1) * g + max(4 * relay - 2, 0)) * m, "gamma": (f - 1) * g * m}


COST = Formula("(f + 2s[p odd]) alpha + (g-1) alpha_msg + ((g-1) f + (f-1) g + (4s-2)[p odd]) m beta"
               " + (f-1) g m gamma  (f as acoll lowers it, g = p div f, s = min(8, p-1))",
               ("alpha", "beta", "alpha_msg", "gamma"), terms)


def lanes(r: int, f: int, body: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank r's lane-mates (rank k*f + j of every other group k, for r = its group's first + j) and its f-1 swaps'
    destinations and sources (swap s: the members j+s and j-s of its own group)."""
    j, mine = r % f, r - r % f
    mates = np.arange(j, body, f)
    shifts = np.arange(1, f)
    return mates[mates != r], mine + (j + shifts) % f, mine + (j - shifts) % f


def steps(p: int, r: int, factor: int) -> Phases | None:
    """What the factory runs on rank r, as data: None for an odd p, whose last rank is relayed by blocking
    sends (captured)."""
    f = split_factor(p, factor)
    if p % f:
        return None
    mates, dests, sources = lanes(r, f, p)
    aggregates, columns = np.full(len(mates), f), np.full(f - 1, p // f)
    return Phases((Posted(mates, aggregates, mates, aggregates, meanwhile=f), Rounds(dests, sources, columns, columns),
                   *[Copied(p // f)] * (f - 1)))


@register("parallel_split",
          mirrors="Open MPI coll/acoll alltoall (parallel split, split_factor 2/4/8; odd p: the last rank "
                  "through subgroup leaders)",
          limits={"factor": (lambda f: f in FACTORS, "2, 4 or 8 (halved as acoll does while p mod f > 1)")},
          cost=COST, steps=steps, simplicity=10)
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
    mine, count = r - r % f, body // f  # my group's first rank, groups
    mates, dests, sources = lanes(r, f, body)
    # phase 1: to lane-mate k*f+j the f blocks for group k; its f blocks for my group land in recv[k*f:]
    rows = [slice(q - q % f, q - q % f + f) for q in mates.tolist()]
    requests = [comm.Recv_init(recv[at], q, AGGREGATES) for at, q in zip(rows, mates.tolist())]
    requests += [comm.Send_init(send[at], q, AGGREGATES) for at, q in zip(rows, mates.tolist())]
    # now recv[k*f + t] holds lane-mate k's block for member t of my group; swap s sends member
    # j+s its column (one strided datatype, as acoll) and takes member j-s's column of blocks for me
    column = MPI.BYTE.Create_vector(count, width, f * width).Commit()
    work = np.empty((max(f - 1, 0), count, width), np.uint8)
    swaps = [partial(comm.Sendrecv, (MPI.buffer(recv[d - mine:]), 1, column), d, INSIDE, spec(work[s]), q, INSIDE)
             for s, (d, q) in enumerate(zip(dests.tolist(), sources.tolist()))]
    places = [copier(recv[q - mine: body: f], work[s]) for s, q in enumerate(sources.tolist())]
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
