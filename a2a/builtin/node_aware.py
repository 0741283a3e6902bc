"""The seed mail's loop over nodes: ordered node-to-node exchange with Isend/Irecv."""
from ..registry import blocks, register
from ..topology import PLACEMENTS, my_node, node_groups

NODE_LIMITS = {
    "ppn": (lambda k: k >= 0, "0 (nodes from MPI) or K >= 1 ranks per virtual node"),
    "placement": (lambda s: s in PLACEMENTS, " or ".join(PLACEMENTS)),
}


@register("node_aware", mirrors="Kutzner's node-ordered Isend/Irecv loop (Open MPI users' list, 2005)",
          limits=NODE_LIMITS)
def node_aware(comm, sendbuf, recvbuf, *, ppn: int = 0, placement: str = "block"):
    """Step i: Irecv from every rank of node n-i, Isend to every rank of node n+i, Waitall."""
    from mpi4py import MPI

    p = comm.size
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
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
