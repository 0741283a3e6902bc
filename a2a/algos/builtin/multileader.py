"""Several leaders per node, each gathering for its share of the node's ranks (mpi-advance multileader).

Cost with L leaders per node of c = q/L ranks each: hierarchical with parts of c ranks as its
groups. A leader gathers (c-1) p m, packs c p m, exchanges c^2 m with L-1 leaders on its node
and L (N-1) on the others (Alltoallv), unpacks and scatters. L = 1 is hierarchical's formula.
  T = 2 alpha_intra + 2 (c-1) p m beta_intra + (L-1) (alpha_intra + c^2 m beta_intra)
      + (N-1) L (alpha_inter + c^2 m beta_inter) + 2 c p m gamma
"""
from a2a.algos.builtin.hierarchical import LINK_PARAMS, leader_phases, through_leaders
from a2a.algos.cost import Formula, Placement, leader_split
from a2a.algos.nodes import NODE_LIMITS, node_groups, nodes_of_job, split_nodes
from a2a.algos.registry import register
from a2a.algos.schedule import Phases


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """See the module's docstring."""
    n, leaders, c = leader_split(s, options, "leaders")
    p, others = n.nprocs, n.nnodes - 1
    return {"alpha_intra": 2 + leaders - 1, "beta_intra": (2 * (c - 1) * p + (leaders - 1) * c * c) * m,
            "alpha_inter": others * leaders, "beta_inter": others * leaders * c * c * m, "gamma": 2 * c * p * m}


def steps(p: int, r: int, leaders: int, ppn: int, placement: str, nodes: list[list[int]]) -> Phases:
    """What the factory runs on rank r, as data, on virtual nodes of `ppn` ranks or else on `nodes`."""
    return leader_phases(p, r, split_nodes(nodes_of_job(nodes, ppn, placement), leaders))


@register("multileader",
          mirrors="mpi-advance locality_aware alltoall_multileader (Bienz group; Kinkead et al., "
                  "arXiv 2601.17606); leaders=1 is hierarchical",
          limits={**NODE_LIMITS, "leaders": (lambda k: k >= 1, "an integer >= 1 (leaders per node)")},
          cost=Formula("2 alpha_intra + 2 (c-1) p m beta_intra + (L-1) (alpha_intra + c^2 m beta_intra)"
                       " + (N-1) L (alpha_inter + c^2 m beta_inter) + 2 c p m gamma  (L leaders per node, c = q/L)",
                       LINK_PARAMS, terms),
          steps=steps, simplicity=13)
def multileader(comm, sendbuf, recvbuf, *, leaders: int = 2, ppn: int = 0, placement: str = "block"):
    """Cut each node into `leaders` runs of ranks; each run's leader gathers, leaders exchange, scatter."""
    # a node of fewer ranks than `leaders` gets one leader per rank, as the source caps n_leaders at ppn
    return through_leaders(comm, sendbuf, recvbuf, split_nodes(node_groups(comm, ppn, placement), leaders))
