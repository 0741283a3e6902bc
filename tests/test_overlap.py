"""The overlap protocol: OSU's and IMB-NBC's figures on hand-made times, the calibrated compute phase, a run end to
end with its record, bad input, and a library progress thread set up per launch."""
from __future__ import annotations

import json

import numpy as np
import pytest
from support import (
    assert_refused_before_measuring,
    assert_refused_here,
    bench,
    is_mpich,
    needs_mpich,
    needs_simgrid,
    python,
)

from a2a.measure.overlap import Work, slices
from a2a.record.overlap import imb_overlap, osu_overlap, overlap_figures
from a2a.record.results import read_rows, read_samples


def means(*ranks: tuple[float, float, float, float]) -> np.ndarray:
    """Ranks' mean (pure, overall, compute phase, time in its tests)."""
    return np.array(ranks, float)


@pytest.mark.parametrize("ranks, osu, imb", [
    ([(100, 200, 100, 0)], 0, 0),          # overall = pure + compute: nothing hidden
    ([(100, 100, 100, 0)], 100, 100),      # overall = compute: all of it hidden
    ([(100, 150, 100, 10)], 40, 40),       # tests counted as the exchange's (OSU: compute - test; IMB: the same)
    ([(100, 60, 50, 0)], 90, 90),          # IMB divides by max(pure, compute), OSU by pure: alike when pure is larger
    ([(50, 150, 100, 0)], 0, 0),           # compute twice the pure time, nothing hidden
    ([(50, 110, 100, 0)], 80, 40),         # compute larger than pure: OSU divides by pure, IMB by compute
])
def test_the_figures_of_one_rank(ranks, osu, imb):
    found = means(*ranks)
    pure, overall, phase, testing = found[0]
    assert osu_overlap(found) == pytest.approx(max(0, 100 - (overall - (phase - testing)) / pure * 100))
    assert imb_overlap(found) == pytest.approx(100 * max(0, min(1, (pure + phase - testing - overall)
                                                                / max(pure, phase - testing))))
    assert (round(osu_overlap(found)), round(imb_overlap(found))) == (osu, imb)


def test_osu_averages_over_ranks_and_imb_takes_the_slowest_ranks_times():
    found = means((100, 120, 100, 0), (100, 200, 100, 0))
    assert osu_overlap(found) == pytest.approx(100 - (160 - 100) / 100 * 100)  # averages: 40 %
    assert imb_overlap(found) == 0  # the rank whose overall is largest hid nothing


def test_a_points_figures_come_from_the_statistic_of_its_time_columns_so_one_stall_does_not_zero_them():
    """Ten iterations hide a 10 us exchange fully behind a 10 us phase; one stalls 1 ms. Per-rank means would read
    no overlap at all; the medians, which the row's t_pure, t_overall and t_compute columns are, read it whole."""
    samples = {"pure": np.full(10, 10e-6), "overall": np.full(10, 10.5e-6), "phase": np.full(10, 10e-6),
               "testing": np.zeros(10)}
    samples["overall"][3] = 1e-3
    assert overlap_figures(samples) == pytest.approx((95.0, 95.0))
    assert osu_overlap(np.array([[s.mean() for s in samples.values()]])) == 0.0


def test_the_compute_phase_is_calibrated_arithmetic_cut_in_even_slices(monkeypatch):
    work = Work()
    assert 0 < work.unit < 1e-3
    monkeypatch.setattr(work, "_timed", lambda units: units * work.unit)  # as fast as first measured: units stand
    assert work.units(0.02) == round(0.02 / work.unit) and work.units(0) == 0
    monkeypatch.setattr(work, "_timed", lambda units: 2 * units * work.unit)  # twice as slow since: half the units
    assert work.units(0.02) == pytest.approx(0.01 / work.unit, abs=1)
    assert slices(10, 3) == [3, 4, 3] and slices(10, 0) == [10]
    assert slices(2, 5) == [0, 1, 0, 1, 0] and slices(3, 9) == [0, 1, 0] * 3  # more tests than units: spread out


def test_a_cold_first_timing_does_not_size_the_phase(monkeypatch):
    """The phase was rescaled by one timing of its units, cold: the 6.4 us asked at 1 KiB on 2 ranks became one unit,
    and the table's phase (6.4, as asked) disagreed with the compute times (2.7-4.3)."""
    work = Work()
    timings = iter([10.0, 1.0, 1.0, 1.0])  # the first timing ten times too slow (cold), the rest as first measured
    monkeypatch.setattr(work, "_timed", lambda units: next(timings) * units * work.unit)
    assert work.units(0.02) == round(0.02 / work.unit)
    monkeypatch.setattr(work, "_timed", lambda units: units * work.unit)
    assert work.seconds(3) == pytest.approx(3 * work.unit)


@pytest.mark.launches
def test_an_overlap_run_records_both_figures_its_three_times_and_every_iterations_samples(tmp_path):
    out = tmp_path / "run"
    done = bench(2, "run", "--timing", "overlap", "--sizes", "1K,64K", "--algorithms",
                 "native:form=nonblocking,native:form=persistent,pairwise", "--tests", "0,3", "--iterations", "6",
                 "--no-control", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert "OSU %" in done.stdout and "IMB %" in done.stdout and "tests" in done.stdout
    rows = read_rows(out)
    assert len(rows) == 12 and all(r.valid for r in rows), [r.note for r in rows if not r.valid]
    assert {(r.tests, r.progress, r.compute_ratio) for r in rows} == {("0", "poll", "1"), ("3", "poll", "1")}
    for r in rows:
        assert r.t_pure_us > 0 and r.t_overall_us > 0 and r.t_compute_us > 0 and r.compute_phase_us > 0
        assert r.t_exposed_us < r.t_overall_us
        alike = {o.compute_phase_us for o in rows if (o.bytes_per_peer, o.tests) == (r.bytes_per_peer, r.tests)}
        assert alike == {r.compute_phase_us}  # one compute phase per point, whatever the algorithm
        assert 0 <= r.overlap_osu_pct <= 100 and 0 <= r.overlap_imb_pct <= 100
        assert r.t_p50_us == pytest.approx(r.t_overall_us, rel=1e-4)  # the row's times are the overall ones
    testing = read_samples(out, "testing")
    for r in rows:
        assert all(len(read_samples(out, q)[r.key]) == r.iterations for q in ("pure", "compute", "phase"))
        assert (max(testing[r.key]) > 0) == (r.tests == "3")  # time is spent in tests only where there are some
    meta = json.loads((out / "meta.json").read_text())
    assert meta["launches"][0]["progress"] == "poll" and meta["config"]["tests"] == [0, 3]


@pytest.mark.parametrize("args,message", [
    (["--tests", "5"], "--tests go with --timing overlap"),
    (["--timing", "overlap", "--compute-ratio", "-1"], "--compute-ratio '-1'; accepted: 0 or more"),
    (["--timing", "overlap", "--tests", "4", "--algorithms", "native"],
     "native:form=blocking is MPI_Alltoall, which no test reaches while it runs"),
    (["--timing", "overlap", "--algorithms", "native:form=eventually"],
     "native: option form='eventually'; accepted: blocking, nonblocking, persistent"),
    (["--timing", "overlap", "--cache", "cold"], "--cache cold goes with the sync"),
    (["--timing", "overlap", "--compute-us", "-5"], "--compute-us -5.0; accepted: microseconds"),
    (["--timing", "overlap", "--compute-us", "5", "--compute-ratio", "2"], "--compute-ratio and --compute-us both"),
    (["--timing", "overlap", "--progress", "psychic"], "--progress 'psychic'; accepted: poll, thread"),
    (["--timing", "overlap", "--tests", "-3"], "--tests '-3'; accepted: a whole number, 0 or more"),
])
def test_bad_overlap_options_are_one_line_and_exit_2(capsys, tmp_path, args, message):
    assert_refused_here(capsys, ["--sizes", "8", *args], message, tmp_path / "out")


@pytest.mark.launches
def test_all_under_overlap_sweeps_the_librarys_non_blocking_forms_with_a_compute_phase_given(tmp_path):
    out = tmp_path / "run"
    done = bench(2, "run", "--timing", "overlap", "--sizes", "8", "--algorithms", "all", "--tests", "0",
                 "--compute-us", "50", "--iterations", "5", "--nprocs", "2", "--output", str(out), "--quiet",
                 asleep=True)
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert sorted(r.options for r in rows if r.algorithm == "native") == ["form=nonblocking", "form=persistent"]
    assert {(r.compute_us, r.compute_ratio) for r in rows} == {("50", "")}
    assert len({r.compute_phase_us for r in rows}) == 1  # the 50 us asked, in whole units as they took then


@pytest.mark.launches
@needs_mpich("MPICH's MPIR_CVAR_ASYNC_PROGRESS starts a progress thread; Open MPI 5.0 has none")
def test_each_progress_mode_takes_a_launch_of_its_own_set_up_for_it(tmp_path):
    out = tmp_path / "run"
    first = bench(2, "run", "--timing", "overlap", "--sizes", "1K", "--algorithms", "native:form=nonblocking",
                  "--tests", "2", "--progress", "poll,thread", "--iterations", "5", "--output", str(out), "--quiet",
                  asleep=True)  # what each launch records, not its times
    assert first.returncode == 0, first.stderr
    assert "the points with progress thread need a launch each" in first.stderr and "--resume" in first.stderr
    assert {r.progress for r in read_rows(out)} == {"poll"}
    second = bench(2, "run", "--resume", str(out), "--quiet", asleep=True)
    assert second.returncode == 0, second.stderr
    assert {r.progress for r in read_rows(out)} == {"poll", "thread"}
    launches = json.loads((out / "meta.json").read_text())["launches"]
    assert [(launch["progress"], launch["mpi_thread_level"]) for launch in launches] == \
        [("poll", launches[0]["mpi_thread_level"]), ("thread", "multiple")]
    assert launches[0]["status"] == "complete for progress poll" and launches[1]["status"] == "complete"


@pytest.mark.launches
@pytest.mark.skipif(is_mpich(), reason="Open MPI's refusal: MPICH has a progress thread (tested above)")
def test_a_library_without_a_progress_thread_refuses_it(tmp_path):
    assert_refused_before_measuring(["--sizes", "8", "--timing", "overlap", "--progress", "thread"],
                                    "has no asynchronous progress thread for collectives", tmp_path / "out")


@pytest.mark.launches
@needs_simgrid
def test_a_simulated_overlap_replays_start_compute_wait_and_validates_against_a_measured_one(tmp_path):
    """linear posts every message at start, so SMPI moves them all during the compute phase (the bound: nearly all
    hidden); pairwise posts its later rounds at wait, so most of it is not; SMPI's own MPI_Alltoall is blocking."""
    simulated = tmp_path / "sim"
    done = python("-m", "bench", "simulate", "--timing", "overlap", "--compute-ratio", "1", "--nprocs", "4",
                  "--sizes", "1K", "--algorithms", "linear,pairwise,native:selector=mpich", "--output",
                  str(simulated), "--quiet", timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {r.algorithm: r for r in read_rows(simulated)}
    assert all(r.valid and (r.timing, r.tests, r.progress) == ("overlap", "0", "network") for r in rows.values())
    assert rows["linear"].overlap_osu_pct > 90 and rows["pairwise"].overlap_osu_pct < 60
    assert rows["native"].overlap_osu_pct == 0 and "runs before it" in rows["native"].note
    for r in rows.values():  # a compute phase as long as the exchange: overall between the longer and the sum
        assert r.t_compute_us == pytest.approx(r.t_pure_us)
        assert r.t_pure_us <= r.t_overall_us * 1.0001 <= 2.0002 * r.t_pure_us
    measured = tmp_path / "run"
    assert bench(2, "run", "--timing", "overlap", "--nprocs", "2", "--sizes", "1K", "--algorithms", "linear",
                 "--iterations", "5", "--output", str(measured), "--quiet").returncode == 0
    assert python("-m", "bench", "simulate", "--timing", "overlap", "--nprocs", "2", "--sizes", "1K",
                  "--algorithms", "linear", "--output", str(tmp_path / "sim2"), "--quiet").returncode == 0
    compared = python("-m", "bench", "validate", str(measured), str(tmp_path / "sim2"))
    assert compared.returncode == 0 and "simulated overlap %" in compared.stdout, compared.stderr
    mixed = python("-m", "bench", "validate", str(measured), str(tmp_path / "sim"))  # no point in common
    assert mixed.returncode == 2
