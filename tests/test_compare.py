"""bench compare: one algorithm across two sets of launches, by a2a.record.verdict's rule across launches (a launch
is the unit a tuning changes), 0 B and times below the timer's floor never judged."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from decide_fixtures import minimal_table, record
from support import bench_here, is_mpich, python

from a2a.analysis.compare import compare, compared
from a2a.analysis.decide import decide
from a2a.record.decision import read_decision, write_decision
from a2a.record.results import read_meta, write_meta

SIZES: dict[int, float] = {64: 50, 1024: 200, 16384: 100}  # tuned native's time where the baseline's is 100 us
ONE_SIDE = ("untested (one launch a side: a launch is the unit a tuning changes; run 3 or more a side, "
            "alternating)")


def stamp(second: int) -> str:
    """A launch's start as a record stamps it."""
    return f"2026-12-07T08:{second // 60:02d}:{second % 60:02d}+00:00"


def side(tmp_path: Path, name: str, launches: int, tuned: bool, rounds: int | None = 10,
         stamps: list[str] | None = None, sizes: dict[int, float] = SIZES) -> list[Path]:
    return [record(tmp_path / f"{name}-{i}", {(4, size): {("native", ""): us if tuned else 100}
                                               for size, us in sizes.items()}, rounds=rounds,
                   launch=stamps[i] if stamps else f"{name}-{i}")
            for i in range(launches)]


def by_size(rows: list[dict]) -> dict[int, dict]:
    return {row["bytes_per_peer"]: row for row in rows}


def test_one_launch_a_side_is_described_and_never_judged(tmp_path):
    """A 2x difference between two single launches is what one launch sharing the cores shows: the ratio and its
    interval are printed, the verdict is untested and says why (the old rule called it faster and SLOWER)."""
    rows = compare(side(tmp_path, "before", 1, False), side(tmp_path, "after", 1, True))
    by = by_size(rows)
    assert {row["verdict"] for row in rows} == {"untested"} and {row["unit"] for row in rows} == {"rounds"}
    assert all(row["low"] < row["ratio"] < row["high"] and row["p"] is None for row in rows)
    assert by[64]["ratio"] == pytest.approx(0.5, rel=0.05) and by[1024]["ratio"] == pytest.approx(2, rel=0.05)
    said = compared(side(tmp_path, "b", 1, False), side(tmp_path, "a", 1, True), "native", "median", 0.05)
    assert said.splitlines()[0] == ("Verdicts: ratio of the medians of per-round medians, 95 % interval (bootstrap "
                                    "over rounds), described only: fewer than 3 launches a side carry no verdict.")
    assert said.count(ONE_SIDE) == 3 and "SLOWER" not in said and "faster" not in said


def test_two_launches_a_side_are_described_too(tmp_path):
    stamps = [stamp(k) for k in range(4)]
    said = compared(side(tmp_path, "b", 2, False, stamps=stamps[::2]), side(tmp_path, "a", 2, True,
                                                                          stamps=stamps[1::2]),
                    "native", "median", 0.05)
    assert "untested (2 launches a side: a launch is the unit a tuning changes; run 3 or more" in said
    assert "SLOWER" not in said


def test_several_launches_a_side_are_the_unit(tmp_path):
    rows = compare(side(tmp_path, "before", 3, False), side(tmp_path, "after", 3, True))
    assert {row["unit"] for row in rows} == {"launches"} and rows[0]["runs"] == (3, 3)
    assert rows[0]["launches"] == (3, 3) and [row["verdict"] for row in rows] == ["faster", "slower", "tie"]


def test_launches_in_pairs_are_paired_with_their_neighbours_by_the_sign_test(tmp_path):
    stamps = [stamp(10 * k) for k in range(12)]
    rows = compare(side(tmp_path, "before", 6, False, stamps=stamps[::2]),
                   side(tmp_path, "after", 6, True, stamps=stamps[1::2]))
    assert {row["unit"] for row in rows} == {"launch pairs"} and {row["p"] for row in rows} == {2 / 64, 1}
    assert [row["verdict"] for row in rows] == ["faster", "slower", "tie"]
    one_after_the_other = compare(side(tmp_path, "b", 6, False, stamps=stamps[:6]),
                                  side(tmp_path, "a", 6, True, stamps=stamps[6:]))
    assert {row["unit"] for row in one_after_the_other} == {"launches"}
    said = compared(side(tmp_path, "b3", 3, False, stamps=stamps[:6:2]),
                    side(tmp_path, "a3", 3, True, stamps=stamps[1:6:2]), "native", "median", 0.05)
    assert said.count("untested (3 pairs of launches: fewer than 6 cannot show a difference at alpha 0.05") == 3


def test_runs_made_before_rounds_are_untested(tmp_path):
    rows = compare(side(tmp_path, "before", 1, False, None), side(tmp_path, "after", 1, True, None))
    assert {row["verdict"] for row in rows} == {"untested"} and rows[0]["ratio"] == 0.5 and rows[0]["p"] is None
    said = compared(side(tmp_path, "b", 1, False, None), side(tmp_path, "a", 1, True, None), "native", "median", 0.05)
    assert said.count(ONE_SIDE) == 3


def test_0_bytes_is_shown_and_never_judged_nor_given_back(tmp_path):
    """0 B always goes to the library: a 3x difference there is the cost of passing the call on, not a verdict."""
    stamps = [stamp(10 * k) for k in range(12)]
    sizes: dict[int, float] = {0: 300, 64: 50}
    baseline = side(tmp_path, "before", 6, False, stamps=stamps[::2], sizes=sizes)
    tuned = side(tmp_path, "after", 6, True, stamps=stamps[1::2], sizes=sizes)
    by = by_size(compare(baseline, tuned))
    assert by[0]["verdict"] == "not judged" and by[0]["p"] is None and by[0]["ratio"] == pytest.approx(3, rel=0.05)
    assert by[0]["why"] == "0 B: always the library's" and by[64]["verdict"] == "faster"
    table = tmp_path / "decision.json"
    table.write_text(json.dumps(minimal_table(4, [(0, "pairwise", ""), (64, "bruck", "")])))
    said = compared(baseline, tuned, "native", "median", 0.05, table, tmp_path / "verified.json")
    assert "not judged (0 B: always the library's)" in said and "back to native" not in said
    assert "nothing was slower: the table stands" in said


def test_times_below_the_timers_floor_are_never_judged(tmp_path):
    """A record whose empty timed call took 60 us: a 50 us time there is the timer's, not the call's."""
    stamps = [stamp(10 * k) for k in range(12)]
    baseline = side(tmp_path, "before", 6, False, stamps=stamps[::2])
    tuned = side(tmp_path, "after", 6, True, stamps=stamps[1::2])
    harness = {"wtick_us": 0.001, "wtime_step_us": 0.05, "sync_empty_timed_call_p50_us": 60.0}
    write_meta(tuned[0], {**read_meta(tuned[0]), "by_nprocs": {"4": {"harness": harness}}})
    by = by_size(compare(baseline, tuned))
    assert by[64]["verdict"] == "not judged" and "below the timer's floor of 60 us a call" in by[64]["why"]
    assert by[1024]["verdict"] == "slower" and by[16384]["verdict"] == "tie"


@pytest.mark.launches
def test_the_command_says_one_launch_a_side_is_untested_and_exits_0(tmp_path):
    done = python("-m", "bench", "compare", "--baseline", str(side(tmp_path, "b", 1, False)[0]),
                  "--tuned", str(side(tmp_path, "a", 1, True)[0]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(ONE_SIDE) == 3 and "SLOWER" not in done.stdout


@pytest.mark.launches
@pytest.mark.parametrize("args, message", [
    (["--launches", "3", "--baseline", "x"], "--launches times native itself: drop --baseline"),
    (["--baseline", "x", "--tuned", "y", "--env", "A=1"], "--env, --results: only with --launches N"),
    (["--tuned", "y"], "give --baseline DIR and --tuned DIR (each repeatable), or --launches N to make them"),
    (["--launches", "3", "--env", "no equals"], "--env 'no equals': accepted: KEY=VALUE"),
    (["--launches", "3", "--with", "README.md"], "--with README.md: neither a deploy file nor KEY=VALUE lines"),
])
def test_bad_input_is_one_line_before_any_launch(tmp_path, args, message):
    done = python("-m", "bench", "compare", *args, "--results", str(tmp_path / "c"))
    assert done.returncode == 2 and done.stderr.count(message) == 1, done.stderr
    assert not (tmp_path / "c").exists()


@pytest.mark.launches
def test_compare_makes_launches_in_pairs_itself_and_pairs_them(tmp_path, capsys):
    """--launches 3: three pairs of launches of the library's own call, the tuned side under the file of KEY=VALUE
    lines, one pair of three the tuned side first; compared as launch pairs, 0 B not judged. The commands run again
    on the finished folder run in this process (one that launched again would still say so)."""
    variable = "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM" if is_mpich() else "OMPI_MCA_coll_tuned_use_dynamic_rules"
    lines = tmp_path / "tuned.env"
    lines.write_text(f"{variable}={'pairwise' if is_mpich() else '0'}\n")
    out = tmp_path / "c"
    done = python("-m", "bench", "compare", "--launches", "3", "--nprocs", "2", "--sizes", "0,8", "--iterations",
                  "3", "--with", str(lines), "--results", str(out), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Verdicts: median of the ratios of neighbouring launches in pairs" in done.stdout
    assert "not judged (0 B: always the library's)" in done.stdout
    starts = sorted((read_meta(out / f"{name}-{k}")["start"], name, k) for k in (1, 2, 3)
                    for name in ("baseline", "tuned"))
    assert [k for _, _, k in starts] == [1, 1, 2, 2, 3, 3]  # in pairs of neighbours
    assert [name for _, name, _ in starts[4:]] == ["tuned", "baseline"]  # the last pair the tuned side first
    assert read_meta(out / "tuned-2")["tuning"][variable] and variable not in read_meta(out / "baseline-2")["tuning"]
    code, said, _ = bench_here(capsys, "compare", "--launches", "3", "--nprocs", "2", "--sizes", "0,8",
                               "--iterations", "3", "--with", str(lines), "--results", str(out))
    assert code == 0 and "baseline-1:" not in said  # nothing launched again
    code, _, err = bench_here(capsys, "compare", "--launches", "3", "--nprocs", "2", "--sizes", "0,8", "--iterations",
                              "3", "--results", str(out))
    assert code == 2 and "already holds other launches" in err


@pytest.mark.launches
def test_the_command_reports_faster_and_slower_and_reverts_slower_cells(tmp_path):
    """Six pairs of launches (moved from test_end_to_end, where one launch a side was judged): twice as fast at 64 B,
    twice as slow at 1 KiB, the same at 16 KiB; the slower cell's choice goes back to native."""
    stamps = [stamp(10 * k) for k in range(12)]
    baseline = side(tmp_path, "baseline", 6, False, stamps=stamps[::2])
    tuned = side(tmp_path, "tuned", 6, True, stamps=stamps[1::2])
    table = tmp_path / "decision.json"
    write_decision(decide([record(tmp_path / "sweep", {
        (4, 64): {("native", ""): 60, ("bruck", "radix=2"): 20},
        (4, 1024): {("native", ""): 90, ("pairwise", "schedule=shift"): 30},
        (4, 16384): {("native", ""): 90, ("throttled", "window=2"): 30}})]), table)
    sides = [*(f"--baseline={d}" for d in baseline), *(f"--tuned={d}" for d in tuned)]
    done = python("-m", "bench", "compare", *sides, "--revert-slower", str(table), "--output",
                  str(tmp_path / "verified.json"))
    assert done.returncode == 0, done.stderr
    verdicts = {size: next(line.split() for line in done.stdout.splitlines() if f"  {size}  " in line)
                for size in ("64", "1K", "16K")}  # ... bytes/peer, default, tuned, ratio, interval, p, verdict
    assert verdicts["64"][-4:] == ["0.50", "0.50-0.50", "0.031", "faster"], done.stdout  # 6 of 6 pairs: 2/64
    assert verdicts["1K"][-4:] == ["2.00", "2.00-2.00", "0.031", "SLOWER"], done.stdout
    assert verdicts["16K"][-7:-4] == ["1.00", "1.00-1.00", "1.000"], done.stdout  # within the 5 % margin
    assert verdicts["16K"][-4:] == ["same", "(within", "the", "margin)"], done.stdout
    assert "nprocs=4, 1024 B/peer: pairwise ran 2.00x slower in the library; back to native" in done.stdout
    verified = read_decision(tmp_path / "verified.json")
    assert [r.algorithm for r in verified.tables[0].ranges] == ["bruck", "native", "throttled"]
    alone = python("-m", "bench", "compare", *sides, "--revert-slower", str(table))
    assert alone.returncode == 2 and alone.stderr.count("--revert-slower and --output go together") == 1
