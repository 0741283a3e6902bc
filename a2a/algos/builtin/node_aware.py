"""The seed mail's loop over nodes: ordered node-to-node exchange with Isend/Irecv."""
from a2a.algos.nodes import NODE_LIMITS, my_node, node_groups
from a2a.algos.registry import blocks, register


@register("node_aware", mirrors="Kutzner's node-ordered Isend/Irecv loop (Open MPI users' list, 2005)",
          limits=NODE_LIMITS)
def node_aware(comm, sendbuf, recvbuf, *, ppn: int = 0, placement: str = "block"):
    """Step i: Irecv from every rank of node n-i, Isend to every rank of node n+i, Waitall."""
    return node_steps(comm, blocks(sendbuf, comm.size), blocks(recvbuf, comm.size), ppn, placement)


@register("node_aware", collective="alltoallv", limits=NODE_LIMITS,
          mirrors="Kutzner's node-ordered loop with per-peer counts")
def node_aware_v(comm, send, recv, *, ppn: int = 0, placement: str = "block"):
    """The same node-ordered steps with per-peer counts."""
    return node_steps(comm, send.blocks(), recv.blocks(), ppn, placement)


def node_steps(comm, send, recv, ppn: int, placement: str):
    """The schedule on per-peer byte blocks (rows of one array, or views of uneven length)."""
    from mpi4py import MPI

    nodes = node_groups(comm, ppn, placement)
    n, count = my_node(nodes, comm.rank), len(nodes)
    steps = []
    for i in range(count):
        sources, targets = nodes[(n - i) % count], nodes[(n + i) % count]
        steps.append([comm.Recv_init(recv[q], q) for q in sources]
                     + [comm.Send_init(send[q], q) for q in targets])
    start, wait = MPI.Prequest.Startall, MPI.Request.Waitall

    def run():
        for requests in steps:
            start(requests)
            wait(requests)

    return run, lambda: [q.Free() for step in steps for q in step]
