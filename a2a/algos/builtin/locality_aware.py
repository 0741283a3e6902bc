"""Aggregate across nodes first, then redistribute inside the node (mpi-advance locality-aware).

Cost with G groups per node of c = q/G ranks each: phase 1 sends c m bytes to the rank of the
same index in each of the G-1 other groups of the node and the G (N-1) groups elsewhere;
phase 2 (Alltoallv in the group) sends (p/c) m to each of c-1 members; repack and reorder copy p m.
  T = (N-1) G (alpha_inter + c m beta_inter) + (G-1) (alpha_intra + c m beta_intra)
      + (c-1) (alpha_intra + (p/c) m beta_intra) + 2 p m gamma
"""
import numpy as np

from a2a.algos.buffers import packed
from a2a.algos.builtin.hierarchical import LINK_PARAMS
from a2a.algos.cost import Formula, Placement, leader_split
from a2a.algos.nodes import NODE_LIMITS, my_node, node_groups, split_nodes
from a2a.algos.prebuilt import copier, copy_function, take_function
from a2a.algos.registry import blocks, register


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """See the module's docstring."""
    n, groups, c = leader_split(s, options, "groups")
    p, others = n.nprocs, n.nnodes - 1
    return {"alpha_intra": groups - 1 + c - 1, "beta_intra": ((groups - 1) * c + (c - 1) * p / c) * m,
            "alpha_inter": others * groups, "beta_inter": others * groups * c * m, "gamma": 2 * p * m}


@register("locality_aware",
          mirrors="mpi-advance locality_aware alltoall_locality_aware_nonblocking (Bienz group; "
                  "Kinkead et al., arXiv 2601.17606)",
          limits={**NODE_LIMITS, "groups": (lambda k: k >= 1, "an integer >= 1 (groups per node)")},
          cost=Formula("(N-1) G (alpha_inter + c m beta_inter) + (G-1) (alpha_intra + c m beta_intra)"
                       " + (c-1) (alpha_intra + (p/c) m beta_intra) + 2 p m gamma  (G groups per node, c = q/G)",
                       LINK_PARAMS, terms),
          simplicity=14)
def locality_aware(comm, sendbuf, recvbuf, *, groups: int = 1, ppn: int = 0, placement: str = "block"):
    """Rank i of each group sends a whole group's blocks to rank i of every other group; groups redistribute."""
    from mpi4py import MPI

    p, rank = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    width = send.shape[1]
    parts = split_nodes(node_groups(comm, ppn, placement), groups)
    g = my_node(parts, rank)
    mine, i = parts[g], parts[g].index(rank)
    order = np.array([q for part in parts for q in part], dtype=np.intp)  # send rows by destination group
    starts = np.cumsum([0] + [len(part) for part in parts]).tolist()
    by_group = send if (order == np.arange(p)).all() else np.empty_like(send)
    held = collected(parts, g, i)
    gathered = np.empty((len(held), len(mine), width), np.uint8)  # per held source, its rows for my group
    own = copier(gathered[held.index(rank)], by_group[starts[g]: starts[g + 1]])
    requests = [comm.Send_init(by_group[starts[b]: starts[b + 1]], part[i % len(part)])
                for b, part in enumerate(parts) if b != g]
    requests += [comm.Recv_init(gathered[slot], q) for slot, q in enumerate(held) if q != rank]

    local = comm.Split(g, key=rank)
    holdings = [collected(parts, g, j) for j in range(len(mine))]
    outgoing = np.empty((len(mine), len(held), width), np.uint8)
    incoming = np.empty_like(send)
    sent = [len(held) * width] * len(mine)
    came = [len(h) * width for h in holdings]
    layouts = ((sent, packed(sent).tolist()), (came, packed(came).tolist()))
    sources = np.array([q for h in holdings for q in h], dtype=np.intp)  # incoming row k came from sources[k]
    by_source = np.argsort(sources)  # recv[j] = incoming[by_source[j]]
    start, wait, copy, take = MPI.Prequest.Startall, MPI.Request.Waitall, copy_function(), take_function()
    exchange, outbox, inbox = local.Alltoallv, [outgoing, layouts[0], MPI.BYTE], [incoming, layouts[1], MPI.BYTE]
    by_destination = gathered.transpose(1, 0, 2)

    def run():
        if by_group is not send:
            take(send, order, by_group)
        start(requests)
        own()
        wait(requests)
        copy(outgoing, by_destination)  # repack by destination inside the group
        exchange(outbox, inbox)
        take(incoming, by_source, recv)  # reorder by source

    return run, lambda: ([q.Free() for q in requests], local.Free())


def collected(parts: list[list[int]], g: int, i: int) -> list[int]:
    """Sources whose blocks for group g go to its member i: member k of group b sends to member k mod |g|.

    With equal groups that is member i of every group, the source's group communicator;
    with uneven groups every source still has exactly one collector in each group.
    """
    size = len(parts[g])
    return [q for part in parts for k, q in enumerate(part) if k % size == i]
