"""Which ranks share a node: real nodes from MPI, or virtual nodes of `ppn` ranks."""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

PLACEMENTS = ("block", "cyclic")
# The limits of the options `ppn` and `placement` that node-aware algorithms share
NODE_LIMITS = {
    "ppn": (lambda k: k >= 0, "0 (nodes from MPI) or K >= 1 ranks per virtual node"),
    "placement": (lambda s: s in PLACEMENTS, " or ".join(PLACEMENTS)),
}


def node_groups(comm: Any, ppn: int = 0, placement: str = "block") -> list[list[int]]:
    """Ranks of `comm` grouped by node, each node's ranks ascending, nodes by lowest rank.

    ppn=0 asks MPI (Split_type SHARED). ppn=K makes virtual nodes of K ranks: "block" puts
    ranks 0..K-1 on node 0 (a last node may have fewer), "cyclic" deals ranks round-robin
    over ceil(size/K) nodes, as `--map-by node` does.
    """
    if ppn:
        return virtual_nodes(comm.size, ppn, placement)
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    lowest = local.allreduce(comm.rank, op=MPI.MIN)
    local.Free()
    return grouped(comm.allgather(lowest))


def nodes_of_job(nodes: list[list[int]], ppn: int, placement: str) -> list[list[int]]:
    """What node_groups gives on a job whose ranks MPI places on `nodes`: virtual nodes where `ppn` asks for them."""
    return virtual_nodes(sum(map(len, nodes)), ppn, placement) if ppn else nodes


def virtual_nodes(size: int, ppn: int, placement: str) -> list[list[int]]:
    """`size` ranks on virtual nodes of `ppn` ranks, placed as node_groups says."""
    nnodes = -(-size // ppn)
    return grouped([r // ppn if placement == "block" else r % nnodes for r in range(size)])


def grouped(node_of: list[int]) -> list[list[int]]:
    """Ranks grouped by the node each is on, each node's ranks ascending, nodes by lowest rank.

    In numpy: a capture runs this on every one of thousands of ranks."""
    nodes = np.asarray(node_of)
    ranks = np.argsort(nodes, kind="stable")  # by node, ascending within each
    starts = np.flatnonzero(np.r_[True, nodes[ranks[1:]] != nodes[ranks[:-1]]])
    flat, bounds = ranks.tolist(), [*starts.tolist(), len(ranks)]
    return [flat[bounds[k]: bounds[k + 1]] for k in np.argsort(ranks[starts]).tolist()]


def node_sizes(nodes: list[list[int]]) -> np.ndarray:
    """The number of ranks on each node."""
    return np.fromiter(map(len, nodes), np.intp, len(nodes))


def node_members(nodes: list[list[int]]) -> np.ndarray:
    """Every rank, node by node."""
    return np.fromiter(itertools.chain.from_iterable(nodes), np.intp, sum(map(len, nodes)))


def one_per_node(size: int) -> list[list[int]]:
    """`size` ranks, each on a node of its own."""
    return [[r] for r in range(size)]


def my_node(nodes: list[list[int]], rank: int) -> int:
    """Index of the node that holds `rank`."""
    return next(i for i, members in enumerate(nodes) if rank in members)


def node_index(sizes: np.ndarray, members: np.ndarray, rank: int) -> int:
    """my_node from the nodes' node_sizes and node_members, where they are at hand (a schedule read at thousands of
    ranks does this on every rank)."""
    return int(np.searchsorted(np.cumsum(sizes), np.flatnonzero(members == rank)[0], side="right"))


def split_nodes(nodes: list[list[int]], parts: int) -> list[list[int]]:
    """Each node's ranks cut into min(parts, its size) runs of consecutive members, sizes within one.

    Ordered by lowest rank, as node_groups orders nodes. A one-rank node's run is its own list, not a copy (at one
    rank per node a capture's ranks would each hold p copies).
    """
    groups = []
    for members in nodes:
        if len(members) == 1:
            groups.append(members)
            continue
        if len(members) <= parts:  # a run per member
            groups += [[m] for m in members]
            continue
        size, extra = divmod(len(members), parts)
        starts = [k * size + min(k, extra) for k in range(parts + 1)]
        groups += [members[a:b] for a, b in zip(starts, starts[1:])]
    return sorted(groups)
