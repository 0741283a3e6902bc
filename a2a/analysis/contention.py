"""Link contention: the bytes an algorithm's rounds put on the busiest link of a topology.

An all-to-all runs in rounds; in each round every rank sends some messages at once. A round
cannot end before its busiest link has carried its load, so the bandwidth term of an
algorithm on a topology is sum over rounds of (bytes on that round's most loaded link / the
link's capacity), with messages routed as a2a/fabric.py routes them (dimension order on a
torus). On a switch with one rank per node that is exactly the bytes one rank sends, the
coefficient of beta in the algorithms' Hockney formulas; on a ring or a torus, messages
that share links add up. Ranks are placed in blocks: rank r on node r // q.

Each algorithm states its rounds in its own file (register's `traffic`, or round k of every
rank's `steps`); one without either (native, plug-ins) is taken as a direct exchange with
everything in flight at once, which is what libraries do for large messages.
"""
from __future__ import annotations

import math

from a2a.algos.cost import Round
from a2a.algos.facts import traffic
from a2a.algos.registry import with_defaults
from a2a.fabric import Fabric, Switch, max_link_load


def rounds(algorithm: str, p: int, m: float, options: dict | None = None) -> list[Round]:
    """The messages of each round of an algorithm (a direct exchange when it states no traffic)."""
    return traffic(algorithm)(p, m, with_defaults(algorithm, options or {}))


def busiest_link_bytes(algorithm: str, p: int, m: float, net: Fabric, options: dict | None = None) -> float:
    """Sum over rounds of the bytes (over capacity) on the round's most loaded link; p ranks on net's nodes."""
    per_node = math.ceil(p / net.nodes)
    total = 0.0
    for messages in rounds(algorithm, p, m, options):
        between = [(a // per_node, b // per_node, size) for a, b, size in messages if a // per_node != b // per_node]
        total += max_link_load(net, between)
    return total


def against_switch(algorithm: str, p: int, net: Fabric, options: dict | None = None) -> float:
    """How many times the busiest-link bytes of `net` are a switch's of the same nodes (1 with no traffic)."""
    switch = busiest_link_bytes(algorithm, p, 1.0, Switch(net.nodes), options)
    return busiest_link_bytes(algorithm, p, 1.0, net, options) / switch if switch else 1.0
