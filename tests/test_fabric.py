"""Topology specs: parsing, links and dimension-order routes, checked against routes worked out by hand."""
from __future__ import annotations

import pytest

from a2a import fabric
from a2a.errors import BadOption


def nodes_on(route: list[fabric.Link]) -> list[str]:
    """The vertices a route visits, its start included."""
    return [route[0][0], *(b for _, b in route)] if route else []


def test_torus_2x4_numbers_nodes_row_major_and_routes_x_then_y():
    torus = fabric.parse("torus:2x4")
    assert isinstance(torus, fabric.Torus)
    assert (torus.nodes, torus.spec, torus.kind) == (8, "torus:2x4", "torus")
    assert [torus.coords(k) for k in (0, 3, 4, 6)] == [(0, 0), (0, 3), (1, 0), (1, 2)]
    # 0=(0,0) -> 6=(1,2): x first (0 -> 4), then y two steps the + way on the tie (4 -> 5 -> 6)
    assert nodes_on(torus.route(0, 6)) == ["n0", "n4", "n5", "n6"]
    assert torus.forwarders(0, 6) == [4, 5]
    # 4=(1,0) -> 3=(0,3): x (4 -> 0), then y the short way round: -1 wraps 0 -> 3
    assert nodes_on(torus.route(4, 3)) == ["n4", "n0", "n3"]
    # 5=(1,1) -> 3=(0,3): x (5 -> 1), then y +2 or -2: the + way, 1 -> 2 -> 3
    assert nodes_on(torus.route(5, 3)) == ["n5", "n1", "n2", "n3"]
    assert nodes_on(torus.route(7, 4)) == ["n7", "n4"]  # wrap-around in y
    assert torus.route(2, 2) == [] and torus.hops(2, 2) == 0
    # the size-2 dimension has one cable per column; the size-4 one a ring of 4 per row
    assert len(torus.links()) == 2 * 12 and len(torus.cables()) == 12
    assert (0, 4, 0) in torus.cables() and (4, 7, 1) in torus.cables()
    assert max(torus.hops(a, b) for a in range(8) for b in range(8)) == 3  # 1 + 2


def test_every_route_uses_existing_links_and_is_minimal():
    for spec, nodes in (("torus:3x4", None), ("torus:2x2x3", None), ("ring", 7), ("switch", 5),
                        ("fattree:3x2", None)):
        net = fabric.parse(spec, nodes)
        links = set(net.links())
        assert len(links) == len(net.links()), f"{spec}: a link listed twice"
        for a in range(net.nodes):
            for b in range(net.nodes):
                route = net.route(a, b)
                assert set(route) <= links, f"{spec}: {a}->{b} uses a link that does not exist"
                if route:
                    assert route[0][0] == fabric.vertex(a) and route[-1][1] == fabric.vertex(b)
                    assert all(x[1] == y[0] for x, y in zip(route, route[1:])), f"{spec}: {a}->{b} broken"
    torus = fabric.parse("torus:3x4")
    assert isinstance(torus, fabric.Torus)
    # minimal: in a torus the hop count is the sum over dimensions of the ring distances
    for a in range(12):
        for b in range(12):
            (xa, ya), (xb, yb) = torus.coords(a), torus.coords(b)
            ring = lambda d, n: min(d % n, -d % n)  # noqa: E731
            assert torus.hops(a, b) == ring(xb - xa, 3) + ring(yb - ya, 4)


def test_ring_goes_the_short_way_and_the_plus_way_on_a_tie():
    ring = fabric.parse("ring", 8)
    assert (ring.spec, ring.kind, ring.nodes) == ("ring", "ring", 8)
    assert nodes_on(ring.route(0, 5)) == ["n0", "n7", "n6", "n5"]
    assert nodes_on(ring.route(0, 4)) == ["n0", "n1", "n2", "n3", "n4"]
    assert nodes_on(ring.route(6, 1)) == ["n6", "n7", "n0", "n1"]
    assert len(ring.links()) == 16
    assert fabric.parse("ring", 2).links() == [("n0", "n1"), ("n1", "n0")]


def test_switch_and_fattree_routes_go_through_their_switches():
    switch = fabric.parse("switch", 4)
    assert switch.route(1, 3) == [("n1", "sw"), ("sw", "n3")]
    assert switch.forwarders(1, 3) == [] and len(switch.links()) == 8
    tree = fabric.parse("fattree:2x4,oversub=2")
    assert (tree.nodes, tree.spec) == (8, "fattree:2x4,oversub=2")
    assert tree.route(0, 3) == [("n0", "leaf0"), ("leaf0", "n3")]
    assert tree.route(2, 5) == [("n2", "leaf0"), ("leaf0", "spine"), ("spine", "leaf1"), ("leaf1", "n5")]
    assert tree.capacity(("leaf0", "spine")) == 2.0 and tree.capacity(("n0", "leaf0")) == 1.0
    assert fabric.parse("fattree:2x4,oversub=1").spec == "fattree:2x4"


def test_link_loads_count_shared_links():
    ring = fabric.parse("ring", 4)
    # 0->2 (tie: + way, over n1) and 1->2 share the link n1->n2
    loads = fabric.link_loads(ring, [(0, 2, 100), (1, 2, 50), (3, 3, 999)])
    assert loads == {("n0", "n1"): 100, ("n1", "n2"): 150}
    # everyone sends to everyone on a switch: each node link carries p-1 messages each way
    switch = fabric.parse("switch", 4)
    everyone = [(a, b, 10) for a in range(4) for b in range(4) if a != b]
    assert fabric.max_link_load(switch, everyone) == 30
    # a fat tree with 2:1 oversubscription: 4 nodes per leaf send 2 x 10 B each across
    tree = fabric.parse("fattree:2x2,oversub=2")
    across = [(a, b, 10) for a in range(4) for b in range(4) if a // 2 != b // 2]
    assert fabric.link_loads(tree, across)[("leaf0", "spine")] == 40 / 1.0  # capacity 2/2 = 1
    assert fabric.max_link_load(tree, []) == 0.0


@pytest.mark.parametrize("spec, nodes, message", [
    ("mesh", 8, "topology 'mesh' is unknown; accepted: switch, ring, torus:AxB[xC...], "
                "fattree:LEAVESxNODES[,oversub=R]"),
    ("torus:2x", None, "accepted: torus:AxB[xC...]"),
    ("torus:0x4", None, "accepted: torus:AxB[xC...]"),
    ("torus:2x4", 6, "torus:2x4 has 8 nodes but --nodes is 6"),
    ("fattree:2x4,oversub=0", None, "with R > 0"),
    ("fattree:2", None, "accepted: fattree:LEAVESxNODES[,oversub=R]"),
    ("fattree:2x4", 4, "fattree:2x4 has 8 nodes but --nodes is 4"),
    ("switch:3", 3, "`switch` takes no parameters"),
    ("ring", None, "topology 'ring' needs a node count"),
    ("switch", 0, "nodes=0; accepted: 1 or more"),
])
def test_bad_specs_say_what_is_accepted(spec: str, nodes: int | None, message: str):
    with pytest.raises(BadOption) as caught:
        fabric.parse(spec, nodes)
    assert message in str(caught.value)


def test_nodes_outside_the_fabric_are_refused():
    with pytest.raises(BadOption, match="node 8 is not in torus:2x4; accepted: 0 to 7"):
        fabric.parse("torus:2x4").route(0, 8)
    with pytest.raises(BadOption, match="node -1 is not in switch"):
        fabric.parse("switch", 2).route(-1, 0)


def test_specs_round_trip_and_ignore_case_and_spaces():
    for spec in ("switch", "ring", "torus:2x4", "torus:8x8x8", "fattree:4x8,oversub=2.5"):
        net = fabric.parse(spec, 8 if spec in ("switch", "ring") else None)
        assert fabric.parse(net.spec, net.nodes if spec in ("switch", "ring") else None) == net
    assert fabric.parse(" Torus:2X4 ") == fabric.parse("torus:2x4")
    assert fabric.parse("torus:8x8x8").nodes == 512
