"""Aggregate across nodes first, then redistribute inside the node (mpi-advance locality-aware).

Cost with G groups per node of c = q/G ranks each: phase 1 sends c m bytes to the rank of the
same index in each of the G-1 other groups of the node and the G (N-1) groups elsewhere;
phase 2 (Alltoallv in the group) sends (p/c) m to each of c-1 members; repack and reorder copy p m.
  T = (N-1) G (alpha_inter + c m beta_inter) + (G-1) (alpha_intra + c m beta_intra)
      + (c-1) (alpha_intra + (p/c) m beta_intra) + 2 p m gamma
"""
from typing import NamedTuple

import numpy as np

from a2a.algos.buffers import blocks, packed
from a2a.algos.builtin.hierarchical import LINK_PARAMS
from a2a.algos.cost import Formula, Placement, leader_split
from a2a.algos.nodes import NODE_LIMITS, node_groups, node_index, node_members, node_sizes, nodes_of_job, split_nodes
from a2a.algos.prebuilt import copier, copy_function, take_function
from a2a.algos.registry import register
from a2a.algos.schedule import Among, Copied, Phases, Posted


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """See the module's docstring."""
    n, groups, c = leader_split(s, options, "groups")
    p, others = n.nprocs, n.nnodes - 1
    return {"alpha_intra": groups - 1 + c - 1, "beta_intra": ((groups - 1) * c + (c - 1) * p / c) * m,
            "alpha_inter": others * groups, "beta_inter": others * groups * c * m, "gamma": 2 * p * m}


class Aggregation(NamedTuple):
    """A rank's part in locality_aware on groups `parts`: member k of group b sends group g's blocks to member
    k mod |g| of g, its collector for g (with equal groups, member i of every group; with uneven ones every source
    still has exactly one collector in each group)."""

    group: int  # the rank's group g
    order: np.ndarray  # every rank, group by group: the send buffer's rows by destination group
    other_groups: np.ndarray  # every other group b, ascending
    dests: np.ndarray  # the rank each other group's blocks go to
    sent: np.ndarray  # and their number: that group's size
    held: np.ndarray  # the sources whose blocks for g this rank collects, itself among them, group by group
    redistributed: np.ndarray  # blocks it sends each member of g in g's Alltoallv: one per held source
    collected: np.ndarray  # blocks it receives from each member of g there: one per source that member collects
    delivered: np.ndarray  # the source of each block that Alltoallv delivers, in order

    @property
    def reordered(self) -> bool:
        """Whether the send buffer's rows must be put in group order first (groups not of consecutive ranks)."""
        return bool((self.order != np.arange(len(self.order))).any())

    @classmethod
    def of(cls, parts: list[list[int]], rank: int) -> "Aggregation":
        sizes, members = node_sizes(parts), node_members(parts)
        starts = np.cumsum(sizes) - sizes
        g = node_index(sizes, members, rank)
        i, size = parts[g].index(rank), sizes[g]
        collector = (np.arange(len(members)) - np.repeat(starts, sizes)) % size  # in g, of each source
        held = members[collector == i]
        others = np.flatnonzero(np.arange(len(parts)) != g)
        collected = np.bincount(collector, minlength=size)
        return cls(g, members, others, members[starts[others] + i % sizes[others]], sizes[others], held,
                   np.full(size, len(held)), collected, members[np.argsort(collector, kind="stable")])


def steps(p: int, r: int, groups: int, ppn: int, placement: str, nodes: list[list[int]]) -> Phases:
    """What the factory runs on rank r, as data, on virtual nodes of `ppn` ranks or else on `nodes`."""
    parts = split_nodes(nodes_of_job(nodes, ppn, placement), groups)
    at = Aggregation.of(parts, r)
    mine = len(parts[at.group])
    sources = at.held[at.held != r]
    return Phases((*[Copied(p)] * at.reordered, Posted(sources, np.full(len(sources), mine), at.dests, at.sent, mine),
                   Copied(mine * len(at.held)),
                   Among("alltoallv", tuple(parts[at.group]), None, tuple(at.redistributed.tolist()),
                         tuple(at.collected.tolist())),
                   Copied(p)))


@register("locality_aware",
          mirrors="mpi-advance locality_aware alltoall_locality_aware_nonblocking (Bienz group; "
                  "Kinkead et al., arXiv 2601.17606)",
          limits={**NODE_LIMITS, "groups": (lambda k: k >= 1, "an integer >= 1 (groups per node)")},
          cost=Formula("(N-1) G (alpha_inter + c m beta_inter) + (G-1) (alpha_intra + c m beta_intra)"
                       " + (c-1) (alpha_intra + (p/c) m beta_intra) + 2 p m gamma  (G groups per node, c = q/G)",
                       LINK_PARAMS, terms),
          steps=steps, simplicity=14)
def locality_aware(comm, sendbuf, recvbuf, *, groups: int = 1, ppn: int = 0, placement: str = "block"):
    """Rank i of each group sends a whole group's blocks to rank i of every other group; groups redistribute."""
    from mpi4py import MPI

    p, rank = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    width = send.shape[1]
    parts = split_nodes(node_groups(comm, ppn, placement), groups)
    at = Aggregation.of(parts, rank)
    g, mine = at.group, parts[at.group]
    starts = np.cumsum([0] + [len(part) for part in parts]).tolist()
    by_group = np.empty_like(send) if at.reordered else send
    held = at.held.tolist()
    gathered = np.empty((len(held), len(mine), width), np.uint8)  # per held source, its rows for my group
    own = copier(gathered[held.index(rank)], by_group[starts[g]: starts[g + 1]])
    requests = [comm.Recv_init(gathered[slot], q) for slot, q in enumerate(held) if q != rank]
    requests += [comm.Send_init(by_group[starts[b]: starts[b + 1]], q)
                 for b, q in zip(at.other_groups.tolist(), at.dests.tolist())]

    local = comm.Split(g, key=rank)
    outgoing = np.empty((len(mine), len(held), width), np.uint8)
    incoming = np.empty_like(send)
    sent, came = ((blocks_each * width).tolist() for blocks_each in (at.redistributed, at.collected))
    layouts = ((sent, packed(sent).tolist()), (came, packed(came).tolist()))
    by_source = np.argsort(at.delivered)  # recv[j] = incoming[by_source[j]]
    start, wait, copy, take = MPI.Prequest.Startall, MPI.Request.Waitall, copy_function(), take_function()
    exchange, outbox, inbox = local.Alltoallv, [outgoing, layouts[0], MPI.BYTE], [incoming, layouts[1], MPI.BYTE]
    by_destination = gathered.transpose(1, 0, 2)

    def run():
        if by_group is not send:
            take(send, at.order, by_group)
        start(requests)
        own()
        wait(requests)
        copy(outgoing, by_destination)  # repack by destination inside the group
        exchange(outbox, inbox)
        take(incoming, by_source, recv)  # reorder by source

    return run, lambda: ([q.Free() for q in requests], local.Free())
