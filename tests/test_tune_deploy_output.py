"""What `bench tune --deploy` prints agrees with itself: the footnote reads its own rows, a slower ratio reads as
slower, a --verify-with program that never ran says so, and 0 B or a time below the timer's floor is never judged."""
from types import SimpleNamespace
from typing import cast

import pytest

from a2a.analysis.decide import versus_native
from a2a.deploy.file import Deployment, served_by
from a2a.deploy.verify import Verdict
from a2a.errors import BadConfig
from a2a.record.decision import SCHEMA, Cell, Decision
from a2a.workflows import tune_deploy
from a2a.workflows.tune_deploy import DeployTune, unjudged, verdicts_table, why_back
from a2a.workflows.tuning import TuneConfig, check_grid

LIBRARY = "the library"
ROWS = [Verdict("alltoall", 2, 8, 25.35, 9.40, 0.3, "tie", LIBRARY),
        Verdict("alltoall", 2, 1024, 10.02, 10.00, 0.01, "slower", LIBRARY),
        Verdict("alltoall", 2, 262144, 174.80, 27.87, 0.2, "tie", LIBRARY),
        Verdict("alltoall", 2, 4096, 5.0, 22.0, 0.01, "faster", "pairwise")]


def test_the_footnote_states_what_its_own_rows_show():
    text = verdicts_table(Deployment("MPICH", []), ROWS, None)  # every row says what ran: the file is not read
    note = text.splitlines()[-1]
    assert "+146.93 us slower (at 256K" in note and "+0.02 us" not in note
    assert "1 of 3 called slower" in note


def test_a_slower_ratio_reads_as_slower_in_every_line():
    text = verdicts_table(Deployment("MPICH", []), ROWS, None)
    assert "6.27x slower" in text and "4.40x" in text and "0.23" not in text
    assert why_back(ROWS[:1], 0, -1) == "8 tie with the file (2.70x slower, p=0.3)"


def test_a_range_slower_than_native_by_the_metric_reads_as_slower():
    slow = [Cell(8, "pairwise", "", 44.0, speedup_vs_native=1 / 4.4), Cell(64, "pairwise", "", 50.0,
                                                                         speedup_vs_native=0.5)]
    assert versus_native(slow, "mean") == "2.00-4.40x slower than native by the mean"
    assert versus_native(slow[:1], "mean") == "4.40x slower than native by the mean"
    mixed = [slow[1], Cell(128, "pairwise", "", 10.0, speedup_vs_native=1.2)]
    assert versus_native(mixed, "mean") == "from 2.00x slower than native to 1.20x as fast as native by the mean"


def test_a_program_to_verify_with_that_never_ran_says_so():
    said: list[str] = []
    # a stand-in with what the method reads (config, meta, say)
    tune = SimpleNamespace(config=SimpleNamespace(verify_with="./app --steps 3"), meta={}, say=said.append)
    DeployTune._program_not_run(cast(DeployTune, tune), "every size the file served was given back to the library")
    assert said == ["--verify-with ./app --steps 3: not run, every size the file served was given back to the "
                    "library (no file left to run it with)"]
    assert tune.meta["program_not_run"] == said[0]
    quiet = SimpleNamespace(config=SimpleNamespace(verify_with=""), meta={}, say=said.append)
    DeployTune._program_not_run(cast(DeployTune, quiet), "anything")
    assert len(said) == 1 and quiet.meta == {}


def test_0_bytes_is_shown_and_never_judged_nor_given_back(tmp_path, monkeypatch):
    """liba2a gives 0 B to the library always: the loop's 2.77x there is its cost of passing the call on, so the
    verification shows it and neither calls it slower nor gives a 0 B range back; 1 KiB, slower, goes back."""
    measured = [Verdict("alltoall", 2, 0, 2.77, 1.0, 0.001, "slower"),
                Verdict("alltoall", 2, 8, 5.0, 10.0, 0.001, "faster"),
                Verdict("alltoall", 2, 1024, 30.0, 10.0, 0.001, "slower")]
    monkeypatch.setattr(tune_deploy, "verify_sizes", lambda *args, **kwargs: list(measured))
    monkeypatch.setattr(tune_deploy, "measured_sizes", lambda *args: [0, 8, 1024])
    said: list[str] = []
    tune = DeployTune(tmp_path / "tune", TuneConfig(["mpiexec"], [2], "0,8,1K", deploy=True), said.append)
    (tmp_path / "tune").mkdir()
    monkeypatch.setattr(tune, "_preload", lambda: tmp_path / "liba2a.so")
    monkeypatch.setattr(tune, "_launch", lambda p: None)
    made = Deployment("MPICH", [], entries=[("alltoall", 2, "*", 0, -1, 0)], schedules=[("pairwise", "data")])
    found = tune._verification(made, Decision(SCHEMA, "mean", 0.05, ()), 1)
    assert [v.verdict for v in found] == ["not judged", "faster", "slower"]
    back = tune._give_back(made, found)
    assert len(back) == 1 and back[0].startswith("alltoall on 2 ranks, 91") and "0..0" not in " ".join(said)
    assert served_by(made, "alltoall", 2, 0) == "pairwise" and served_by(made, "alltoall", 2, 1024) == "the library"
    row = next(line for line in verdicts_table(made, found, None).splitlines() if "  0  " in f" {line} ")
    assert "not judged (0 B: always the library's)" in row and "slower" not in row and "ratio 2.77" in row


def test_times_below_the_timers_floor_are_never_judged_in_a_verification():
    quick = Verdict("alltoall", 2, 8, 0.05, 0.02, 0.001, "slower")
    assert unjudged(quick, 0.1e-6).verdict == "not judged" and unjudged(quick, 0.01e-6).verdict == "slower"


def test_a_file_left_serving_0_bytes_alone_serves_nothing(tmp_path, monkeypatch):
    """Every size that moves bytes given back: the 0 B entry it keeps runs nothing (liba2a gives 0 B to the
    library), so the file is not offered."""
    measured = [Verdict("alltoall", 2, 0, 8.92, 1.0, 1.0, "same"), Verdict("alltoall", 2, 8, 10.0, 10.0, 0.5, "same")]
    monkeypatch.setattr(tune_deploy, "verify_sizes", lambda *args, **kwargs: list(measured))
    monkeypatch.setattr(tune_deploy, "measured_sizes", lambda *args: [0, 8])
    tune = DeployTune(tmp_path / "tune", TuneConfig(["mpiexec"], [2], "0,8", deploy=True), lambda text: None)
    (tmp_path / "tune").mkdir()
    monkeypatch.setattr(tune, "_preload", lambda: tmp_path / "liba2a.so")
    monkeypatch.setattr(tune, "_launch", lambda p: None)
    made = Deployment("MPICH", [], entries=[("alltoall", 2, "*", 0, -1, 0)], schedules=[("pairwise", "data")])
    made, verdicts, back = tune._verified(made, Decision(SCHEMA, "mean", 0.05, ()))
    assert back == ["alltoall on 2 ranks, 1.. B per peer: 8 same with the file (1.00x, p=0.5)"]
    assert made.serves() and not tune_deploy.serves_calls(made)  # 0..0 B still names pairwise
    assert list(tune.meta["steps"]) == ["verify-1"]  # not verified again: nothing left to verify


@pytest.mark.parametrize("alpha,least", [(0.05, 6), (0.01, 8)])
def test_deploy_needs_the_pairs_the_sign_test_can_call_different(alpha, least):
    """The verification judges by the sign test over pairs of launches, which calls nothing different over fewer
    than least_pairs(alpha): --rounds below that refused in one line naming what is accepted (3 passed before)."""
    too_few = TuneConfig(["no-such-launcher"], [2], "8", deploy=True, rounds=least - 1, alpha=alpha)
    with pytest.raises(BadConfig) as refused:
        check_grid(too_few, (), ())
    said = str(refused.value)
    assert said == (f"--rounds {least - 1}: --deploy judges each size by the sign test over pairs of launches (with "
                    f"the file beside the one without it), which calls nothing different at --alpha {alpha:g} over "
                    f"fewer than {least} pairs; accepted: --rounds {least} or more") and "\n" not in said
    enough = TuneConfig(["no-such-launcher"], [2], "8", deploy=True, rounds=least, alpha=alpha)
    with pytest.raises(BadConfig, match="--launcher no-such-launcher: no-such-launcher is not found"):
        check_grid(enough, (), ())  # past the rounds, to the launcher
