"""Two levels: gather on node leaders, one message per pair of nodes, scatter on the node."""
import numpy as np

from ..registry import blocks, register
from ..topology import my_node, node_groups
from .node_aware import NODE_LIMITS


@register("hierarchical", mirrors="leader-based two-level alltoall (as in MVAPICH/HAN-style designs)",
          limits=NODE_LIMITS)
def hierarchical(comm, sendbuf, recvbuf, *, ppn: int = 0, placement: str = "block"):
    """Gather each node's buffers on its leader, leaders exchange (Alltoallv), leaders scatter."""
    return through_leaders(comm, sendbuf, recvbuf, node_groups(comm, ppn, placement))


def through_leaders(comm, sendbuf, recvbuf, nodes: list[list[int]]):
    """The two-level exchange with the first rank of each group in `nodes` as its leader."""
    from mpi4py import MPI

    p, rank = comm.size, comm.rank
    n = my_node(nodes, rank)
    width = sendbuf.nbytes // p
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    local = comm.Split(n, key=rank)
    is_leader = rank == nodes[n][0]
    leaders = comm.Split(0 if is_leader else MPI.UNDEFINED, key=rank)
    if not is_leader:
        def run():
            local.Gather(send, None, root=0)
            local.Scatter(None, recv, root=0)
        return run, local.Free

    here = len(nodes[n])
    gathered, outgoing, incoming, scattered = (np.empty((here * p, width), np.uint8) for _ in range(4))
    pack, unpack = leader_permutations(nodes, n, p)
    outbound = [len(members) * here * width for members in nodes]
    layout = (outbound, np.cumsum([0] + outbound[:-1]).tolist())
    into_outgoing, into_scattered = np.argsort(pack), np.argsort(unpack)  # gathers as scatters
    exchange = leaders.Alltoallv

    def run():
        local.Gather(send, gathered, root=0)
        outgoing[into_outgoing] = gathered
        exchange([outgoing, layout, MPI.BYTE], [incoming, layout, MPI.BYTE])
        scattered[into_scattered] = incoming
        local.Scatter(scattered, recv, root=0)

    return run, lambda: (local.Free(), leaders.Free())


def leader_permutations(nodes: list[list[int]], n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Row orders on leader n: gathered (local source, dest) -> outgoing, incoming -> (local dest, source).

    Outgoing to node b holds, for each destination m on b, the blocks of every local source
    in local order; so incoming from node c holds, for each local destination, c's sources.
    """
    here = len(nodes[n])
    pack = [source * p + dest for members in nodes for dest in members for source in range(here)]
    unpack = np.empty(here * p, dtype=np.intp)
    offset = 0
    for sources in nodes:
        for dest in range(here):
            for i, source in enumerate(sources):
                unpack[dest * p + source] = offset + dest * len(sources) + i
        offset += here * len(sources)
    return np.array(pack, dtype=np.intp), unpack
