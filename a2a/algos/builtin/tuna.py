"""TuNA (Fan et al., arXiv 2411.02581): tunable-radix two-phase Bruck for uneven blocks.

A round that moves a single block sends it straight home, point to point; radix p-1 makes
every round direct (a spread-out exchange). Cost on a count matrix: two-phase Bruck's replay
at this radix, one latency for the direct rounds.
"""
from a2a.algos.builtin.bruck import RADIX
from a2a.algos.builtin.two_phase_bruck import forwarded, uneven_bruck
from a2a.algos.cost import MatrixCost, option
from a2a.algos.registry import register


def used_radix(radix: int, p: int) -> int:
    """The radix TuNA runs: at least 2, at most p - 1."""
    return max(2, min(radix, p - 1))


@register("tuna", collective="alltoallv",
          limits={"radix": (RADIX["radix"][0], "an integer >= 2 (at most p - 1 is used, as TuNA does)")},
          mirrors="TuNA, tunable-radix non-uniform Bruck (Fan et al., arXiv 2411.02581)",
          cost=MatrixCost("two-phase Bruck's rounds at the radix used; single-block rounds direct",
                          lambda counts, itemsize, options: forwarded(
                              counts, itemsize, used_radix(option(options, "radix"), len(counts)), direct=True)),
          simplicity=18)
def tuna(comm, send, recv, *, radix: int = 2):
    """Radix-k two-phase Bruck; a round that moves one block sends it straight home (radix p-1: spread-out)."""
    return uneven_bruck(comm, send, recv, used_radix(radix, comm.size), direct=True)
