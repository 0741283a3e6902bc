"""Link contention: the bytes an algorithm's rounds put on the busiest link of a topology.

An all-to-all runs in rounds; in each round every rank sends some messages at once. A round
cannot end before its busiest link has carried its load, so the bandwidth term of an
algorithm on a topology is sum over rounds of (bytes on that round's most loaded link / the
link's capacity), with messages routed as a2a/fabric.py routes them (dimension order on a
torus). On a switch with one rank per node that is exactly the bytes one rank sends, the
coefficient of beta in the Hockney formulas of a2a/analysis/model.py; on a ring or a torus, messages
that share links add up. Ranks are placed in blocks: rank r on node r // q.

`rounds` gives each schedule's messages; an algorithm without one (native, plug-ins) is
taken as a direct exchange with everything in flight at once, which is what libraries do
for large messages.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from a2a.algos.builtin.bruck import bruck_rounds
from a2a.algos.builtin.pairwise import partners
from a2a.algos.builtin.throttled import windows
from a2a.algos.registry import with_defaults
from a2a.fabric import Fabric, Switch, max_link_load

Message = tuple[int, int, float]  # (source rank, destination rank, bytes)
Round = list[Message]


def pairwise(p: int, m: float, schedule: str) -> list[Round]:
    """Step s: every rank r sends m bytes to its step-s partner (r + s mod p, or r xor s)."""
    steps = [partners(p, r, schedule) for r in range(p)]
    return [[(r, steps[r][s][0], m) for r in range(p)] for s in range(p - 1)]


def everything(p: int, m: float) -> list[Round]:
    """One round: every rank sends m bytes to every other rank at once (linear)."""
    return [[(r, d, m) for r in range(p) for d in range(p) if d != r]]


def batches(p: int, m: float, window: int) -> list[Round]:
    """Rounds of `window` peers per rank at once: offsets 1..w, then w+1..2w, ... (throttled)."""
    return [[(r, (r + s) % p, m) for r in range(p) for s in shifts] for shifts in windows(p, max(1, window))]


def bruck_steps(p: int, radix: int) -> list[tuple[int, int]]:
    """Bruck's rounds as (offset, blocks): round (d, v) sends the blocks whose digit d is v to r + v k^d."""
    return [(digit * distance, len(moved)) for distance, digit, moved in bruck_rounds(p, radix)]


def bruck(p: int, m: float, radix: int) -> list[Round]:
    """Every rank r sends `blocks` x m bytes to r + offset, one round per Bruck step."""
    return [[(r, (r + offset) % p, blocks * m) for r in range(p)] for offset, blocks in bruck_steps(p, radix)]


Schedule = Callable[[int, float, dict], "list[Round]"]
SCHEDULES: dict[str, Schedule] = {
    "pairwise": lambda p, m, o: pairwise(p, m, o["schedule"]),
    "linear": lambda p, m, o: everything(p, m),
    "throttled": lambda p, m, o: batches(p, m, int(o["window"])),
    "bruck": lambda p, m, o: bruck(p, m, int(o["radix"])),
}


def rounds(algorithm: str, p: int, m: float, options: dict | None = None) -> list[Round]:
    """The messages of each round of an algorithm (a direct exchange when it has no schedule here)."""
    return SCHEDULES.get(algorithm, SCHEDULES["linear"])(p, m, with_defaults(algorithm, options or {}))


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
