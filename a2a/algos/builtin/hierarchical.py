"""Two levels: gather on node leaders, one message per pair of nodes, scatter on the node.

Cost: gather p m bytes from each of the q-1 other ranks on the node leader, leader packs (q p m
copied), exchanges q*q*m bytes with each of the N-1 other leaders (Alltoallv), unpacks (q p m)
and scatters p m to each of the q-1 others. The leader is the critical path:
  T = 2 alpha_intra + 2 (q-1) p m beta_intra + (N-1) (alpha_inter + q^2 m beta_inter) + 2 q p m gamma
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from a2a.algos.buffers import blocks, packed
from a2a.algos.cost import Formula, Placement, node_placement
from a2a.algos.nodes import NODE_LIMITS, my_node, node_groups, node_members, node_sizes, nodes_of_job
from a2a.algos.prebuilt import copier, take_function
from a2a.algos.registry import register
from a2a.algos.schedule import Among, Copied, Phases

if TYPE_CHECKING:  # factories import MPI when they run: a capture puts its stand-in in its place
    from mpi4py import MPI


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """See the module's docstring."""
    n = node_placement(s, options)
    p, q, others = n.nprocs, n.ppn, n.nnodes - 1
    return {"alpha_intra": 2, "beta_intra": 2 * (q - 1) * p * m, "alpha_inter": others,
            "beta_inter": others * q * q * m, "gamma": 2 * q * p * m}


LINK_PARAMS = ("alpha_inter", "beta_inter", "alpha_intra", "beta_intra", "gamma")


def leader_blocks(nodes: list[list[int]], n: int) -> np.ndarray:
    """Blocks node n's leader sends to, and receives from, each leader in their Alltoallv: |n| x |that node|."""
    return node_sizes(nodes) * len(nodes[n])


def leader_phases(p: int, rank: int, nodes: list[list[int]]) -> Phases:
    """What through_leaders runs on `rank`, as data: the node's Gather on its leader, on the leader the packing
    copy, the leaders' Alltoallv and the unpacking copy, then the node's Scatter."""
    n = my_node(nodes, rank)
    node, here = tuple(nodes[n]), len(nodes[n])
    leader, nothing = node[0], (0,) * here
    to_leader = (p,) + nothing[1:]
    if rank != leader:
        return Phases((Among("gather", node, leader, to_leader, nothing), Among("scatter", node, leader, nothing,
                                                                                 to_leader)))
    exchanged = tuple(leader_blocks(nodes, n).tolist())
    leaders = tuple(members[0] for members in nodes)
    return Phases((Among("gather", node, leader, to_leader, (p,) * here), Copied(here * p),
                   Among("alltoallv", leaders, None, exchanged, exchanged), Copied(here * p),
                   Among("scatter", node, leader, (p,) * here, to_leader)))


def steps(p: int, r: int, ppn: int, placement: str, nodes: list[list[int]]) -> Phases:
    """What the factory runs on rank r, as data, on virtual nodes of `ppn` ranks or else on `nodes`."""
    return leader_phases(p, r, nodes_of_job(nodes, ppn, placement))


@register("hierarchical", mirrors="leader-based two-level alltoall (as in MVAPICH/HAN-style designs)",
          limits=NODE_LIMITS,
          cost=Formula("2 alpha_intra + 2 (q-1) p m beta_intra + (N-1) (alpha_inter + q^2 m beta_inter)"
                       " + 2 q p m gamma", LINK_PARAMS, terms),
          steps=steps, simplicity=12)
def hierarchical(comm, sendbuf, recvbuf, *, ppn: int = 0, placement: str = "block"):
    """Gather each node's buffers on its leader, leaders exchange (Alltoallv), leaders scatter."""
    return through_leaders(comm, sendbuf, recvbuf, node_groups(comm, ppn, placement))


def through_leaders(comm, sendbuf, recvbuf, nodes: list[list[int]]):
    """The two-level exchange with the first rank of each group in `nodes` as its leader."""
    from mpi4py import MPI

    p = comm.size
    width = sendbuf.nbytes // p
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    n, local, leaders = node_and_leader_comms(comm, nodes)
    if leaders is None:
        def run_member():
            local.Gather(send, None, root=0)
            local.Scatter(None, recv, root=0)
        return run_member, local.Free

    here = len(nodes[n])
    gathered, outgoing, incoming, scattered = (np.empty((here * p, width), np.uint8) for _ in range(4))
    pack, unpack = leader_permutations(nodes, n, p)
    outbound = (leader_blocks(nodes, n) * width).tolist()
    layout = (outbound, packed(outbound).tolist())
    take = take_function()
    exchange, outbox, inbox = leaders.Alltoallv, [outgoing, layout, MPI.BYTE], [incoming, layout, MPI.BYTE]

    def run():
        local.Gather(send, gathered, root=0)
        take(gathered, pack, outgoing)
        exchange(outbox, inbox)
        take(incoming, unpack, scattered)
        local.Scatter(scattered, recv, root=0)

    def free():
        local.Free()
        leaders.Free()

    return run, free


def node_and_leader_comms(comm, nodes: list[list[int]]) -> tuple[int, MPI.Intracomm, MPI.Intracomm | None]:
    """(my node's index, a communicator of my node, one of the node leaders or None off the leaders).

    A node's leader is its first rank; both splits are collective over `comm`.
    """
    from mpi4py import MPI

    rank = comm.rank
    n = my_node(nodes, rank)
    local = comm.Split(n, key=rank)
    leading = rank == nodes[n][0]
    leaders = comm.Split(0 if leading else MPI.UNDEFINED, key=rank)
    return n, local, leaders if leading else None


def leader_permutations(nodes: list[list[int]], n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Row orders on leader n: gathered (local source, dest) -> outgoing, incoming -> (local dest, source).

    Outgoing to node b holds, for each destination m on b, the blocks of every local source
    in local order; so incoming from node c holds, for each local destination, c's sources.
    """
    here, sizes = len(nodes[n]), node_sizes(nodes)
    members = node_members(nodes)
    local = np.arange(here, dtype=np.intp)[:, None]
    pack = (members[:, None] + local.T * p).reshape(-1)
    before = np.repeat(np.cumsum(sizes) - sizes, sizes)  # per source: the ranks of the nodes before its node c
    # incoming from c starts at here x before; in it, local dest d's run of |c| blocks, the source's i-th
    unpack = np.empty(here * p, dtype=np.intp)
    unpack[(local * p + members).reshape(-1)] = (here * before + local * np.repeat(sizes, sizes)
                                                 + np.arange(p) - before).reshape(-1)
    return pack, unpack


@register("hierarchical", collective="alltoallv", limits=NODE_LIMITS,
          mirrors="leader-based two-level alltoallv: one message per pair of nodes")
def hierarchical_v(comm, send, recv, *, ppn: int = 0, placement: str = "block"):
    """Gatherv each node's blocks on its leader, leaders exchange one message per node pair (Alltoallv), Scatterv."""
    from mpi4py import MPI

    nodes = node_groups(comm, ppn, placement)
    n, local, leaders = node_and_leader_comms(comm, nodes)
    # this rank's blocks in peer order, as one datatype over its own buffers (no copy on this side)
    mine = [_bytes_type(list(zip(side.offsets.tolist(), side.nbytes.tolist()))) for side in (send, recv)]
    # a count of 0 where there is nothing: MPI skips it on both sides (a 1 of an empty type would be sent)
    outgoing_mine, incoming_mine = ([side.array, _count(t), t] for side, t in zip((send, recv), mine))
    sent, received = (np.array(local.gather(side.nbytes.tolist(), root=0) or [], np.int64) for side in (send, recv))
    types = list(mine)
    if leaders is None:
        def run_member():
            local.Gatherv(outgoing_mine, None, root=0)
            local.Scatterv(None, incoming_mine, root=0)
        return run_member, lambda: _free(types, local)

    # gathered: local source s's blocks in destination order; scattered: local dest m's in source order
    gathered, scattered = np.empty(int(sent.sum()), np.uint8), np.empty(int(received.sum()), np.uint8)
    sent_at = _offsets(sent)  # [s, d]: where block (local source s -> rank d) sits in gathered
    received_at = _offsets(received)  # [m, j]: where block (rank j -> local dest m) goes in scattered
    here = range(len(nodes[n]))
    # to node b: for each of its ranks d, every local source's block; from node c: for each local m, c's ranks'
    pack = [[(sent_at[s, d], sent[s, d]) for d in members for s in here] for members in nodes]
    unpack = [[(received_at[m, j], received[m, j]) for m in here for j in members] for members in nodes]
    outgoing, out_layout, copy_out = _packed(gathered, pack, into=False)
    incoming, in_layout, copy_in = _packed(scattered, unpack, into=True)
    exchange = ([outgoing, out_layout, MPI.BYTE], [incoming, in_layout, MPI.BYTE])
    gather_spec = [gathered, (sent.sum(axis=1).tolist(), _starts(sent)), MPI.BYTE]
    scatter_spec = [scattered, (received.sum(axis=1).tolist(), _starts(received)), MPI.BYTE]
    alltoallv = leaders.Alltoallv

    def run():
        local.Gatherv(outgoing_mine, gather_spec, root=0)
        for copy in copy_out:
            copy()
        alltoallv(*exchange)
        for copy in copy_in:
            copy()
        local.Scatterv(scatter_spec, incoming_mine, root=0)

    return run, lambda: _free(types, local, leaders)


def _packed(buffer: np.ndarray, groups: list[list[tuple[int, int]]], into: bool) -> tuple:
    """A buffer holding `groups` of (offset, length) blocks of `buffer` end to end, its Alltoallv layout,
    and the prebuilt copies that fill it from `buffer` (or, `into`, fill `buffer` from it).
    """
    sizes = [sum(int(n) for _, n in blocks) for blocks in groups]
    joined = np.empty(sum(sizes), np.uint8)
    copies, at = [], 0
    for group in groups:
        for offset, n in group:
            if n:
                pair = (joined[at: at + n], buffer[offset: offset + n])
                copies.append(copier(*(pair[::-1] if into else pair)))
                at += int(n)
    return joined, (sizes, packed(sizes).tolist()), copies


def _offsets(sizes: np.ndarray) -> np.ndarray:
    """Start of each entry when the rows of `sizes` are laid end to end, row after row."""
    return (np.cumsum(sizes.reshape(-1)) - sizes.reshape(-1)).reshape(sizes.shape)


def _starts(sizes: np.ndarray) -> list[int]:
    return _offsets(sizes)[:, 0].tolist() if sizes.size else []


def _bytes_type(blocks: list[tuple[int, int]]) -> object:
    """A byte datatype covering (offset, length) blocks in this order."""
    from mpi4py import MPI

    return MPI.BYTE.Create_hindexed([int(n) for _, n in blocks], [int(o) for o, _ in blocks]).Commit()


def _count(datatype) -> int:
    """1 for a datatype that holds bytes, 0 for an empty one."""
    return 1 if datatype.Get_size() else 0


def _free(types: list, *comms) -> None:
    for datatype in types:
        datatype.Free()
    for c in comms:
        c.Free()
