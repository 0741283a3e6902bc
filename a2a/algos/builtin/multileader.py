"""Several leaders per node, each gathering for its share of the node's ranks (mpi-advance multileader)."""
from a2a.algos.builtin.hierarchical import through_leaders
from a2a.algos.nodes import NODE_LIMITS, node_groups, split_nodes
from a2a.algos.registry import register


@register("multileader",
          mirrors="mpi-advance locality_aware alltoall_multileader (Bienz group; Kinkead et al., "
                  "arXiv 2601.17606); leaders=1 is hierarchical",
          limits={**NODE_LIMITS, "leaders": (lambda k: k >= 1, "an integer >= 1 (leaders per node)")})
def multileader(comm, sendbuf, recvbuf, *, leaders: int = 2, ppn: int = 0, placement: str = "block"):
    """Cut each node into `leaders` runs of ranks; each run's leader gathers, leaders exchange, scatter."""
    # a node of fewer ranks than `leaders` gets one leader per rank, as the source caps n_leaders at ppn
    return through_leaders(comm, sendbuf, recvbuf, split_nodes(node_groups(comm, ppn, placement), leaders))
