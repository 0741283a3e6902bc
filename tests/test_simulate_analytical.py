"""The analytical backend: its routes as SimGrid's platforms route, its round times against hand sums, its record read
as a simulated one."""
from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from support import bench_here

from a2a import fabric
from a2a.analysis import validate
from a2a.analysis.decide import decided
from a2a.errors import A2AError
from a2a.simulate import analytical
from a2a.simulate.analytical_run import schedule_rounds
from a2a.simulate.rounds import RankRounds, rank_rounds, table
from a2a.simulate.wires import link_bytes, wires

RATE, LATENCY, COPY = 12.5e9, 1e-6, 1e12  # 100Gbps,1us and a copy too fast to count
BUILT_INS = ["bine", "bruck", "bruck_zero_copy", "dimensional", "hierarchical", "linear", "linear_sync",
             "locality_aware", "multileader", "node_aware", "pairwise", "pairwise_inplace", "parallel_split", "ring",
             "throttled"]


def ideal(copy: float = COPY) -> analytical.Costs:
    return analytical.Costs(RATE, LATENCY, copy, network=analytical.Network.of("ideal"))


def torus_route(dims: tuple[int, ...], a: int, b: int) -> list[tuple[int, int]]:
    """SimGrid's TorusZone route, hop by hop: dimension 0 (varying fastest) first; the + way when the target is
    ahead without wrapping by at most half the ring, or behind and reached by wrapping (as its two tests read)."""
    strides = [int(np.prod(dims[:j])) for j in range(len(dims))]
    coords = lambda k: [k // s % d for s, d in zip(strides, dims)]  # noqa: E731
    mine, target, here, path = coords(a), coords(b), a, []
    for j, size in enumerate(dims):
        half = size // 2
        plus = (mine[j] < target[j] <= mine[j] + half) or (mine[j] > half and (mine[j] + half) % size >= target[j])
        while coords(here)[j] != target[j]:
            c = coords(here)[j]
            there = here + (((c + 1) % size if plus else (c - 1) % size) - c) * strides[j]
            path.append((here, there))
            here = there
    return path


@pytest.mark.parametrize("dims", [(8,), (4, 3, 2), (5, 4), (2, 6)])
def test_torus_loads_are_the_hop_by_hop_route_summed(dims):
    """Every link's bytes from the difference arrays equal those of SimGrid's route walked hop by hop."""
    torus = fabric.Torus(dims)
    links, n = wires(torus), torus.nodes
    pairs = np.array([(a, b) for a, b in itertools.product(range(n), repeat=2) if a != b])
    nbytes = np.random.default_rng(3).integers(1, 100, len(pairs)).astype(np.float64)
    got = link_bytes(links, pairs[:, 0], pairs[:, 1], nbytes)
    want: dict[tuple[int, int], float] = {}
    for (a, b), size in zip(pairs.tolist(), nbytes):
        for hop in torus_route(dims, a, b):
            want[hop] = want.get(hop, 0.0) + size
    assert sorted(got[got > 0].round(6)) == sorted(np.round(list(want.values()), 6))
    assert got.sum() == pytest.approx(sum(want.values()))
    _, hops = links.route(pairs[:, 0], pairs[:, 1])
    assert hops.tolist() == [len(torus_route(dims, a, b)) for a, b in pairs.tolist()]


def test_a_hot_spot_on_a_ring():
    """On a ring of 8, every node sending to the node two ahead loads each + link with two messages, - links none."""
    links = wires(fabric.Torus((8,)))
    src = np.arange(8)
    loads = link_bytes(links, src, (src + 2) % 8, np.full(8, 10.0))
    assert loads[:8].tolist() == [20.0] * 8 and loads[8:].tolist() == [0.0] * 8


def test_fat_tree_uplinks_sum_to_the_pooled_spine_link():
    """The d-mod-k cables of a leaf carry together what a2a.fabric's one pooled uplink carries."""
    tree = fabric.FatTree(4, 4, 2.0)
    links = wires(tree)
    pairs = np.array([(a, b) for a, b in itertools.product(range(16), repeat=2) if a != b])
    got = link_bytes(links, pairs[:, 0], pairs[:, 1], np.ones(len(pairs)))
    pooled = fabric.link_loads(tree, [(a, b, 1.0) for a, b in pairs.tolist()])
    for leaf in range(4):
        up = got[32 + leaf * 2: 32 + leaf * 2 + 2].sum()
        assert up == pytest.approx(pooled[(f"leaf{leaf}", "spine")] * tree.capacity((f"leaf{leaf}", "spine")))
    assert got[:16].tolist() == [15.0] * 16  # each node's cable up carries its 15 messages


def test_dragonfly_routes_as_simgrid():
    """Group 0 to group 1 leaves through the router whose blade is 1 on chassis 0, then the global link."""
    fly = fabric.Dragonfly(2, 2, 2, 1)  # 8 routers, a node each: node = ((group x 2) + chassis) x 2 + blade
    links = wires(fly)
    _, hops = links.route(np.array([0, 0, 3, 0]), np.array([1, 4, 4, 2]))
    # same chassis: node, green, node; 0 -> 4: green to blade 1, blue to (1, 0, 0) = node 4; 3 = (0, 1, 1): black
    # to chassis 0 (blade 1), blue to (1, 0, 0); 0 -> 2: black to chassis 1
    assert hops.tolist() == [3, 4, 4, 3]
    assert (links.twin[links.twin] == np.arange(links.links)).all()


@pytest.mark.parametrize("spec", ["switch", "fattree:4x4,oversub=2", "torus:4x4", "dragonfly:2x2x2x2"])
def test_twins_are_the_other_way_of_each_cable(spec):
    links = wires(fabric.parse(spec, nodes=16 if spec == "switch" else None))
    assert (links.twin[links.twin] == np.arange(links.links)).all()


def test_pairwise_on_a_switch_is_the_hockney_sum():
    """One message per link and round: p-1 rounds of two link latencies and the bytes over the rate, plus the copy."""
    p, m = 64, 65536
    rounds = schedule_rounds("pairwise", {}, p, "float32", [[r] for r in range(p)])
    timing = analytical.timed(rounds, wires(fabric.Switch(p)), 1, ideal(5e9), [m // 4])[0]
    want = (p - 1) * (2 * LATENCY + (m + analytical.ENVELOPE) / RATE) + m / 5e9
    assert timing.aware == pytest.approx(want, rel=1e-12)
    assert timing.unaware == pytest.approx(want, rel=1e-12)


def test_linear_on_a_switch_is_bound_by_each_node_link():
    """Everything at once: each node's cable carries p-1 messages; unaware, one message alone."""
    p, m = 16, 1 << 20
    rounds = schedule_rounds("linear", {}, p, "float32", [[r] for r in range(p)])
    timing = analytical.timed(rounds, wires(fabric.Switch(p)), 1, ideal(), [m // 4])[0]
    alone = 2 * LATENCY + (m + analytical.ENVELOPE) / RATE
    assert timing.unaware == pytest.approx(alone + m / COPY)
    assert timing.aware == pytest.approx(2 * LATENCY + (p - 1) * (m + analytical.ENVELOPE) / RATE + m / COPY)


@pytest.mark.parametrize("spec", ["torus:4x4x4", "fattree:8x8,oversub=4"])
def test_congestion_never_makes_a_schedule_faster(spec):
    """Congestion-aware is at least congestion-unaware for every built-in, and a torus's links cost something."""
    shape = fabric.parse(spec)
    costs = analytical.Costs(RATE, LATENCY, 1.1e10)
    for name in BUILT_INS:
        rounds = schedule_rounds(name, {}, 64, "float32", [[r] for r in range(64)])
        for timing in analytical.timed(rounds, wires(shape), 1, costs, [2, 16384, 262144]):
            assert timing.aware >= timing.unaware * (1 - 1e-12) > 0, name
    linear = schedule_rounds("linear", {}, 64, "float32", [[r] for r in range(64)])
    big = analytical.timed(linear, wires(shape), 1, costs, [262144])[0]
    assert big.aware > 5 * big.unaware


def test_ranks_of_one_node_use_the_loopback():
    """Two ranks on one node: their message goes over the copy rate, not the network."""
    rounds = table([(0, RankRounds(np.array([1]), np.array([4]), np.array([0]), [], 1)),
                    (1, RankRounds(np.array([0]), np.array([4]), np.array([0]), [], 1))], 2)
    timing = analytical.timed(rounds, wires(fabric.Switch(1)), 2, ideal(1e9), [1 << 18])[0]
    assert timing.aware == pytest.approx(0.1e-6 + ((1 << 20) + 16) / 1e9)


def test_replica_groups_send_only_within_their_group():
    """1-D groups of a 4x4x4 mesh: every message stays in its row of four."""
    from a2a.sweep.mesh import Layout

    layout = Layout((4, 4, 4), (False, False, True))
    rounds = schedule_rounds("linear", {}, 64, "float32", [[r] for r in range(64)], layout)
    (group,) = rounds.groups
    assert group.dests.shape == (64, 3)
    assert (group.dests.astype(int) // 4 == group.ranks[:, None] // 4).all()


def test_a_record_decide_reads(capsys, tmp_path):
    """The record names its backend and variant, keeps both variants beside it, and decide gives its table."""
    out = tmp_path / "an"
    code, _, err = bench_here(capsys, "simulate", "--backend", "analytical", "--platform", "torus:4x4x4",
                              "--nprocs", "64", "--sizes", "8,64K", "--algorithms", "linear,pairwise,bruck",
                              "--copy-bandwidth", "1e10", "--output", str(out), "--quiet")
    assert code == 0, err
    meta = json.loads((out / "meta.json").read_text())
    assert meta["backend"] == "analytical" and meta["analytical"]["congestion"] == "aware"
    assert meta["analytical_peak_memory_bytes"] > 0
    with (out / "results.csv").open() as source:
        rows = list(csv.DictReader(source))
    assert {r["timing"] for r in rows} == {"simulated"} and len(rows) == 6
    with (out / "analytical.csv").open() as source:
        both = list(csv.DictReader(source))
    assert all(float(r["aware_us"]) >= float(r["unaware_us"]) for r in both)
    times = {(r["algorithm"], r["bytes_per_peer"]): float(r["t_p50_us"]) for r in rows}
    assert all(times[(r["algorithm"], r["bytes_per_peer"])] == pytest.approx(float(r["aware_us"])) for r in both)
    assert "timing=simulated" in decided([out])


@pytest.mark.parametrize("args, message", [
    (["--backend", "analytical", "--calibrate", "."], "--calibrate is SimGrid's"),
    (["--congestion", "unaware"], "--congestion goes with --backend analytical"),
    (["--backend", "analytical", "--timing", "overlap"], "--timing overlap needs SimGrid"),
])
def test_bad_options_are_refused_once(capsys, tmp_path, args, message):
    code, _, err = bench_here(capsys, "simulate", *args, "--output", str(tmp_path / "x"), "--copy-bandwidth", "1e10")
    assert code == 2, err
    assert err.count(message) == 1, err
    assert not (Path(tmp_path / "x") / "results.csv").exists()


def test_validate_sets_the_two_simulators_side_by_side(capsys, tmp_path):
    """A record standing in for SimGrid's (the unaware variant's, its backend renamed) against the aware one: every
    ratio at least 1, the cells' tie sets by the 5 % margin, and a switch at one rank per node agreeing exactly."""
    records = {}
    for congestion in ("unaware", "aware"):
        out = tmp_path / congestion
        code, _, err = bench_here(capsys, "simulate", "--backend", "analytical", "--congestion", congestion,
                                  "--platform", "torus:4x4x4", "--nprocs", "64", "--sizes", "8,1M",
                                  "--algorithms", "linear,pairwise,bruck", "--copy-bandwidth", "1e10",
                                  "--output", str(out), "--quiet")
        assert code == 0, err
        records[congestion] = out
    meta = json.loads((records["unaware"] / "meta.json").read_text())
    (records["unaware"] / "meta.json").write_text(json.dumps({**meta, "backend": "simgrid"}))
    rows = validate.against_simgrid(records["unaware"], records["aware"])
    assert len(rows) == 6 and all(r["ratio"] >= 1 for r in rows)
    assert all(r["unaware_us"] == pytest.approx(r["simgrid_us"]) for r in rows)
    for cell in validate.backend_cells(rows):
        mine = {r["label"]: r for r in rows if r["bytes_per_peer"] == cell["bytes_per_peer"]}
        fastest = min(r["simgrid_us"] for r in mine.values())
        assert set(cell["tie_set"]) == {k for k, r in mine.items() if r["simgrid_us"] <= 1.05 * fastest}
        assert cell["right"] == (cell["analytical_best"] in cell["tie_set"])
    # unaware, linear's one round of lone messages is fastest at 8 B; aware, its 63 messages share each link
    figure = tmp_path / "side.png"
    code, out, _ = bench_here(capsys, "validate", str(records["unaware"]), str(records["aware"]), "--figure",
                              str(figure))
    assert code == 0 and "torus:4x4x4: analytical best in SimGrid's tie set in" in out
    assert figure.stat().st_size > 1000
    assert "points differ by more than 2x" in out


def test_an_alltoallv_takes_each_message_from_the_matrix():
    """linear's alltoallv on a switch: rank 0's cable up carries its whole row; pairwise's rounds each their block."""
    p = 8
    counts = np.ones((p, p), np.int64)
    counts[0] = 1 << 16  # rank 0 sends 256 KiB of float32 to everyone (and copies as much to itself)
    nodes = [[r] for r in range(p)]
    linear = schedule_rounds("linear", {}, p, "float32", nodes, matrix=counts)
    timing = analytical.timed(linear, wires(fabric.Switch(p)), 1, ideal(1e9), [1])[0]
    row = (p - 1) * (4 * (1 << 16) + analytical.ENVELOPE)
    assert timing.aware == pytest.approx(4 * (1 << 16) / 1e9 + 2 * LATENCY + row / RATE)
    pairwise = schedule_rounds("pairwise", {}, p, "float32", nodes, matrix=counts)
    stepwise = analytical.timed(pairwise, wires(fabric.Switch(p)), 1, ideal(1e9), [1])[0]
    big = 2 * LATENCY + (4 * (1 << 16) + analytical.ENVELOPE) / RATE  # each round, rank 0's block is the slowest
    assert stepwise.aware == pytest.approx(4 * (1 << 16) / 1e9 + (p - 1) * big)
    with pytest.raises(A2AError, match="not a direct schedule"):
        schedule_rounds("bruck", {}, p, "float32", nodes, matrix=counts)


def test_a_copy_between_posts_and_wait_overlaps_the_messages():
    """A copy before the posts adds to the round; one made while the messages travel (a collective's own block) only
    lengthens it where it takes longer than they do."""
    from a2a.schedules.events import Collective, Copy

    links, m = wires(fabric.Switch(2)), 1 << 20
    network = 2 * LATENCY + (m + analytical.ENVELOPE) / RATE

    def timed(events_of: list[list]) -> float:
        rounds = table([(r, rank_rounds(events, r)) for r, events in enumerate(events_of)], 2)
        return analytical.timed(rounds, links, 1, ideal(copy), [1])[0].aware

    for copy in (1e12, 1e9):  # copying 1 MiB: far quicker than the message, then slower
        together = [[Collective("alltoall", (0, 1), None, (m, m), (m, m))] for _ in range(2)]
        first = [[Copy(m), Collective("alltoall", (0, 1), None, (0, m) if r == 0 else (m, 0), (m, m))]
                 for r in range(2)]
        assert timed(together) == pytest.approx(max(network, m / copy))
        assert timed(first) == pytest.approx(m / copy + network)
