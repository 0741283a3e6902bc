"""Link contention in the model and the topology study's tables, on rows made from known costs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import python

import a2a
from a2a import fabric
from a2a.algos.builtin.bruck import offsets as bruck_offsets
from a2a.algos.registry import with_defaults
from a2a.analysis import contention, model
from a2a.analysis import study as topology_study
from a2a.errors import BadConfig
from a2a.record.results import Recorder, Row
from a2a.sweep.naming import empty_directory as empty_output
from a2a.units import human_bytes

SIZES = [8, 1024, 65536, 1 << 20]
ALPHA, BETA = 50e-6, 8e-9  # 50 us per round, 1 Gbit/s


def test_busiest_links_match_the_switch_formulas_and_add_up_on_a_ring():
    switch, ring, torus = fabric.parse("switch", 8), fabric.parse("ring", 8), fabric.parse("torus:2x4")
    # on a switch with a rank per node, the busiest link carries what one rank sends: beta's coefficient
    assert contention.busiest_link_bytes("pairwise", 8, 1, switch) == 7
    assert contention.busiest_link_bytes("linear", 8, 1, switch) == 7
    assert contention.busiest_link_bytes("bruck", 8, 1, switch) == 3 * 4  # lg 8 rounds of p/2 blocks
    # ring of 8, shift s crosses min(s, 8-s) links (4 the + way on the tie), all ranks at once:
    # the busiest link carries 1+2+3+4+3+2+1 blocks
    assert contention.busiest_link_bytes("pairwise", 8, 1, ring) == 16
    # torus 2x4, worked out per shift: shifts 2 and 6 go two hops along y (the tie goes the + way),
    # so two messages share some y link; every other shift loads each link once: 1+2+1+1+1+2+1
    assert contention.busiest_link_bytes("pairwise", 8, 1, torus) == 9
    # everything at once on the torus: 3 links per node share the 7 outgoing blocks -> 6 on the busiest
    assert contention.busiest_link_bytes("linear", 8, 1, torus) == 6
    assert contention.against_switch("pairwise", 8, ring) == pytest.approx(16 / 7)
    # dimensional 2x4, a round per phase: 4 blocks to r+4 (4 hops the + way: 4 messages on each + link), then 2 to
    # each other rank of the row (link 1->2 carries 0->2, 0->3, 1->2 and 1->3); a switch carries 4, then 3 x 2
    assert contention.busiest_link_bytes("dimensional", 8, 1, ring, {"dims": "2x4"}) == 4 * 4 + 4 * 2
    assert contention.busiest_link_bytes("dimensional", 8, 1, switch, {"dims": "2x4"}) == 4 + 3 * 2
    # two ranks per node: the messages inside a node use no link
    assert contention.busiest_link_bytes("pairwise", 16, 1, fabric.parse("switch", 8)) == 2 * 14
    assert [sorted(r) for r in contention.rounds("native", 4, 1)] == \
        [sorted(r) for r in contention.rounds("linear", 4, 1)]  # the same messages, in another order


def read_from_steps() -> list[tuple[str, dict]]:
    """Every alltoall algorithm whose rounds of link traffic come from its steps (none of its own) and whose formula
    has one beta (a rank's bytes; the node-aware ones split it by link class), at its defaults; and options."""
    found: list[tuple[str, dict]] = [(name, {}) for name in a2a.algorithms("alltoall")
             if (kind := a2a.get(name).kinds["alltoall"]).steps and not kind.traffic
             and "beta" in model.formula_for(name).params]
    return found + [("bruck_zero_copy", {"radix": "3"}), ("parallel_split", {"factor": "4"})]


@pytest.mark.parametrize("name,options", read_from_steps())
def test_rounds_read_from_steps_carry_the_formulas_bytes(name, options):
    """No `traffic` given: each rank's k-th step is round k; on a switch, the busiest link is beta's coefficient."""
    for p in (8, 16):
        rounds = contention.rounds(name, p, 1, options)
        assert all({r for r, _, _ in messages} == set(range(p)) for messages in rounds)  # every rank sends in each
        beta = model.formula_for(name).terms(model.Placement(p), 1, with_defaults(name, options))["beta"]
        assert contention.busiest_link_bytes(name, p, 1, fabric.parse("switch", p), options) == beta, (name, p)


def test_rounds_follow_the_algorithms_schedules():
    xor = contention.rounds("pairwise", 4, 1, {"schedule": "xor"})
    assert [sorted(d for _, d, _ in step) for step in xor] == [[0, 1, 2, 3]] * 3
    assert [(0, 1, 1), (0, 2, 1), (0, 3, 1)] == [step[0] for step in xor]
    assert [step[1][1] for step in xor] == [0, 3, 2]  # rank 1's partners: 1 xor s
    shift = contention.rounds("pairwise", 4, 1)
    assert contention.rounds("bine", 6, 1) == contention.rounds("pairwise", 6, 1)  # bine at 6 ranks runs pairwise
    assert [step[1][1] for step in shift] == [2, 3, 0]  # rank 1 sends to 1 + s
    batched = contention.rounds("throttled", 5, 2.0, {"window": "2"})
    assert [sorted({(d - r) % 5 for r, d, _ in step}) for step in batched] == [[1, 2], [3, 4]]
    assert all(m == 2.0 and len(step) == 10 for step in batched for *_, m in step)


def test_bruck_offsets_follow_the_digits():
    assert bruck_offsets(8, 2) == [(1, 4), (2, 4), (4, 4)]
    assert bruck_offsets(5, 2) == [(1, 2), (2, 2), (4, 1)]
    assert bruck_offsets(9, 3) == [(1, 3), (2, 3), (3, 3), (6, 3)]


def modelled_rows(topology: str, algorithms: tuple[str, ...] = ("pairwise", "linear")) -> list[Row]:
    """Rows whose p50 is alpha per round plus beta times the busiest-link bytes on `topology`."""
    net = fabric.parse(topology, 8)
    rows = []
    for name in algorithms:
        for size in SIZES:
            rounds = len(contention.rounds(name, 8, size))
            seconds = ALPHA * rounds + BETA * contention.busiest_link_bytes(name, 8, size, net)
            rows.append(Row(8, 8, 1, name, "", "uint8", size, size, 5, 1, t_p50_us=seconds * 1e6,
                            t_min_us=seconds * 1e6, valid=True, topology=topology))
    return rows


def test_model_fitted_on_the_switch_predicts_the_ring_through_its_links():
    runs = {t: modelled_rows(t) for t in ("switch", "ring")}
    errors = topology_study.model_errors(runs, "switch")
    # pairwise: rounds fixed, only the bandwidth term moves with the topology, and the model knows it
    for size in SIZES:
        assert errors["switch"][size, "pairwise"] == pytest.approx(0, abs=0.02)
        assert errors["ring"][size, "pairwise"] == pytest.approx(0, abs=0.02)
    # without contention the ring's 1 MiB pairwise would be predicted at 7/16 of its time
    assert runs["ring"][3].t_p50_us > 2 * runs["switch"][3].t_p50_us


def test_study_report_prints_every_table(tmp_path: Path):
    runs = {"switch": modelled_rows("switch"), "torus:2x4": modelled_rows("torus:2x4")}
    text = topology_study.report(runs, "switch")
    assert "switch: p50 per call, us" in text and "torus:2x4: p50 per call, us" in text
    speedups = text.split("speedup torus:2x4 over switch")[1].split("\n\n")[0]
    big = next(line for line in speedups.splitlines() if line.strip().startswith("1M"))
    # pairwise at 1 MiB: 7 vs 9 on the busiest link -> the torus is slower; linear: 7 vs 6 -> faster
    pairwise = (ALPHA * 7 + BETA * 7 * (1 << 20)) / (ALPHA * 7 + BETA * 9 * (1 << 20))
    linear = (ALPHA + BETA * 7 * (1 << 20)) / (ALPHA + BETA * 6 * (1 << 20))
    assert big.split()[1:3] == [f"{linear:.2f}", f"{pairwise:.2f}"], big
    assert "latency floor" in text and "leaves at" in text
    winners = text.split("fastest algorithm per size")[1].split("\n\n")[0]
    assert "linear" in winners.splitlines()[3]  # 8 B: one round beats seven
    assert "model vs measured on torus:2x4" in text and "median |err|" in text


def test_a_study_writes_into_a_new_or_empty_directory_only(tmp_path: Path):
    assert empty_output(tmp_path / "new", "study") == tmp_path / "new" and (tmp_path / "new").is_dir()
    (tmp_path / "empty").mkdir()
    assert empty_output(tmp_path / "empty", "study") == tmp_path / "empty"  # made before, still empty: fine
    (tmp_path / "empty" / "results.csv").touch()
    with pytest.raises(BadConfig, match="empty is not empty; choose another --output"):
        empty_output(tmp_path / "empty", "study")


def test_floor_exits_find_the_first_size_past_twice_the_floor():
    table = {(8, "a"): 10.0, (64, "a"): 15.0, (512, "a"): 25.0, (4096, "a"): 90.0, (8, "b"): 5.0, (64, "b"): 6.0}
    assert topology_study.floor_exits(table) == {"a": (10.0, 512), "b": (5.0, None)}


@pytest.fixture
def study(tmp_path: Path) -> Path:
    """A study directory as `topology-study` leaves it, whose torus run never finished."""
    manifest = [{"name": "switch", "topology": "switch", "title": "8 nodes x 1 slot"},
                {"name": "ring", "topology": "ring", "title": "8 nodes x 1 slot on ring"},
                {"name": "torus-2x4", "topology": "torus:2x4", "title": "never ran"}]
    (tmp_path / topology_study.STUDY_MANIFEST).write_text(json.dumps({"runs": manifest}))
    for entry in manifest[:2]:
        recorder = Recorder(tmp_path / entry["name"])
        for row in modelled_rows(entry["topology"]):
            recorder.add(row, [])
        recorder.close()
    return tmp_path


@pytest.mark.launches
def test_show_reprints_a_study_directory(study: Path):
    done = python("-m", "bench", "topology-study", "--show", str(study))
    assert done.returncode == 0, done.stderr
    assert "torus:2x4: no results (the run did not finish)" in done.stdout
    assert "speedup ring over switch" in done.stdout
    assert f"{human_bytes(SIZES[-1])}" in done.stdout
    bad = python("-m", "bench", "topology-study", "--topologies", "switch,torus:2x2", "--nodes", "8")
    assert bad.returncode == 2 and "torus:2x2 do not have --nodes 8 nodes" in bad.stderr


@pytest.mark.launches
def test_plot_draws_the_study_figures(study: Path):
    pytest.importorskip("matplotlib")
    done = python("-m", "bench", "plot", str(study), "-o", str(study / "figures"))
    assert done.returncode == 0, done.stderr
    for name in ("latency_by_topology", "topology_winners", "topology_speedup"):
        assert (study / "figures" / f"{name}.png").stat().st_size > 5000, name
        assert name in done.stdout
    assert "topology_speedup.png" in (study / "figures" / "index.html").read_text()
