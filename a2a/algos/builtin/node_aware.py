"""The seed mail's loop over nodes: ordered node-to-node exchange with Isend/Irecv.

Cost: step 0 exchanges with the q ranks of the own node, step i >= 1 with the q ranks of node
n+i; the q messages of one step overlap.
  T = alpha_intra + (q-1) m beta_intra + (N-1) (alpha_inter + q m beta_inter)
beta_inter is per byte one rank sends; the q ranks of a node share its network link, so it
includes that sharing at the measured q.
"""

import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.cost import DIRECT, Formula, Placement, node_placement
from a2a.algos.nodes import NODE_LIMITS, node_groups, node_index, node_members, node_sizes, nodes_of_job
from a2a.algos.registry import register
from a2a.algos.schedule import Batches, batch_plan


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """alpha_intra + (q-1) m beta_intra + (N-1) (alpha_inter + q m beta_inter)."""
    n = node_placement(s, options)
    q, others = n.ppn, n.nnodes - 1
    return {"alpha_intra": 1, "beta_intra": (q - 1) * m, "alpha_inter": others, "beta_inter": others * q * m}


def node_batches(nodes: list[list[int]], rank: int) -> Batches:
    """Batch i receives from every rank of node n-i and sends to every rank of node n+i (mod the node count),
    for the own node n = the one of `rank`; `rank` itself is left out (its block is copied first), and so
    is batch 0 when no other rank shares its node."""
    sizes, members = node_sizes(nodes), node_members(nodes)
    starts = np.cumsum(sizes) - sizes
    n = node_index(sizes, members, rank)
    found = []
    for direction in (-1, 1):
        order = (n + direction * np.arange(len(nodes))) % len(nodes)
        lengths = sizes[order]
        ends = np.cumsum(lengths)
        # the nodes' ranks in this order, end to end: the j-th of run k is members[starts[order[k]] + j]
        ranks = members[np.repeat(starts[order] - (ends - lengths), lengths) + np.arange(ends[-1])]
        found += [ranks[ranks != rank], ends[1:] - 1 if lengths[0] == 1 else ends - 1]
    return Batches(*found)


def steps(p: int, r: int, ppn: int, placement: str, nodes: list[list[int]]) -> Batches:
    """What node_steps runs after copying its own block, on virtual nodes of `ppn` ranks or else on `nodes`."""
    return node_batches(nodes_of_job(nodes, ppn, placement), r)


@register("node_aware", mirrors="Kutzner's node-ordered Isend/Irecv loop (Open MPI users' list, 2005)",
          limits=NODE_LIMITS,
          cost=Formula("alpha_intra + (q-1) m beta_intra + (N-1) (alpha_inter + q m beta_inter)",
                       ("alpha_inter", "beta_inter", "alpha_intra", "beta_intra"), terms),
          steps=steps, simplicity=11)
def node_aware(comm, sendbuf, recvbuf, *, ppn: int = 0, placement: str = "block"):
    """Copy the own block; step i: Irecv from every rank of node n-i, Isend to every rank of node n+i, Waitall."""
    return node_steps(comm, blocks(sendbuf, comm.size), blocks(recvbuf, comm.size), ppn, placement)


@register("node_aware", collective="alltoallv", limits=NODE_LIMITS, cost=DIRECT,
          mirrors="Kutzner's node-ordered loop with per-peer counts")
def node_aware_v(comm, send, recv, *, ppn: int = 0, placement: str = "block"):
    """The same node-ordered steps with per-peer counts."""
    return node_steps(comm, send.blocks(), recv.blocks(), ppn, placement)


def node_steps(comm, send, recv, ppn: int, placement: str):
    """The schedule on per-peer byte blocks (rows of one array, or views of uneven length)."""
    return batch_plan(comm, send, recv, node_batches(node_groups(comm, ppn, placement), comm.rank))
