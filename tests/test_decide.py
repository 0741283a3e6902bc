"""bench decide / bench export: tables from synthetic results, every format, bad input."""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace

import numpy as np
import pytest
from decide_fixtures import LIBRARY_TABLE, minimal_table, record, row_for, samples_around
from support import bench_here, needs_mpich

import a2a
from a2a.algos.facts import twin
from a2a.analysis import decide
from a2a.analysis.export import mpich
from a2a.analysis.export.common import counterpart, translate
from a2a.analysis.export.formats import export, formats
from a2a.analysis.revert import revert_slower
from a2a.errors import BadInput, BadResults
from a2a.record import decision
from a2a.record.results import Recorder, read_meta, write_meta
from a2a.record.verdict import Comparison


@pytest.fixture
def library_run(tmp_path):
    return record(tmp_path / "run", LIBRARY_TABLE)


@pytest.fixture
def library_table(library_run, tmp_path):
    path = tmp_path / "decision.json"
    decision.write_decision(decide.decide([library_run]), path)
    return path


def table_of(document, nprocs):
    return next(t for t in document.tables if t.nprocs == nprocs)


def spans(table):
    return [(r.bytes_min, r.bytes_max, r.algorithm, r.options) for r in table.ranges]


def test_mann_whitney_matches_scipy_reference_values():
    # reference p-values from scipy.stats.mannwhitneyu(method="asymptotic"), continuity corrected
    x, y = [1.1, 2.3, 0.7, 3.3, 2.2, 1.9, 2.8], [2.5, 3.1, 4.0, 2.9, 3.6, 2.2, 3.8, 4.4]
    assert decide.mann_whitney_p(x, y) == pytest.approx(0.020524463598227634, rel=1e-12)
    tied_a, tied_b = [1, 1, 2, 2, 2, 3, 3, 4], [2, 3, 3, 4, 4, 4, 5, 5, 5]
    assert decide.mann_whitney_p(tied_a, tied_b) == pytest.approx(0.012137632488436668, rel=1e-12)
    assert decide.mann_whitney_p([1, 1], [1, 1]) == 1.0 and decide.mann_whitney_p([], [1]) == 1.0


def test_boundaries_are_geometric_means_and_cover_from_zero():
    assert decision.lower_bounds([8, 64, 1024]) == [0, 23, 256]
    assert decision.lower_bounds([1, 2]) == [0, 2]  # each size stays in its own range
    assert decision.lower_bounds([0, 8]) == [0, 1]


def test_decide_picks_merges_and_covers_zero_to_infinity(library_run):
    document = decide.decide([library_run])
    assert document.schema == decision.SCHEMA and document.metric == "mean"
    assert document.mpi_library == "MPICH Version: test" and document.dtype == "float32"
    assert spans(table_of(document, 2)) == [(0, None, "pairwise", "schedule=shift")]
    assert spans(table_of(document, 4)) == [
        (0, 255, "bruck", "radix=2"), (256, 4095, "pairwise", "schedule=shift"),
        (4096, 65535, "throttled", "window=2"), (65536, None, "native", "")]
    cell = table_of(document, 4).ranges[0].cells[0]
    assert (cell.bytes_per_peer, cell.runner_up, cell.tie) == (8, "native", False)
    assert cell.speedup_vs_native == pytest.approx(50 / 20, rel=0.05)
    assert cell.margin == pytest.approx(50 / 20 - 1, rel=0.1)
    assert cell.candidates[0].algorithm == "bruck" and len(cell.candidates) == 5
    at_four, at_three = decision.lookup(document, 4, 300), decision.lookup(document, 3, 300)
    assert at_four and at_four[1].algorithm == "pairwise"
    assert at_three and at_three[0].nprocs == 2  # nearest measured count below
    assert decision.lookup(document, 1, 300) is None
    assert "tie" not in decide.render(document).split("\n")[2]


def test_a_difference_within_the_margin_is_a_tie_that_keeps_the_library_own(tmp_path):
    """linear is 0.5 % faster than native: within the 5 % margin, so native stays with linear within noise of it;
    with no margin and a lax alpha the same data still never call linear slower."""
    run = record(tmp_path / "run", {(4, 512): {("native", ""): 100, ("linear", ""): 99.5,
                                               ("bruck", "radix=2"): 300}})
    cell = decide.decide([run]).tables[0].ranges[0].cells[0]
    assert (cell.algorithm, cell.tied_with, cell.vs_native) == ("native", ("linear",), None)
    assert cell.tie == (cell.candidates[0].algorithm != "native")
    linear = next(c for c in cell.candidates if c.algorithm == "linear")
    bruck = next(c for c in cell.candidates if c.algorithm == "bruck")
    tie = against(linear.vs_native)
    assert tie.verdict == "tie" and tie.low is not None and tie.high is not None and tie.low < 1 < tie.high
    assert against(bruck.vs_native).verdict == "slower" and against(bruck.vs_native).ratio == pytest.approx(3, rel=0.1)
    assert (cell.rounds, cell.launches, cell.noise_floor) == (10, 1, None)


def test_a_stall_in_one_visit_moves_the_verdict_little_but_stalls_in_every_round_count(tmp_path):
    """throttled's one 0.2 s stall hits one round's visit: the median of the per-round ratios keeps it within noise of
    bine (and it is the simpler); a stall in every round makes it slower than native by the mean."""
    points = {(4, 512): {("native", ""): 80, ("bine", ""): 50, ("throttled", "window=2"): 50}}
    once = record(tmp_path / "once", points, stall_at={(4, 512, "throttled"): 1})
    cell = decide.decide([once]).tables[0].ranges[0].cells[0]
    assert (cell.algorithm, cell.tie, cell.tied_with) == ("throttled", True, ("bine",))
    assert against(cell.vs_native).verdict == "faster" and cell.speedup_vs_native == pytest.approx(1.6, rel=0.1)
    every = record(tmp_path / "every", points, stall_at={(4, 512, "throttled"): 20})
    cell = decide.decide([every]).tables[0].ranges[0].cells[0]
    assert (cell.algorithm, cell.tie, cell.tied_with) == ("bine", False, ())
    throttled = next(c for c in cell.candidates if c.algorithm == "throttled")
    assert against(throttled.vs_native).verdict == against(throttled.vs_best).verdict == "slower"


def test_metric_decides_whether_stalls_count(tmp_path):
    """One of pairwise's four samples stalls in every round: its per-round mean, p90, p99 and max pay for it, its
    median does not."""
    recorder = Recorder(tmp_path)
    for j, (algorithm, options, median) in enumerate([("pairwise", "schedule=shift", 100), ("throttled", "window=8",
                                                                                             150)]):
        seconds = samples_around(median, seed=j)
        if algorithm == "pairwise":
            seconds[::4] += 0.2
        recorder.add(row_for(4, 4096, algorithm, options, "float32", 4, seconds), seconds, [i // 4 for i in range(20)])
    recorder.close()
    by = {m: decide.decide([tmp_path], metric=m).tables[0].ranges[0].algorithm for m in decide.METRICS}
    assert by == {"mean": "throttled", "median": "pairwise", "p90": "throttled", "p99": "throttled",
                  "max": "throttled"}


def test_runs_of_the_same_points_merge(tmp_path):
    first = record(tmp_path / "a", {(4, 64): LIBRARY_TABLE[4, 64]})
    second = record(tmp_path / "b", {(4, 64): LIBRARY_TABLE[4, 64], (4, 1024): LIBRARY_TABLE[4, 1024]})
    document = decide.decide([first, second])
    cells = [c for r in document.tables[0].ranges for c in r.cells]
    assert [c.bytes_per_peer for c in cells] == [64, 1024]
    assert [c.samples for c in cells] == [40, 20] and len(document.sources) == 2


def test_invalid_points_and_auto_are_ignored(tmp_path):
    # linear and auto are faster than native, but linear's row is invalid and auto only follows a table
    run = record(tmp_path / "run", {(4, 64): {("native", ""): 60, ("linear", ""): 20, ("auto", "table=x.json"): 1}})
    text = (run / "results.csv").read_text()
    [linear] = [line for line in text.splitlines() if ",linear," in line]
    assert ",true," in linear
    (run / "results.csv").write_text(text.replace(linear, linear.replace(",true,", ",false,")))
    [cell] = decide.decide([run]).tables[0].ranges[0].cells
    assert cell.algorithm == "native" and [c.algorithm for c in cell.candidates] == ["native"]


def test_export_ompi_classic_rules(library_table):
    exported = export(library_table, "ompi")
    lines = [line for line in exported.text.splitlines() if not line.startswith("#")]
    # header because throttled needs max requests; sizes are bytes per peer x comm size
    assert lines == ["rule-file-version-2", "1", "3", "2",
                     "2", "1", "0 2 0 0 0",
                     "4", "4", "0 3 0 0 0", "1024 2 0 0 0", "16384 4 0 0 2", "262144 0 0 0 0"]
    assert not re.search(r"(^| )0\d", exported.text)  # never zero-padded (%li reads octal)
    env = exported.environment("/x/rules")
    assert env == {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                   "OMPI_MCA_coll_tuned_dynamic_rules_filename": "/x/rules"}
    assert "coll_tuned_dynamic_rules_filename /x/rules" in exported.apply("/x/rules")
    # throttled (batches + Waitall) is MPICH's scattered, not linear_sync: its cell takes the best
    # measured schedule Open MPI has, linear_sync with 2 requests, and says what that costs
    assert len(exported.warnings) == 1 and re.match(
        r"4 ranks, 16384 B/peer: throttled:window=2 has no Open MPI counterpart; using linear_sync:window=2 "
        r"instead, 1\.1\dx slower than throttled:window=2 \(median of per-round ratios; mean over all calls: "
        r"linear_sync:window=2 4\d\d\.\d us, throttled:window=2 [34]\d\d\.\d us\)", exported.warnings[0])


def test_export_ompi_without_throttled_is_version_1(tmp_path):
    path = tmp_path / "t.json"
    decision.write_decision(decision.from_json(minimal_table(8, [(0, "bruck", "radix=2"), (100, "linear", "")])), path)
    text = export(path, "ompi").text
    assert "rule-file-version" not in text and text.splitlines()[-2:] == ["0 3 0 0", "800 1 0 0"]


def test_export_ompi_json(library_table):
    rules = json.loads(export(library_table, "ompi-json").text)
    entries = rules["collectives"]["alltoall"]
    assert rules["rule_file_version"] == 3 and rules["module"] == "tuned"
    assert entries[0] == {"comm_size_min": 2, "comm_size_max": 3, "rules": [
        {"msg_size_min": 0, "msg_size_max": "inf", "alg": "pairwise"}]}
    assert entries[1]["comm_size_min"] == 4 and "comm_size_max" not in entries[1]
    assert entries[1]["rules"][2] == {"msg_size_min": 16384, "msg_size_max": 262143, "alg": "linear_sync",
                                      "reqs": 2}


def test_export_intel(library_table):
    exported = export(library_table, "intel")
    value = "3:0-2147483647@2-3;1:0-255@4-2147483647;3:256-65535@4-2147483647"
    assert exported.text == f'I_MPI_ADJUST_ALLTOALL="{value}"\n'
    # throttled has no Intel counterpart: the best measured one that has (pairwise) takes the cell
    assert len(exported.warnings) == 1 and re.match(
        r"4 ranks, 16384 B/peer: throttled:window=2 has no Intel MPI counterpart; using pairwise "
        r"instead, [12]\.\d\dx slower than throttled:window=2 \(", exported.warnings[0])


@needs_mpich("export --format mpich extends the built-in selection tree of MPICH's libmpi")
def test_export_mpich_splices_alltoall_into_the_libraries_own_tree(library_table):
    original, _ = mpich.builtin_tree()
    exported = export(library_table, "mpich")
    tree = json.loads(exported.text)
    assert list(tree) == list(original)  # every collective kept, in order
    assert {k: v for k, v in tree.items() if k != "collective=alltoall"} == \
        {k: v for k, v in original.items() if k != "collective=alltoall"}
    native = original["collective=alltoall"]["comm_type=intra"]
    intra = tree["collective=alltoall"]["comm_type=intra"]
    assert intra["is_sendbuf_inplace=yes"] == native
    by_size = intra["is_sendbuf_inplace=no"]
    assert list(by_size) == ["comm_size<=1", "comm_size<=3", "comm_size=any"]
    assert by_size["comm_size<=3"] == {"avg_msg_size=any": {"algorithm=MPIR_Alltoall_intra_pairwise": {}}}
    assert by_size["comm_size=any"] == {
        "avg_msg_size<=255": {"algorithm=MPIR_Alltoall_intra_brucks": {}},
        "avg_msg_size<=4095": {"algorithm=MPIR_Alltoall_intra_pairwise": {}},
        "avg_msg_size<=65535": {"algorithm=MPIR_Alltoall_intra_scattered": {}},
        "avg_msg_size=any": native}
    assert tree["collective=alltoall"]["comm_type=inter"] == original["collective=alltoall"]["comm_type=inter"]
    assert exported.environment("/f.json") == {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": "/f.json",
                                              "MPIR_CVAR_ALLTOALL_THROTTLE": "2"}


def test_twins_each_algorithm_names():
    def ompi(name, options):
        return twin(name, "alltoall", "Open MPI", options, 8)

    def mpich(name, options):
        return twin(name, "alltoall", "MPICH", options, 8)

    def intel(name, options):
        return twin(name, "alltoall", "Intel MPI", options, 8)

    assert ompi("bruck", {"radix": "4"}) is None
    assert ompi("throttled", {"window": "4"}) is None  # batches are not a sliding window
    assert ompi("throttled", {"window": "7"}) == ompi("linear", {}) == ("linear", 0)
    assert ompi("linear_sync", {"window": "4"}) == ("linear_sync", 4)
    assert ompi("linear_sync", {"window": "0"}) == ("linear_sync", 0)
    assert ompi("bruck_zero_copy", {"radix": "2"}) == ("modified_bruck", 0)
    assert ompi("bruck_zero_copy", {"radix": "3"}) is None
    assert all(library("bine", {}) is None for library in (ompi, mpich, intel))  # no library has it
    assert mpich("bruck_zero_copy", {"radix": "3"}) == ("k_brucks", 3)
    assert mpich("linear_sync", {"window": "0"}) == ("scattered", 0)
    assert mpich("linear_sync", {"window": "3"}) is None
    assert intel("linear_sync", {"window": "9"}) == intel("linear", {}) == "isend_irecv"
    assert intel("bruck_zero_copy", {"radix": "2"}) == "bruck"
    assert mpich("bruck", {"radix": "4"}) == ("k_brucks", 4)
    assert mpich("linear", {}) == mpich("throttled", {"window": "7"}) == ("scattered", 0)
    assert all(library("hierarchical", {}) is None for library in (ompi, mpich))
    assert mpich("pairwise_inplace", {}) is None  # MPICH's asserts MPI_IN_PLACE
    assert twin("not-registered", "alltoall", "MPICH", {}, 8) is None


def test_options_a_table_leaves_out_are_the_algorithms_defaults():
    by_hand = minimal_table(16, [(0, "throttled", ""), (1024, "bruck", "")])  # throttled's window is 8
    tables, _ = translate(by_hand, counterpart("MPICH"), "MPICH")
    assert [s.target for s in tables[0][1]] == [("scattered", 8), ("brucks",)]
    tables, _ = translate(by_hand, counterpart("Intel MPI"), "Intel MPI")
    assert tables[0][1][-1].target == "bruck"


def test_substitution_names_cell_and_cost(tmp_path):
    run = record(tmp_path / "run", {(4, 32768): {("node_aware", "placement=block;ppn=0"): 300,
                                                 ("pairwise", "schedule=shift"): 400, ("native", ""): 500}})
    document = decide.decide([run])
    tables, warnings = translate(document, counterpart("Open MPI"), "Open MPI")
    assert tables[0][1][0].target == ("pairwise", 0)
    assert len(warnings) == 1 and re.match(
        r"4 ranks, 32768 B/peer: node_aware has no Open MPI counterpart; "
        r"using pairwise instead, 1\.3\dx slower than node_aware \(median of per-round ratios; mean over all calls: "
        r"pairwise \d+\.\d us, node_aware \d+\.\d us\)", warnings[0])


def test_a_substitute_is_costed_as_the_choice_was_judged_not_by_a_mean_one_stall_swamps(tmp_path):
    """The demo's cell: node_aware chosen 1.5x as fast as native per round, its mean over all calls 10 ms from one
    stalled round; MPICH has no node_aware, so native takes the cell: the warning says native is the slower, by the
    decision's own ratio, and names each mean (it said "-99.7% (30.0 us vs 10020.0 us)")."""
    run = record(tmp_path / "run", {(2, 8): {("node_aware", "placement=block;ppn=0"): 20, ("native", ""): 30}},
                 stall_at={(2, 8, "node_aware"): 1})
    document = decide.decide([run])
    cell = document.tables[0].ranges[0].cells[0]
    assert cell.algorithm == "node_aware" and cell.speedup_vs_native == pytest.approx(1.5, rel=0.05)
    _, warnings = translate(document, counterpart("MPICH"), "MPICH")
    [said] = warnings
    found = re.fullmatch(r"2 ranks, 8 B/peer: node_aware has no MPICH counterpart; using native instead, (\d\.\d\d)x "
                         r"slower than node_aware \(median of per-round ratios; mean over all calls: native "
                         r"(\d+\.\d) us, node_aware (\d+\.\d) us\)", said)
    assert found, said
    slower, native_us, chosen_us = map(float, found.groups())
    assert slower == round(cell.speedup_vs_native or 0, 2)  # what decide said of the cell, said again
    assert native_us == pytest.approx(30, rel=0.05) and chosen_us == pytest.approx(20 + 200_000 / 20, rel=0.01)
    old = record(tmp_path / "old", {(2, 8): {("node_aware", "placement=block;ppn=0"): 20, ("pairwise", ""): 30}},
                 rounds=None)  # no rounds, no verdicts: the metric's ratio, and no word of rounds
    [said] = translate(decide.decide([old]), counterpart("MPICH"), "MPICH")[1]
    assert re.search(r"using pairwise instead, 1\.[45]\dx slower than node_aware \(mean over all calls: pairwise "
                     r"\d\d\.\d us, node_aware \d\d\.\d us\)$", said), said


def test_export_writes_atomically(library_table, tmp_path):
    target = tmp_path / "rules.txt"
    target.write_text("old")
    export(library_table, "ompi", target)
    assert target.read_text().startswith("rule-file-version-2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decision.json", "rules.txt", "run"]


def test_read_decision_rejects_gaps(tmp_path):
    document = minimal_table(4, [(0, "native", ""), (100, "linear", "")])
    document["tables"][0]["ranges"][0]["bytes_max"] = 50
    path = tmp_path / "gap.json"
    path.write_text(json.dumps(document))
    with pytest.raises(BadInput, match="gap or overlap"):
        decision.read_decision(path)


def test_mixed_dtypes_need_a_choice(tmp_path):
    record(tmp_path / "run", {(4, 64): LIBRARY_TABLE[4, 64]})
    record(tmp_path / "run", {(4, 1024): LIBRARY_TABLE[4, 1024]}, dtype="float64")
    with pytest.raises(BadResults, match="mix points of dtypes float32, float64"):
        decide.decide([tmp_path / "run"])
    assert decide.decide([tmp_path / "run"], dtype="float64").dtype == "float64"


# --- the command line: one clear message, exit 2 ---------------------------------------

def bench(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    """`python -m bench ARGS` run in this process (these commands read files and start nothing), as a finished
    process."""
    code, out, err = bench_here(capsys, *args)
    return subprocess.CompletedProcess(["bench", *args], code, out, err)


def assert_one_error(done, *fragments):
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.lower().startswith("error")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


@needs_mpich("export --format mpich extends the built-in selection tree of MPICH's libmpi")
def test_cli_decide_and_export(library_run, tmp_path, capsys):
    out = tmp_path / "decision.json"
    done = bench(capsys, "decide", str(library_run), "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert " bruck " in done.stdout and "radix=2" not in done.stdout and out.is_file()
    done = bench(capsys, "export", str(out), "--format", "mpich", "-o", str(tmp_path / "mpich.json"))
    assert done.returncode == 0, done.stderr
    assert f"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE={tmp_path / 'mpich.json'}" in done.stdout
    done = bench(capsys, "export", str(out), "--format", "intel")
    assert done.stdout.startswith("I_MPI_ADJUST_ALLTOALL=") and "export I_MPI_ADJUST_ALLTOALL" in done.stderr


def test_cli_bad_input(tmp_path, library_table, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_error(bench(capsys, "decide", str(empty)), "not a results directory")
    header = tmp_path / "header"
    header.mkdir()
    (header / "results.csv").write_text("a,b,c\n1,2,3\n")
    assert_one_error(bench(capsys, "decide", str(header)), "unexpected CSV header")
    invalid = record(tmp_path / "invalid", {(4, 64): {("native", ""): 60}})
    text = (invalid / "results.csv").read_text().replace(",true,", ",false,")
    (invalid / "results.csv").write_text(text)
    assert_one_error(bench(capsys, "decide", str(invalid)), "no valid points")
    mixed = record(tmp_path / "mixed", {(4, 64): {("native", ""): 60}})
    record(mixed, {(4, 1024): {("native", ""): 90}}, dtype="int8")
    assert_one_error(bench(capsys, "decide", str(mixed)), "mix points of dtypes")
    assert_one_error(bench(capsys, "export", str(library_table), "--format", "lam"), "unknown format 'lam'",
                     "ompi, ompi-json, mpich, intel")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert_one_error(bench(capsys, "export", str(broken), "--format", "ompi"), "not valid JSON")
    assert_one_error(bench(capsys, "export", str(tmp_path / "none.json"), "--format", "ompi"), "does not exist")
    assert_one_error(bench(capsys, "decide", str(invalid), "--metric", "mode"), "mode")


def test_formats_listed():
    assert list(formats()) == ["ompi", "ompi-json", "mpich", "intel"]


def test_cells_the_library_ran_slower_go_back_to_native(library_run, tmp_path):
    document = decide.decide([library_run])
    rows = [{"nprocs": 4, "bytes_per_peer": 16384, "ratio": 2.0, "p": 0.001, "verdict": "slower"},  # throttled
            {"nprocs": 4, "bytes_per_peer": 1024, "ratio": 1.5, "p": 0.4, "verdict": "tie"},        # pairwise: noise
            {"nprocs": 4, "bytes_per_peer": 8, "ratio": 0.5, "p": 0.001, "verdict": "faster"}]      # bruck
    document, reverted = revert_slower(document, rows, 0.05)
    assert reverted == ["nprocs=4, 16384 B/peer: throttled:window=2 ran 2.00x slower in the library; back to native"]
    assert spans(table_of(document, 4)) == [
        (0, 255, "bruck", "radix=2"), (256, 4095, "pairwise", "schedule=shift"), (4096, None, "native", "")]
    path = tmp_path / "verified.json"
    decision.write_decision(document, path)
    assert decision.read_decision(path).tables[1].ranges[2].cells[0].reverted_from == "throttled:window=2"


@pytest.mark.parametrize("column,other,message", [
    ("timing", "pipelined", r"mix timing modes \(pipelined, sync\); .* one --timing at a time"),
    ("cache", "cold", r"mix cache modes \(cold, warm\); .* one --cache at a time"),
])
def test_decide_refuses_to_mix_measuring_modes(tmp_path, column, other, message):
    plain = record(tmp_path / "plain", {(2, 8): LIBRARY_TABLE[(2, 8)]})
    seconds = samples_around(20)
    row = row_for(2, 8, "native", "", "float32", 4, seconds)
    setattr(row, column, other)
    recorder = Recorder(tmp_path / other)
    recorder.add(row, seconds)
    recorder.close()
    with pytest.raises(BadResults, match=message):
        decide.decide([plain, tmp_path / other])


def test_every_builtin_candidate_has_a_place_of_its_own_in_the_tie_break():
    from a2a.algos.registry import PLUGIN_SIMPLICITY

    places = {name: a2a.get(name).simplicity for name in a2a.algorithms() if a2a.get(name).candidate}
    assert places["native"] == 0
    assert all(place < PLUGIN_SIMPLICITY for place in places.values()), places
    assert len(set(places.values())) == len(places), "two built-ins share a place: their ties fall to name order"


# native's rows name its default form, as `bench run` records them since native took options
TODAYS_NATIVE = {(2, 8): {("native", "form=blocking"): 30, ("pairwise", "schedule=shift"): 60},
                 (2, 1024): {("native", "form=blocking"): 60, ("pairwise", "schedule=shift"): 20},
                 (2, 16384): {("native", "form=blocking"): 90, ("pairwise", "schedule=shift"): 300}}


def against(compared: Comparison | None) -> Comparison:
    """A comparison the decision made (the test fails where it made none)."""
    assert compared is not None
    return compared


def table_lines(rendered: str) -> list[str]:
    """The rows of a rendered table (below its dashes, above what is said after it)."""
    lines = rendered.splitlines()
    below = lines[next(i for i, line in enumerate(lines) if line.startswith("---")) + 1:]
    return [line for line in below if not line.startswith(("Verdicts:", "No cell has a control"))]


def test_the_speed_up_over_native_is_read_from_its_rows_whatever_options_they_spell_out(tmp_path):
    run = record(tmp_path / "run", TODAYS_NATIVE)
    document = decide.decide([run])
    cells = [c for r in document.tables[0].ranges for c in r.cells]
    assert [c.speedup_vs_native for c in cells] == [1.0, pytest.approx(3.0, rel=0.1), 1.0]
    rendered = decide.render(document)
    assert all(re.search(r" \d+\.\d\dx\b", line) for line in table_lines(rendered))  # none is '-'
    line, stated = decide.summary(document)
    assert re.fullmatch(r"nprocs=2: 0\.\.90 native \(rests on one point, 8\); 91\.\.4095 pairwise \(2\.9\dx as fast as "
                        r"native \(2\.\d\d-3\.\d\d\); rests on one point, 1K\); 4K\.\.inf native \(rests on one point, "
                        r"16K\)", line), line
    assert document.statistic and stated == f"verdicts: {document.statistic}" and "one launch" in stated
    assert "form=" not in rendered and rendered.count(document.statistic) == 1


def test_a_cell_given_back_to_native_merges_with_its_neighbours_into_one_range(tmp_path):
    document = decide.decide([record(tmp_path / "run", TODAYS_NATIVE)])
    document, _ = revert_slower(document, [{"nprocs": 2, "bytes_per_peer": 1024, "ratio": 2.0, "p": 0.001,
                                            "verdict": "slower"}], 0.05)
    assert spans(document.tables[0]) == [(0, None, "native", "form=blocking")]
    assert decide.summary(document)[0] == "nprocs=2: 0..inf native"
    assert document.tables[0].ranges[0].cells[1].vs_native is None


def test_an_overlap_decision_ranks_by_exposed_time_so_full_overlap_beats_a_faster_exchange_that_hides_nothing(
        tmp_path):
    """At one point both computed the same 100 us phase; pairwise's pure exchange is 2.5x native's, but it hides
    behind the phase (2 us exposed) while native's hides nothing (40 us exposed); the exposed samples keep their
    rounds, so the verdict is paired."""
    recorder = Recorder(tmp_path)
    for j, (algorithm, options, pure, exposed) in enumerate([("pairwise", "", 100.0, 2.0),
                                                             ("native", "form=nonblocking", 40.0, 40.0)]):
        compute = samples_around(100.0, seed=j)
        overall = compute + samples_around(exposed, seed=10 + j)
        row = replace(row_for(2, 1024, algorithm, options, "float32", 4, overall), timing="overlap", tests="4",
                      progress="poll", compute_ratio="1", t_pure_us=pure, t_compute_us=100.0,
                      t_overall_us=float(overall.mean() * 1e6), compute_phase_us=100.0)
        recorder.add(row, {"": overall, "compute": compute}, [i // 2 for i in range(20)])
    recorder.close()
    write_meta(tmp_path, {"status": "complete", "mpi_library": "MPICH Version: test"})
    document = decide.decide([tmp_path], metric="median")
    cell = document.tables[0].ranges[0].cells[0]
    assert (cell.algorithm, cell.runner_up) == ("pairwise", "native:form=nonblocking")
    assert cell.value_us == pytest.approx(2.0, rel=0.2) and cell.runner_up_us == pytest.approx(40.0, rel=0.2)
    assert against(cell.vs_native).verdict == "faster" and cell.rounds == 10
    shown = decide.render(document)
    assert "median exposed us" in shown and "rank by the exposed time" in shown


def test_decision_lines_say_what_each_number_compares_and_never_contradict_themselves(tmp_path):
    """Each range's words: the speed over native with its interval, what is within noise of the choice and why it
    won among them; 'within noise of it' only where native is kept, never beside a speed-up; an oversubscribed count
    says the times are the scheduler's; no word of significance."""
    run = record(tmp_path / "run", {(4, 8): {("native", ""): 100, ("linear", ""): 99.5, ("bruck", "radix=2"): 300},
                                    (4, 1024): {("native", ""): 100, ("pairwise", "schedule=shift"): 40,
                                                ("linear", ""): 40.4, ("bruck", "radix=2"): 300},
                                    (4, 65536): {("native", ""): 100, ("bine", ""): 50},
                                    # native's one stall puts its mean far behind throttled's, but it hits one
                                    # round: the paired median leaves the two within noise, and native stays
                                    (4, 1 << 20): {("native", ""): 100, ("throttled", "window=2"): 100,
                                                   ("bine", ""): 130}},
                 stall_at={(4, 1 << 20, "native"): 1})
    meta = read_meta(run)
    meta["by_nprocs"] = {"4": {"oversubscribed": {"vm": {"ranks": 4, "cores": 2}}}}
    write_meta(run, meta)
    line, _ = decide.summary(decide.decide([run]))
    ranges = re.split(r"; (?=\d+[KM]?\.\.)", line.split(": ", 1)[1])
    assert re.fullmatch(r"0\.\.90 native \(the library's own; within noise of it: linear \(0\.9\d-1\.0\d\); rests on "
                        r"one point, 8\)", ranges[0]), ranges
    assert re.fullmatch(r"91\.\.8191 linear \(2\.\d\dx as fast as native \(2\.\d\d-2\.\d\d\); within noise: pairwise; "
                        r"chosen as the simplest of them; rests on one point, 1K\)", ranges[1]), ranges
    assert re.fullmatch(r"8K\.\.262143 bine \(\d\.\d\dx as fast as native \(\d\.\d\d-\d\.\d\d\); rests on one point, "
                        r"64K\)", ranges[2]), ranges
    assert re.fullmatch(r"256K\.\.inf native \(the library's own; within noise of it: throttled:window=2 "
                        r"\(0\.9\d-1\.\d\d\); rests on one point, 1M\) \[oversubscribed \(4 ranks on 2 cores of vm\): "
                        r"these times are the scheduler's as much as the algorithms'\]", ranges[3]), ranges
    for said in ranges:
        assert not ("as fast as native" in said and "within noise of it" in said), said
    rendered = decide.render(decide.decide([run]))
    kept, simpler = table_lines(rendered)[:2]
    assert kept.endswith("the library's own") and simpler.endswith("the simplest"), rendered
    assert "significant" not in rendered + line


def test_old_records_without_rounds_are_untested_keep_native_and_say_why(tmp_path):
    """A record made before rounds holds one block per point: pairwise's block is 2.5x faster, but blocks measure
    when they ran as much as what ran; nothing is called, native stays, and every output says why."""
    run = record(tmp_path / "old", {(4, 1024): {("native", ""): 100, ("pairwise", "schedule=shift"): 40}}, rounds=None)
    document = decide.decide([run])
    cell = document.tables[0].ranges[0].cells[0]
    pairwise = next(c for c in cell.candidates if c.algorithm == "pairwise")
    assert (cell.algorithm, cell.rounds, cell.launches) == ("native", 0, 1)
    assert against(pairwise.vs_native).verdict == "untested" and against(pairwise.vs_native).low is None
    assert "untested: no interleaved rounds (a record made before them)" in decide.summary(document)[0]
    assert "1 cell untested: no interleaved rounds" in decide.decided([run])


def test_a_control_sets_the_noise_floor_below_which_nothing_is_called(tmp_path):
    """pairwise is 1.2x faster than native, beyond the 5 % margin; where the control (native under a second name)
    differed from native by 1.3x, that is within noise and native stays; where the control matched native,
    pairwise wins."""
    points = {(2, 64): {("native", "form=blocking"): 100, ("pairwise", "schedule=shift"): 100 / 1.2},
              (2, 4096): {("native", "form=blocking"): 100, ("pairwise", "schedule=shift"): 100 / 1.2}}
    run = record(tmp_path / "run", points)
    seconds = samples_around(100, seed=7, spread=0.01)
    recorder = Recorder(run)
    for size, factor in ((64, 1.3), (4096, 1.0)):
        recorder.add(row_for(2, size, "control", "form=blocking;of=native;twin=1", "float32", 4, seconds * factor),
                     seconds * factor, [i // 2 for i in range(20)])
    recorder.close()
    document = decide.decide([run])
    noisy, calm = (c for r in document.tables[0].ranges for c in r.cells)
    assert noisy.noise_floor == pytest.approx(1.3, rel=0.05) and noisy.algorithm == "native"
    assert calm.noise_floor == pytest.approx(1.0, abs=0.05) and calm.algorithm == "pairwise"
    assert all(c.algorithm != "control" for cell in (noisy, calm) for c in cell.candidates)
    assert "[noise floor up to 1.3" in decide.summary(document)[0] and "noise floor" in decide.render(document)


def test_launches_are_the_top_level_of_the_bootstrap(tmp_path):
    """Two directories, two launches: the cell rests on both, and the statistic no longer says one launch."""
    first = record(tmp_path / "a", {(2, 8): LIBRARY_TABLE[2, 8]}, launch="2026-01-01T00:00:00")
    second = record(tmp_path / "b", {(2, 8): LIBRARY_TABLE[2, 8]}, launch="2026-01-02T00:00:00")
    document = decide.decide([first, second])
    cell = document.tables[0].ranges[0].cells[0]
    assert (cell.launches, cell.rounds, cell.algorithm) == (2, 20, "pairwise")
    assert document.statistic and "one launch" not in document.statistic and document.schema == "a2a-decision/2"
    assert document.margin == 0.05 and against(cell.vs_native).verdict == "faster"


def test_records_of_different_mpi_libraries_are_refused_unless_forced(tmp_path):
    mpich = record(tmp_path / "mpich", {(2, 8): LIBRARY_TABLE[2, 8]}, mpi_library="MPICH Version: 5.0.2\nmore")
    ompi = record(tmp_path / "ompi", {(2, 8): LIBRARY_TABLE[2, 8]}, mpi_library="Open MPI v5.0.11\nmore")
    with pytest.raises(BadResults) as refused:
        decide.decide([mpich, ompi])
    said = str(refused.value)
    assert "\n" not in said and "MPICH Version: 5.0.2" in said and "Open MPI v5.0.11" in said and "--force-mix" in said
    pooled = decide.decide([mpich, ompi], force=True)
    assert pooled.tables[0].ranges[0].cells[0].samples == 40
    assert decide.decide([mpich, record(tmp_path / "same", {(2, 8): LIBRARY_TABLE[2, 8]},
                                        mpi_library="MPICH Version: 5.0.2\nother build")])  # first lines agree


def test_force_mix_pools_dtypes_under_the_widest(tmp_path):
    record(tmp_path / "run", {(4, 64): LIBRARY_TABLE[4, 64]})
    record(tmp_path / "run", {(4, 64): LIBRARY_TABLE[4, 64]}, dtype="float64")
    document = decide.decide([tmp_path / "run"], force=True)
    assert document.dtype == "float64" and document.tables[0].ranges[0].cells[0].samples == 40


@pytest.mark.launches
def test_cli_margin_and_force_mix(tmp_path, capsys):
    run = record(tmp_path / "run", {(2, 8): LIBRARY_TABLE[2, 8]})
    other = record(tmp_path / "other", {(2, 8): LIBRARY_TABLE[2, 8]}, mpi_library="Open MPI v5.0.11")
    for bad in ("100", "-1", "five"):
        assert_one_error(bench(capsys, "decide", str(run), "--margin", bad), "--margin", "at least 0 and below 100")
    assert_one_error(bench(capsys, "decide", str(run), str(other)), "MPICH Version: test", "Open MPI v5.0.11",
                     "--force-mix")
    done = bench(capsys, "decide", str(run), str(other), "--force-mix", "--margin", "2.5")
    assert done.returncode == 0, done.stderr
    assert "margin 2.5 %" in done.stdout and "Verdicts: median of per-round mean ratios" in done.stdout


def test_an_aa_record_of_twins_decides_native_and_calls_almost_no_twin_different(tmp_path):
    """Four names measured as one schedule (the same times) in 20 cells, under a drift and bursts that move whole
    rounds: interleaved in rounds, decide calls at most 5 % of the comparisons with native different and keeps native
    where it is called nothing; the same machine measured as contiguous blocks fools a rank test on the iterations
    in most cells, and decide leaves such a record untested."""
    names = [("native", ""), ("linear", ""), ("pairwise", "schedule=shift"), ("bruck", "radix=2")]
    rng = np.random.default_rng(65)
    rounds, per, sizes = 10, 3, [8 << k for k in range(20)]
    interleaved, blocks = Recorder(tmp_path / "rounds"), Recorder(tmp_path / "blocks")
    fooled = 0
    for size in sizes:
        slots = rounds * len(names)
        load = np.exp(np.linspace(0, rng.normal(0, 0.4), slots)) * np.repeat(
            np.where(rng.random(rounds) < 0.2, rng.uniform(1.3, 2.0, rounds), 1.0), len(names))
        order = [rng.permutation(len(names)) for _ in range(rounds)]
        timed = []
        for j, (algorithm, options) in enumerate(names):
            slot = [r * len(names) + list(order[r]).index(j) for r in range(rounds)]
            seconds = np.concatenate([1e-4 * load[s] * np.exp(rng.normal(0, 0.05, per)) for s in slot])
            block = np.concatenate([1e-4 * load[j * rounds + r] * np.exp(rng.normal(0, 0.05, per))
                                    for r in range(rounds)])
            interleaved.add(row_for(2, size, algorithm, options, "float32", 4, seconds), seconds,
                            [i // per for i in range(rounds * per)])
            blocks.add(row_for(2, size, algorithm, options, "float32", 4, block), block)
            timed.append(block)
        fooled += any(decide.mann_whitney_p(timed[0], other) < 0.05 for other in timed[1:])
    for recorder in (interleaved, blocks):
        recorder.close()
    cells = [c for r in decide.decide([tmp_path / "rounds"]).tables[0].ranges for c in r.cells]
    called = [e.vs_native.verdict for c in cells for e in c.candidates if e.vs_native]
    assert len(called) == 60 and sum(v in ("faster", "slower") for v in called) <= 3, called
    assert all(c.algorithm == "native" for c in cells if all(e.vs_native is None or e.vs_native.verdict
                                                                != "faster" for e in c.candidates))
    assert fooled >= 10, fooled
    old = [c for r in decide.decide([tmp_path / "blocks"]).tables[0].ranges for c in r.cells]
    assert {c.algorithm for c in old} == {"native"} and all(c.rounds == 0 for c in old)


def test_the_summary_counts_what_the_chosen_as_column_says(tmp_path):
    """A cell where native stays though bruck reads 2 % faster (within the margin) is one the library kept, not
    one that 'went to a simpler algorithm'; the summary's counts are the table's 'chosen as' words."""
    from decide_fixtures import record

    from a2a.analysis.decide import decided

    run = record(tmp_path / "r", {(4, 64): {("native", ""): 50, ("bruck", "radix=2"): 49},
                                  (4, 1024): {("native", ""): 90, ("pairwise", "schedule=shift"): 30}})
    text = decided([run])
    assert "0 cells went to a simpler algorithm and 1 cell kept the library's own, within noise" in text, text
    assert sum(line.rstrip().endswith("the library's own") for line in text.splitlines()) == 1, text


def test_0_bytes_and_times_below_the_timers_floor_are_shown_never_judged(tmp_path):
    """pairwise 3x as fast as native at 0 B, 8 B and 1 KiB, the record's empty timed call 15 us: 0 B (always the
    library's) and 8 B (pairwise's 4 us below that floor) keep native, no tie, every comparison's ratio shown with
    its verdict withheld and the reason in the table; 1 KiB is judged faster. Before, 0 B and 8 B went to pairwise."""
    points = {(2, 0): {("native", ""): 30, ("pairwise", "schedule=shift"): 10},
              (2, 8): {("native", ""): 12, ("pairwise", "schedule=shift"): 4},
              (2, 1024): {("native", ""): 60, ("pairwise", "schedule=shift"): 20}}
    run = record(tmp_path / "run", points)
    harness = {"wtick_us": 0.001, "sync_empty_timed_call_p50_us": 15.0}
    write_meta(run, {**read_meta(run), "by_nprocs": {"2": {"harness": harness}}})
    document = decide.decide([run])
    cells = {c.bytes_per_peer: c for c in document.cells}
    for size in (0, 8):
        cell = cells[size]
        assert (cell.algorithm, cell.tie, cell.tied_with, cell.native_p) == ("native", False, (), None), cell
        told = [e.vs_native for e in cell.candidates if e.vs_native]
        assert told and {s.verdict for s in told} == {"not judged"} and told[0].ratio == pytest.approx(1 / 3, rel=0.1)
    assert cells[1024].algorithm == "pairwise" and cells[1024].vs_native is not None \
        and cells[1024].vs_native.verdict == "faster"
    zero, eight, kib = table_lines(decide.render(document))
    assert re.search(r" 0 +native .* not judged \(0 B: always the library's\)$", zero), zero
    assert re.search(r" 8 +native .* not judged \(below the timer's floor, as the record's harness measured it\)$",
                     eight), eight
    assert re.search(r" 1K +pairwise .* [23]\.\d\dx \([23]\.\d\d-3\.\d\d\)$", kib), kib
    said = decide.decided([run])
    assert "2 cells not judged, the library's own kept: 0 B: always the library's; below the timer's floor" \
        in said and "cells kept the library's own, within noise" in said and "1 cell kept" not in said, said
    assert decide.summary(document)[0].startswith("nprocs=2: 0..90 native (the library's own; not judged: 0 B"), \
        decide.summary(document)[0]
    path = tmp_path / "decision.json"
    decision.write_decision(document, path)
    [kept] = [e.vs_native for e in decision.read_decision(path).tables[0].ranges[0].cells[0].candidates if e.vs_native]
    assert kept.verdict == "not judged" and kept == cells[0].candidates[0].vs_native  # it reads back as written


def test_the_runner_up_is_ranked_and_costed_by_the_verdicts_that_chose_the_cell(tmp_path):
    """node_aware 20 us and native 30 us, one stalled round on node_aware (its mean 10 ms): node_aware is chosen
    1.5x as fast as native, so native is the runner-up by about +50 %, as the choice's verdict says, and the choice
    is the fastest, not 'the simplest'. Before, the runner-up column read native 'by -99.7%', from the means."""
    run = record(tmp_path / "run", {(2, 8): {("node_aware", "placement=block;ppn=0"): 20, ("native", ""): 30}},
                 stall_at={(2, 8, "node_aware"): 1})
    document = decide.decide([run])
    cell = document.tables[0].ranges[0].cells[0]
    assert (cell.algorithm, cell.runner_up, cell.tie) == ("node_aware", "native", False)
    assert cell.speedup_vs_native is not None and cell.margin is not None
    assert cell.margin == pytest.approx(cell.speedup_vs_native - 1, abs=0.01) and 0.35 < cell.margin < 0.65
    assert [c.algorithm for c in cell.candidates] == ["node_aware", "native"]  # the verdicts' order, not the means'
    [row] = table_lines(decide.render(document))
    assert re.search(rf"native +\+{cell.margin * 100:.1f}% +{cell.speedup_vs_native:.2f}x \(", row), row
    assert "the simplest" not in row and "chosen as" not in decide.render(document)
