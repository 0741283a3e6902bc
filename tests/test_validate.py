"""`bench validate`: a simulated record set against a measured one, point by point."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from decide_fixtures import record, row_for

from a2a.analysis.validate import orderings, spearman, validate, verdict
from a2a.errors import BadResults
from a2a.record.results import Recorder, write_meta
from bench.cli import entry

MEASURED = {(4, 1024): {("native", ""): 100, ("pairwise", "schedule=shift"): 200, ("bruck", "radix=2"): 400},
            (4, 65536): {("native", ""): 1000, ("pairwise", "schedule=shift"): 800, ("bruck", "radix=2"): 3000}}


def simulated(directory: Path, points: dict) -> Path:
    """A `bench simulate` record: one sample per point, timing=simulated."""
    recorder = Recorder(directory)
    for (nprocs, size), variants in points.items():
        for (algorithm, options), us in variants.items():
            seconds = np.array([us * 1e-6])
            row = row_for(nprocs, size, algorithm, options, "float32", 4, seconds)
            recorder.add(replace(row, timing="simulated", platform="switch"), seconds)
    recorder.close()
    write_meta(directory, {"status": "complete", "timing": "simulated"})
    return directory


def test_errors_pair_each_measured_point_with_its_simulation(tmp_path):
    measured = record(tmp_path / "m", MEASURED)
    sim = simulated(tmp_path / "s", {
        (4, 1024): {("native", "selector=mpich"): 50, ("native", "selector=ompi"): 7,
                    ("pairwise", "schedule=shift"): 300, ("bruck", "radix=4"): 1},
        (4, 65536): {("native", "selector=mpich"): 900, ("pairwise", "schedule=shift"): 400,
                     ("bruck", "radix=2"): 6000}})
    rows = validate(measured, sim)
    got = {(r["bytes_per_peer"], r["label"]): r for r in rows}
    # bruck:radix=4 was simulated, radix=2 measured: not the same point; the ompi native is not MPICH's
    assert sorted(got) == [(1024, "native"), (1024, "pairwise:schedule=shift"), (65536, "bruck:radix=2"),
                           (65536, "native"), (65536, "pairwise:schedule=shift")]
    for r in rows:
        assert r["error_p50"] == pytest.approx(r["simulated_us"] / r["p50_us"] - 1)
        assert r["error_min"] == pytest.approx(r["simulated_us"] / r["min_us"] - 1)
    assert got[1024, "native"]["simulated_us"] == pytest.approx(50)
    assert got[1024, "native"]["error_p50"] == pytest.approx(-0.5, abs=0.03)  # 50 against about 100
    big = next(s for s in orderings(rows) if s["bytes_per_peer"] == 65536)
    assert big["spearman"] == pytest.approx(1.0)  # same order: pairwise, native, bruck
    assert big["simulated_best"] == big["measured_best"] == "pairwise:schedule=shift"


def test_open_mpi_native_pairs_with_the_ompi_selector(tmp_path):
    measured = record(tmp_path / "m", {(4, 1024): {("native", ""): 100}}, mpi_library="Open MPI v5.0.11")
    sim = simulated(tmp_path / "s", {(4, 1024): {("native", "selector=mpich"): 50, ("native", "selector=ompi"): 80}})
    (row,) = validate(measured, sim)
    assert row["simulated_us"] == pytest.approx(80)


def test_spearman_by_hand():
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1)
    assert spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)  # 1 - 6 * 2 / (4 * 15)
    assert math.isnan(spearman([1, 1], [1, 2]))


def test_nothing_in_common_and_a_measured_record_are_refused(tmp_path, capsys):
    measured = record(tmp_path / "m", MEASURED)
    other = simulated(tmp_path / "s", {(8, 1024): {("bruck", "radix=2"): 1}})
    with pytest.raises(BadResults, match="no point of"):
        validate(measured, other)
    with pytest.raises(SystemExit) as refused:
        entry(["validate", str(measured), str(measured)])
    assert refused.value.code == 2
    assert capsys.readouterr().err.count("is not a `bench simulate` record") == 1
    entry(["validate", str(measured), str(simulated(tmp_path / "t", MEASURED))])
    assert "rank correlation" in capsys.readouterr().out


def test_a_node_aware_variant_measured_at_ppn_0_pairs_with_its_simulation_given_ppn(tmp_path):
    """ppn=0 (found at run time, one node) and --ppn 16 (one node of at most 16) are the same placement at 4 ranks of
    one node; a measurement on 2 nodes of 2 is not."""
    measured = record(tmp_path / "m", {(4, 1024): {("node_aware", "placement=block;ppn=0"): 100,
                                                   ("hierarchical", "placement=block;ppn=0"): 300}})
    sim = simulated(tmp_path / "s", {(4, 1024): {("node_aware", "placement=block;ppn=16"): 120,
                                                 ("hierarchical", "placement=block;ppn=2"): 200}})
    (row,) = validate(measured, sim)
    assert row["label"].startswith("node_aware") and row["simulated_us"] == pytest.approx(120)


def cell_of(tmp_path, simulated_us: dict) -> dict:
    """The one cell of a measurement in which pairwise and bruck cannot be told apart (1 % apart, 5 % spread) and
    native is far slower, against a simulation with these times."""
    measured = record(tmp_path / "m", {(4, 65536): {("pairwise", "schedule=shift"): 100, ("bruck", "radix=2"): 101,
                                                    ("native", ""): 300}})
    sim = simulated(tmp_path / "s", {(4, 65536): {("pairwise", "schedule=shift"): simulated_us["pairwise"],
                                                  ("bruck", "radix=2"): simulated_us["bruck"],
                                                  ("native", "selector=mpich"): simulated_us["native"]}})
    (cell,) = orderings(validate(measured, sim))
    return cell


def test_a_simulated_best_the_measurement_cannot_tell_from_its_best_is_right(tmp_path):
    """The tie set is bench decide's (Mann-Whitney on the samples); the simulated best is right inside it, wrong
    outside; equal simulated times are all the simulated best; the summary line counts the cells."""
    tied = cell_of(tmp_path / "a", {"pairwise": 90, "bruck": 80, "native": 200})
    pairwise, bruck = "pairwise:schedule=shift", "bruck:radix=2"  # the record keeps no option defaults
    assert set(tied["tie_set"]) == {pairwise, bruck} and tied["simulated_best"] == bruck and tied["right"]
    wrong = cell_of(tmp_path / "b", {"pairwise": 90, "bruck": 80, "native": 50})
    assert wrong["simulated_best"] == "native" and not wrong["right"]
    equal = cell_of(tmp_path / "c", {"pairwise": 90, "bruck": 200, "native": 90})
    assert equal["simulated_best"] == f"native = {pairwise}" and equal["right"]
    line = verdict([tied, wrong, equal])
    assert line.startswith("2 of 3 cells have the simulated best in the measured tie set; ")
    assert tied["median_abs_error_p50"] == pytest.approx(np.median([0.1, 1 - 80 / 101, 1 - 200 / 300]), abs=0.02)
