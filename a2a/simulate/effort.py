"""What replaying a point costs beside the others, for the status line's ETA: the messages it replays.

A simulator's wall time grows with the messages it moves, not with the bytes: a 512-rank linear
point replays 512 x 511 of them, a Bruck point 512 x 9, and a sweep's points differ by orders of
magnitude. Before a variant is captured its formula's rounds and posts per rank stand in
(a2a.algos.cost); once captured, its schedule's own count.
"""
from __future__ import annotations

from a2a.algos.cost import Placement
from a2a.algos.facts import formula
from a2a.algos.registry import with_defaults
from a2a.schedules.events import Collective, Isend, Messages, Posts, Schedule, Send
from a2a.sweep.config import OVERLAP
from a2a.sweep.grid import Point


def expected(point: Point, nnodes: int) -> float:
    """The messages a point replays, from its algorithm's formula (every peer once where it has none); twice under
    overlap timing (pure, then overall)."""
    p = point.nprocs
    try:
        options = with_defaults(point.algorithm, {k: str(v) for k, v in point.variant.options.items()})
        terms = formula(point.algorithm).terms(Placement(p, nnodes), float(point.bytes_per_peer), options)
        per_rank = terms.get("alpha_msg") or sum(v for k, v in terms.items() if k.startswith("alpha"))
    except Exception:  # a plug-in's formula, options a formula does not read: the direct exchange's count
        per_rank = p - 1
    return _replays(point) * p * max(float(per_rank), 1.0)


def captured(point: Point, schedule: Schedule) -> float:
    """The messages a point of this captured schedule replays (a collective counts as one message to each other
    member), twice under overlap timing."""
    return _replays(point) * max(sum(_sends(event) for rank in schedule.events for event in rank), 1)


def _sends(event: object) -> int:
    if isinstance(event, (Isend, Send)):
        return 1
    if isinstance(event, Messages):
        return len(event.dests)
    if isinstance(event, Posts):
        return int(event.outgoing.sum())
    if isinstance(event, Collective):
        return len(event.members) - 1
    return 0


def _replays(point: Point) -> int:
    return 2 if point.timing == OVERLAP else 1
