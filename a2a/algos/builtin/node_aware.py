"""The seed mail's loop over nodes: ordered node-to-node exchange with Isend/Irecv.

Cost: step 0 exchanges with the q ranks of the own node, step i >= 1 with the q ranks of node
n+i; the q messages of one step overlap.
  T = alpha_intra + (q-1) m beta_intra + (N-1) (alpha_inter + q m beta_inter)
beta_inter is per byte one rank sends; the q ranks of a node share its network link, so it
includes that sharing at the measured q.
"""
from a2a.algos.cost import DIRECT, Formula, Placement, node_placement
from a2a.algos.nodes import NODE_LIMITS, my_node, node_groups
from a2a.algos.registry import blocks, register


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """alpha_intra + (q-1) m beta_intra + (N-1) (alpha_inter + q m beta_inter)."""
    n = node_placement(s, options)
    q, others = n.ppn, n.nnodes - 1
    return {"alpha_intra": 1, "beta_intra": (q - 1) * m, "alpha_inter": others, "beta_inter": others * q * m}


@register("node_aware", mirrors="Kutzner's node-ordered Isend/Irecv loop (Open MPI users' list, 2005)",
          limits=NODE_LIMITS,
          cost=Formula("alpha_intra + (q-1) m beta_intra + (N-1) (alpha_inter + q m beta_inter)",
                       ("alpha_inter", "beta_inter", "alpha_intra", "beta_intra"), terms),
          simplicity=11)
def node_aware(comm, sendbuf, recvbuf, *, ppn: int = 0, placement: str = "block"):
    """Step i: Irecv from every rank of node n-i, Isend to every rank of node n+i, Waitall."""
    return node_steps(comm, blocks(sendbuf, comm.size), blocks(recvbuf, comm.size), ppn, placement)


@register("node_aware", collective="alltoallv", limits=NODE_LIMITS, cost=DIRECT,
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
