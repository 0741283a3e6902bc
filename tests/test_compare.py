"""bench compare: one algorithm across two sets of runs, by a2a.record.verdict's unpaired form."""
from __future__ import annotations

from decide_fixtures import record

from a2a.analysis.compare import compare, compared

SIZES = {64: 50, 1024: 200, 16384: 100}  # tuned native's time where the baseline's is 100 us


def side(tmp_path, name: str, launches: int, tuned: bool, rounds: int | None = 10) -> list:
    return [record(tmp_path / f"{name}-{i}", {(4, size): {("native", ""): us if tuned else 100}
                                               for size, us in SIZES.items()}, rounds=rounds, launch=f"{name}-{i}")
            for i in range(launches)]


def test_one_run_a_side_is_compared_by_its_rounds_and_says_the_interval_holds_for_these_launches(tmp_path):
    rows = compare(side(tmp_path, "before", 1, False), side(tmp_path, "after", 1, True))
    by = {row["bytes_per_peer"]: row for row in rows}
    assert [by[s]["verdict"] for s in SIZES] == ["faster", "slower", "tie"]
    assert all(row["unit"] == "rounds" and row["low"] < row["ratio"] < row["high"] for row in rows)
    assert by[64]["high"] < 1 / 1.05 and by[1024]["low"] > 1.05 and by[16384]["low"] < 1 < by[16384]["high"]
    said = compared(side(tmp_path, "b", 1, False), side(tmp_path, "a", 1, True), "native", "median", 0.05)
    assert said.splitlines()[0] == ("Verdicts: ratio of the medians of per-round medians, 95 % interval (bootstrap "
                                    "over rounds: it holds for these launches only), margin 5 %.")
    assert "SLOWER" in said and "same (within the margin)" in said and "significant" not in said


def test_several_launches_a_side_are_the_unit(tmp_path):
    rows = compare(side(tmp_path, "before", 3, False), side(tmp_path, "after", 3, True))
    assert {row["unit"] for row in rows} == {"launches"} and rows[0]["runs"] == (3, 3)
    assert [row["verdict"] for row in rows] == ["faster", "slower", "tie"]


def test_runs_made_before_rounds_are_untested(tmp_path):
    rows = compare(side(tmp_path, "before", 1, False, None), side(tmp_path, "after", 1, True, None))
    assert {row["verdict"] for row in rows} == {"untested"} and rows[0]["ratio"] == 0.5 and rows[0]["p"] is None
    said = compared(side(tmp_path, "b", 1, False, None), side(tmp_path, "a", 1, True, None), "native", "median", 0.05)
    assert "untested (fewer than 3 rounds a side)" in said
