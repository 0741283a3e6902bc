"""The ring all-to-all: its steps by hand, every block home, and its cost and traffic from its own schedule.

(Its result against MPI_Alltoall at every p from 1 to 8, and its capture against what MPI sends, are
checked with every other algorithm's in test_algorithms.py and test_capture.py.)
"""
from __future__ import annotations

import pytest
from support import listed

from a2a.algos.builtin import ring
from a2a.algos.schedule import slots
from a2a.analysis import contention, model
from a2a.fabric import Switch, parse


def test_steps_by_hand():
    """4 ranks, rank 0: its 3 blocks go right; then 2 of rank 3's pass through, then 1 of rank 2's."""
    assert listed(ring.steps(4, 0)) == [(1, [(0, 1), (0, 2), (0, 3)], 3, [(3, 0), (3, 1), (3, 2)]),
                                        (1, [(3, 1), (3, 2)], 3, [(2, 0), (2, 1)]),
                                        (1, [(2, 1)], 3, [(1, 0)])]


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
def test_every_block_arrives_once_and_each_rank_sends_what_its_left_neighbour_expects(p):
    for rank in range(p):
        steps = ring.steps(p, rank)
        arrived = sorted(block for *_, received in listed(steps) for block in received if block[1] == rank)
        assert arrived == [(s, rank) for s in range(p) if s != rank]
        right = listed(ring.steps(p, (rank + 1) % p))
        assert [sent for _, sent, _, _ in listed(steps)] == [received for *_, received in right]
        slots(list(steps), rank, p)  # every block it sends, it holds


@pytest.mark.parametrize("p", [2, 5, 8])
def test_cost_and_traffic_count_the_blocks_the_schedule_sends(p):
    sent = sum(len(step.sent) for step in ring.steps(p, 0))
    terms = model.formula_for("ring").terms(model.Placement(p), 10, {})
    assert terms == {"alpha": p - 1, "beta": sent * 10}
    rounds = contention.rounds("ring", p, 10)
    assert len(rounds) == p - 1 and all(b == (a + 1) % p for messages in rounds for a, b, _ in messages)
    assert sum(size for messages in rounds for a, _, size in messages if a == 0) == sent * 10


def test_on_a_ring_no_link_carries_more_than_a_switch_port():
    """Neighbour steps load each ring link as much as each node's switch port: no contention penalty."""
    assert contention.against_switch("ring", 8, parse("ring", nodes=8)) == pytest.approx(1.0)
    assert contention.against_switch("linear", 8, parse("ring", nodes=8)) > 1.0  # a direct exchange crowds the ring
    assert contention.busiest_link_bytes("ring", 8, 1.0, Switch(8)) == sum(range(1, 8))
