"""The alpha-beta model: known parameters come back from synthetic results, crossovers by hand, the CLI."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from support import python

from a2a.algos.builtin.bruck import schedule_size
from a2a.analysis import model
from a2a.record import decision
from a2a.record.decision import lookup, parse_options, read_decision
from a2a.record.results import Recorder, Row, read_rows

SIZES = [4 * 4**k for k in range(9)]  # 4 B .. 256 KiB per peer
TRUTH = {"alpha": 20e-6, "alpha_msg": 2e-6, "beta": 1.5e-9, "gamma": 0.4e-9, "alpha_intra": 3e-6, "beta_intra": 0.3e-9,
         "alpha_inter": 40e-6, "beta_inter": 8e-9}


def synthetic(algorithm: str, options: str, shapes: list[tuple[int, int]], noise: float = 0.01,
              seed: int = 1) -> list[Row]:
    """Rows whose medians follow the algorithm's formula with TRUTH, times 1 +- noise."""
    rng = np.random.default_rng(seed)
    formula = model.formula_for(algorithm)
    rows = []
    for nprocs, nnodes in shapes:
        for size in SIZES:
            terms = formula.terms(model.Placement(nprocs, nnodes), size, parse_options(options))
            seconds = sum(c * TRUTH[k] for k, c in terms.items()) * (1 + rng.uniform(-noise, noise))
            rows.append(Row(nprocs, nnodes, nprocs // nnodes, algorithm, options, "float32", size // 4,
                            size, iterations=10, t_p50_us=seconds * 1e6, valid=True))
    return rows


def through_files(rows: list[Row], directory) -> list[Row]:
    """Write rows with the Recorder and read them back, as `bench model` does."""
    recorder = Recorder(directory)
    for row in rows:
        recorder.add(row, [row.t_p50_us * 1e-6] * 3)
    recorder.close()
    return read_rows(directory)


CASES = [  # series, shapes (nprocs, nnodes), parameters that must come back
    ("pairwise", "schedule=shift", [(2, 1), (4, 1), (8, 1)], ["alpha", "beta"]),
    ("linear", "", [(2, 1), (4, 1), (8, 1)], ["alpha", "alpha_msg", "beta"]),
    ("throttled", "window=2", [(2, 1), (4, 1), (8, 1)], ["alpha", "alpha_msg", "beta"]),
    ("native", "", [(2, 1), (4, 1), (16, 1)], ["alpha", "beta"]),
    ("bruck", "radix=2", [(2, 1), (5, 1), (8, 1), (16, 1)], ["alpha", "beta", "gamma"]),
    ("bruck", "radix=3", [(3, 1), (7, 1), (9, 1), (16, 1)], ["alpha", "beta", "gamma"]),
    ("node_aware", "placement=block;ppn=0", [(4, 1), (8, 2), (16, 4), (12, 2)],
     ["alpha_intra", "beta_intra", "alpha_inter", "beta_inter"]),
    ("hierarchical", "placement=block;ppn=0", [(2, 1), (4, 1), (8, 2), (16, 4), (12, 2)],
     ["alpha_intra", "beta_intra", "alpha_inter", "beta_inter", "gamma"]),
    ("linear_sync", "window=2", [(2, 1), (4, 1), (8, 1)], ["alpha", "alpha_msg", "beta"]),
    ("bine", "", [(2, 1), (3, 1), (4, 1), (8, 1)], ["alpha", "beta"]),
    ("dimensional", "dims=auto", [(4, 1), (6, 1), (7, 1), (8, 1)], ["alpha", "beta", "gamma"]),
    ("bruck_zero_copy", "radix=3", [(3, 1), (7, 1), (9, 1), (16, 1)], ["alpha", "beta"]),
    ("multileader", "leaders=2;placement=block;ppn=0", [(2, 1), (4, 1), (8, 2), (16, 4), (12, 2)],
     ["alpha_intra", "beta_intra", "alpha_inter", "beta_inter", "gamma"]),
    ("locality_aware", "groups=1;placement=block;ppn=0", [(2, 1), (4, 1), (8, 1), (8, 2), (16, 4), (12, 2), (24, 3)],
     ["alpha_intra", "beta_intra", "alpha_inter", "beta_inter", "gamma"]),
    ("onesided", "op=put;sync=fence", [(2, 1), (4, 1), (8, 1), (16, 1)], ["alpha", "alpha_msg", "beta"]),
    ("parallel_split", "factor=2", [(2, 1), (3, 1), (4, 1), (7, 1), (8, 1), (16, 1)],
     ["alpha", "beta", "alpha_msg", "gamma"]),
]


@pytest.mark.parametrize("algorithm, options, shapes, expected", CASES, ids=[c[0] + c[1] for c in CASES])
def test_fit_recovers_known_parameters_within_5_percent(algorithm, options, shapes, expected, tmp_path):
    rows = through_files(synthetic(algorithm, options, shapes), tmp_path)
    [fit] = model.fit(rows)
    for name in expected:
        assert fit.status[name] == "fitted", (name, fit.status)
        assert fit.params[name] == pytest.approx(TRUTH[name], rel=0.05), name
    assert fit.error < 0.01
    assert fit.bad_points() == []


def test_exact_data_gives_exact_parameters():
    [fit] = model.fit(synthetic("pairwise", "", [(2, 1), (4, 1)], noise=0))
    assert fit.params == pytest.approx({"alpha": TRUTH["alpha"], "beta": TRUTH["beta"]}, rel=1e-9)
    assert fit.error < 1e-9


def test_terms_one_process_count_cannot_separate_are_folded():
    """At one process count bruck's copy term is proportional to its send term: gamma is folded."""
    rows = synthetic("bruck", "radix=2", [(8, 1)], noise=0)
    [fit] = model.fit(rows)
    assert fit.status == {"alpha": "fitted", "beta": "fitted", "gamma": "folded"}
    assert fit.params["gamma"] == 0
    _, blocks = schedule_size(8, 2)
    folded_beta = TRUTH["beta"] + TRUTH["gamma"] * (2 * 8 + 2 * blocks) / blocks
    assert fit.params["beta"] == pytest.approx(folded_beta, rel=1e-9)
    assert fit.error < 1e-9  # still exact where it was measured


def test_linear_at_one_process_count_extrapolates_with_the_per_message_start_up():
    """At p=2 alpha and alpha_msg are both constant: alpha_msg keeps their sum, so time grows with p."""
    [fit] = model.fit(synthetic("linear", "", [(2, 1)], noise=0))
    assert fit.status == {"alpha_msg": "fitted", "beta": "fitted", "alpha": "folded"}
    assert fit.params["alpha_msg"] == pytest.approx(TRUTH["alpha"] + TRUTH["alpha_msg"])
    assert fit.latency(101) == pytest.approx(100 * fit.latency(2))


def test_unmeasured_link_class_takes_the_measured_one():
    """Measured on one node only: inter-node parameters are assumed equal to intra-node ones."""
    [fit] = model.fit(synthetic("node_aware", "placement=block;ppn=0", [(2, 1), (4, 1), (8, 1)], noise=0))
    assert fit.status["alpha_inter"] == "assumed = alpha_intra"
    assert fit.status["beta_inter"] == "assumed = beta_intra"
    assert fit.params["alpha_inter"] == fit.params["alpha_intra"] == pytest.approx(TRUTH["alpha_intra"])
    assert fit.ppn == 8  # 8 ranks per node assumed beyond the measured counts
    assert fit.placement(64) == model.Placement(64, 8)


def test_virtual_nodes_come_from_the_ppn_option():
    terms = model.formula_for("node_aware").terms(model.Placement(12, 1), 100, {"ppn": "4"})
    assert terms == {"alpha_intra": 1, "beta_intra": 300, "alpha_inter": 2, "beta_inter": 800}
    terms = model.formula_for("hierarchical").terms(model.Placement(12, 1), 100, {"ppn": "4"})
    assert terms == {"alpha_intra": 2, "beta_intra": 2 * 3 * 12 * 100, "alpha_inter": 2,
                     "beta_inter": 2 * 16 * 100, "gamma": 2 * 4 * 12 * 100}


def terms_of(name: str, nprocs: int, nnodes: int, options: str) -> dict[str, float]:
    """The registered formula's terms at 100 bytes per peer, the series' options over the defaults."""
    return model.formula_for(name).terms(model.Placement(nprocs, nnodes), 100, model.series_options(name, options))


def test_node_splitting_schedules_by_hand():
    # 12 ranks as 3 virtual nodes of 4: multileader with 2 leaders of c=2 ranks each
    terms = terms_of("multileader", 12, 1, "ppn=4;leaders=2")
    assert terms == {"alpha_intra": 3, "beta_intra": (2 * 1 * 12 + 1 * 4) * 100, "alpha_inter": 4,
                     "beta_inter": 2 * 2 * 4 * 100, "gamma": 2 * 2 * 12 * 100}
    assert terms_of("multileader", 12, 3, "leaders=1") == terms_of("hierarchical", 12, 3, "")
    # locality_aware, one group of 4 per node: 2 inter partners of 4 blocks, 3 members of 3 blocks
    terms = terms_of("locality_aware", 12, 3, "")
    assert terms == {"alpha_intra": 3, "beta_intra": 900, "alpha_inter": 2, "beta_inter": 800, "gamma": 2400}
    # more groups than ranks per node: capped, as the algorithm caps them
    capped = model.series_options("locality_aware", "groups=8")
    assert capped == {"groups": "8", "ppn": "0", "placement": "block"}  # the record's defaults filled in
    assert model.formula_for("locality_aware").terms(model.Placement(4, 2), 1, capped)["alpha_inter"] == 2


def test_parallel_split_and_onesided_schedules_by_hand():
    # p=8, f=2: 3 aggregated messages of 2 blocks, then one Sendrecv of 4 blocks
    assert model.formula_for("parallel_split").terms(model.Placement(8), 10, {"factor": "2"}) == \
        {"alpha": 2, "alpha_msg": 3, "beta": 100, "gamma": 40}
    # p=6 lowers f=4 to 2 (6 mod 4 = 2), as acoll does
    assert model.formula_for("parallel_split").terms(model.Placement(6), 1, {"factor": "4"}) == \
        model.formula_for("parallel_split").terms(model.Placement(6), 1, {"factor": "2"})
    # p=5, f=4 (5 mod 4 = 1): one group of 4 (3 Sendrecv), the last rank through a leader of 4
    assert model.formula_for("parallel_split").terms(model.Placement(5), 1, {"factor": "4"}) == \
        {"alpha": 4 + 8, "alpha_msg": 0, "beta": 3 + 14, "gamma": 3}
    onesided = model.formula_for("onesided").terms
    assert onesided(model.Placement(8), 1, {"sync": "lock"}) == {"alpha": 6, "alpha_msg": 7, "beta": 7}
    assert onesided(model.Placement(8), 1, {"sync": "pscw"}) == {"alpha": 2, "alpha_msg": 21, "beta": 7}


def test_bruck_schedule_size_by_hand():
    assert schedule_size(8, 2) == (3, 12)  # lg 8 rounds of p/2 blocks
    assert schedule_size(5, 2) == (3, 5)  # {1,3}, {2,3}, {4}
    assert schedule_size(9, 3) == (4, 12)  # digits 1 and 2 at distances 1 and 3, 3 blocks each
    assert schedule_size(4, 4) == (3, 3)  # radix >= p: one round per peer


def test_crossover_hand_example():
    """alpha = 10 us, beta = 1 ns/B: pairwise (p-1)(alpha + m beta) crosses at alpha/beta = 10000 B."""
    params = {"alpha": 10e-6, "beta": 1e-9, "gamma": 0.0}
    pairwise = model.Fit("pairwise", "", model.formula_for("pairwise"), params, {}, [], 8, {8: 1})
    assert pairwise.latency(8) == pytest.approx(70e-6)
    assert pairwise.slope(8) == pytest.approx(7e-9)
    assert pairwise.crossover(8) == pytest.approx(10000)
    assert pairwise.crossover(64) == pytest.approx(10000)
    # bruck radix 2 on 8 ranks: 3 rounds, 12 blocks: 3 alpha = 12 m beta at m = 2500 B
    bruck = model.Fit("bruck", "radix=2", model.formula_for("bruck"), params, {}, [], 8, {8: 1})
    assert bruck.crossover(8) == pytest.approx(2500)
    # linear on 5 ranks, alpha_msg = 2 us: alpha + 4 alpha_msg = 4 m beta at m = 4500 B
    linear = model.Fit("linear", "", model.formula_for("linear"), {**params, "alpha_msg": 2e-6}, {}, [],
                       5, {5: 1})
    assert linear.crossover(5) == pytest.approx(4500)
    assert model.crossover(1e-6, 0.0) == math.inf


def test_points_the_model_misses_are_reported():
    rows = synthetic("pairwise", "", [(2, 1), (4, 1), (8, 1)], noise=0)
    rows[5].t_p50_us *= 4  # one point four times slower than the formula says
    [fit] = model.fit(rows)
    bad = fit.bad_points()
    assert [(r.nprocs, r.bytes_per_peer) for r in bad] == [(rows[5].nprocs, rows[5].bytes_per_peer)]
    assert bad[0].error == pytest.approx(0.75, abs=0.05)


def test_prediction_at_an_unmeasured_process_count():
    [fit] = model.fit(synthetic("pairwise", "", [(2, 1), (4, 1), (8, 1)], noise=0))
    assert fit.predict(1024, 4096) == pytest.approx(1023 * (TRUTH["alpha"] + 4096 * TRUTH["beta"]))


def test_invalid_rows_and_single_rank_points_are_not_fitted():
    rows = synthetic("pairwise", "", [(2, 1), (4, 1)], noise=0)
    rows[0].valid = False
    rows[1].t_p50_us = math.nan
    rows.append(Row(1, 1, 1, "pairwise", "", "float32", 1, 4, t_p50_us=3.0, valid=True))
    [fit] = model.fit(rows)
    assert len(fit.residuals) == len(rows) - 3
    with pytest.raises(model.BadResults, match="no valid measured points"):
        model.fit([rows[0], rows[-1]])


def predicted_document(fits: list[model.Fit], counts: list[int]) -> decision.Decision:
    return model.predicted_decision(fits, counts, SIZES, [], "float32")


def test_predicted_decision_table_covers_every_size():
    fits = model.fit(synthetic("pairwise", "", [(2, 1), (4, 1), (8, 1)], noise=0)
                     + synthetic("bruck", "radix=2", [(2, 1), (4, 1), (8, 1)], noise=0))
    document = predicted_document(fits, [256, 1024])
    assert document.schema == decision.SCHEMA and document.predicted is True
    assert [t.nprocs for t in document.tables] == [256, 1024]
    assert all(t.columns["cache"] == "warm" and t.columns["collective"] == "alltoall"
               for t in document.tables)  # every column written
    for table in document.tables:
        ranges = table.ranges
        assert ranges[0].bytes_min == 0 and ranges[-1].bytes_max is None
        for this, following in zip(ranges, ranges[1:]):
            assert this.bytes_max == following.bytes_min - 1
            assert (this.algorithm, this.options) != (following.algorithm, following.options)
        cells = [c for r in ranges for c in r.cells]
        assert [c.bytes_per_peer for c in cells] == SIZES
        for cell in cells:
            fastest = min(f.predict(table.nprocs, cell.bytes_per_peer) for f in fits)
            assert cell.value_us == pytest.approx(fastest * 1e6, rel=1e-5)
    # small messages go to bruck (fewer rounds), large ones away from it (it sends more bytes)
    first, last = document.tables[0].ranges[0], document.tables[0].ranges[-1]
    assert first.algorithm == "bruck" and last.algorithm != "bruck"


def test_groups_and_timing_modes_are_separate_series():
    """Rows in mesh groups are fitted with the group's size; each timing mode is its own series."""
    plain = synthetic("pairwise", "", [(2, 1), (4, 1)], noise=0)
    grouped = synthetic("pairwise", "", [(2, 1), (4, 1)], noise=0)
    for row in grouped:  # the same times, measured as groups of p inside a mesh of 8 ranks
        row.mesh, row.groups, row.group_size, row.ngroups = "2x4", "z" if row.nprocs == 4 else "y", \
            row.nprocs, 8 // row.nprocs
        row.nprocs = 8
    piped = synthetic("pairwise", "", [(2, 1), (4, 1)], noise=0)
    for row in piped:
        row.timing, row.t_p50_us = "pipelined", row.t_p50_us / 2
    fits = {f.label: f for f in model.fit(plain + grouped + piped)}
    assert sorted(fits) == ["pairwise", "pairwise [mesh 2x4 groups y]", "pairwise [mesh 2x4 groups z]",
                            "pairwise [pipelined timing]"]
    for label in ("pairwise", "pairwise [mesh 2x4 groups y]", "pairwise [mesh 2x4 groups z]"):
        assert fits[label].params == pytest.approx({"alpha": TRUTH["alpha"], "beta": TRUTH["beta"]}, rel=1e-6)
    assert fits["pairwise [pipelined timing]"].params["beta"] == pytest.approx(TRUTH["beta"] / 2, rel=1e-6)
    # group sizes, not the mesh's 8 ranks
    assert fits["pairwise [mesh 2x4 groups y]"].nprocs == [2]
    assert fits["pairwise [mesh 2x4 groups z]"].nprocs == [4]
    document = predicted_document(list(fits.values()), [16])  # mesh groups are not predicted
    assert [(t.nprocs, t.column("timing"), t.column("mesh")) for t in document.tables] == [
        (16, "pipelined", ""), (16, "sync", "")]


def write_results(directory, rows: list[Row]) -> None:
    through_files(rows, directory)
    (directory / "meta.json").write_text(json.dumps({"status": "complete", "mpi_library": "TEST MPI 1.0"}))


@pytest.mark.launches
def test_model_command_prints_fits_predictions_and_writes_the_table(tmp_path):
    results = tmp_path / "run"
    write_results(results, synthetic("pairwise", "schedule=shift", [(2, 1), (4, 1)])
                  + synthetic("native", "", [(2, 1), (4, 1)]))
    output = tmp_path / "predicted.json"
    done = python("-m", "bench", "model", str(results), "--predict-nprocs", "256,1024",
                  "--output", str(output))
    assert done.returncode == 0, done.stderr
    assert "pairwise:schedule=shift" in done.stdout and "alpha=" in done.stdout
    assert "within 50% of every measured point" in done.stdout
    assert "Predicted median time at 1024 processes" in done.stdout
    assert "Predicted decision table" in done.stdout
    document = read_decision(output)  # what `bench export` and the `auto` algorithm read
    assert document.predicted is True and [t.nprocs for t in document.tables] == [256, 1024]
    assert document.mpi_library == "TEST MPI 1.0"
    found = lookup(document, 300, 100)
    assert found and found[0].nprocs == 256


@pytest.mark.launches
def test_model_command_lists_the_points_it_gets_wrong(tmp_path):
    rows = synthetic("pairwise", "", [(2, 1), (4, 1)], noise=0)
    rows[3].t_p50_us *= 10
    write_results(tmp_path, rows)
    done = python("-m", "bench", "model", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "Where the model is wrong: 1 of 18 points off by more than 50%" in done.stdout


@pytest.mark.launches
@pytest.mark.parametrize("args, message", [
    (["--predict-nprocs", "1"], "at least 2"),
    (["--predict-nprocs", "many"], "--predict-nprocs"),
])
def test_model_command_refuses_bad_options(args, message, tmp_path):
    write_results(tmp_path, synthetic("pairwise", "", [(2, 1), (4, 1)]))
    done = python("-m", "bench", "model", str(tmp_path), *args)
    assert done.returncode == 2
    assert done.stderr.count(message) >= 1 and "Traceback" not in done.stderr


@pytest.mark.launches
def test_model_command_refuses_a_directory_without_results(tmp_path):
    done = python("-m", "bench", "model", str(tmp_path))
    assert done.returncode == 2
    assert "not a results directory" in done.stderr and "Traceback" not in done.stderr


def test_new_schedules_terms_by_hand():
    terms = model.formula_for
    # linear_sync: window 2 at 8 ranks exposes 7/2 latencies; window 0 posts everything (one)
    assert terms("linear_sync").terms(model.Placement(8), 10, {"window": "2"}) == {
        "alpha": 3.5, "alpha_msg": 7, "beta": 70}
    assert terms("linear_sync").terms(model.Placement(8), 10, {"window": "0"})["alpha"] == 1
    # bine: 3 steps of 4 blocks at 8 ranks; 6 ranks run pairwise
    assert terms("bine").terms(model.Placement(8), 10, {}) == {"alpha": 3, "beta": 120}
    assert terms("bine").terms(model.Placement(6), 10, {}) == {"alpha": 5, "beta": 50}
    # dimensional 4x2 at 8 ranks: 3 + 1 messages, of 2 and 4 blocks: (3 * 2 + 1 * 4) m; 2 phases
    assert terms("dimensional").terms(model.Placement(8), 10, {"dims": "4x2"}) == {
        "alpha": 4, "beta": 100, "gamma": 320}
    assert terms("dimensional").terms(model.Placement(8), 10, {"dims": "2x2x2"})["alpha"] == 3
    # bruck_zero_copy radix 2 at 8 ranks: 3 rounds of 4 blocks, and no copy term
    assert terms("bruck_zero_copy").terms(model.Placement(8), 10, {"radix": "2"}) == {"alpha": 3, "beta": 120}
