"""What commands say beside their numbers: one line where one line is due, the same words for the same mistake."""
from __future__ import annotations

import subprocess

import pytest
from support import ROOT, bench, bench_here


@pytest.mark.launches
def test_quiet_still_says_where_the_record_is(tmp_path):
    out = tmp_path / "run"
    done = bench(2, "run", "--algorithms", "native", "--sizes", "8", "--nprocs", "2", "--iterations", "2", "--quiet",
                 "--output", str(out))
    assert done.returncode == 0 and done.stdout == "" and done.stderr.strip() == f"results: {out}", done.stderr


@pytest.mark.launches
def test_points_all_skipped_for_memory_are_one_reason(tmp_path):
    """Each size's skip names its own bytes, yet it is one reason: 'all N points', not 'the others for 1 other'."""
    done = bench(2, "run", "--algorithms", "native,pairwise", "--sizes", "8,1K", "--nprocs", "2", "--max-memory", "1",
                 "--output", str(tmp_path / "run"))
    assert done.returncode == 1, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error: no point was measured")]
    assert "above --max-memory 1 (all 6 points)" in line and "other reason" not in line, line


def test_the_slurm_hostfile_says_so_when_scontrol_is_missing(tmp_path):
    """Outside Slurm's reach (no scontrol on PATH) the hostfile script fails in one line, not with nothing."""
    env = {"PATH": str(tmp_path), "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"}
    done = subprocess.run(["/bin/bash", str(ROOT / "hostfiles" / "from-slurm.sh"), "mpich"], env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.count("\n") == 1 and "scontrol is not on PATH" in done.stderr, done.stderr


@pytest.mark.launches
def test_the_suggested_tune_races_only_what_a_decision_can_choose(tmp_path, capsys, small_sweep):
    """auto (a table's replay) and control (the noise floor) are measured but never chosen: the next command the
    sweep suggests leaves them out. The table is decided from the session's sweep of native and linear."""
    table = tmp_path / "table.json"
    assert bench_here(capsys, "decide", str(small_sweep), "-o", str(table))[0] == 0
    done = bench(2, "run", "--algorithms", "auto,native,linear", "--table", str(table), "--sizes", "8", "--nprocs",
                 "2", "--iterations", "3", "--output", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    [tune] = [line for line in done.stdout.splitlines() if " tune " in line]
    assert "--algorithms native,linear" in tune and "auto" not in tune and "control" not in tune, tune


def test_a_misspelt_algorithm_is_asked_about_as_a_misspelt_config_key_is(capsys):
    """One helper (a2a.errors.unknown) words both: the name meant, where one is close, then what is accepted."""
    import a2a

    code, out, err = bench_here(capsys, "run", "--algorithms", "native,pairwse", "--sizes", "8")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: unknown algorithm 'pairwse'; did you mean 'pairwise'? registered: auto, "), err
    with pytest.raises(a2a.UnknownAlgorithm, match=r"^unknown algorithm 'zzz'; registered: auto, "):
        a2a.get("zzz")  # nothing close: no guess


@pytest.mark.parametrize("command", [["show", "{}"], ["decide", "{}"], ["model", "{}"], ["plot", "{}"],
                                     ["validate", "{}", "{other}"], ["validate", "{other}", "{}"]],
                         ids=["show", "decide", "model", "plot", "validate-measured", "validate-simulated"])
def test_every_command_that_reads_a_record_says_a_missing_or_wrong_folder_alike(tmp_path, capsys, command):
    """One check (bench.options.results_folders) in one line, not click's four; {other} is a folder that exists."""
    (tmp_path / "file").write_text("")
    for given, why in ((tmp_path / "nowhere", "no such folder"), (tmp_path / "file", "a file")):
        code, out, err = bench_here(capsys, *(part.format(given, other=tmp_path) for part in command))
        assert (code, out, err) == (2, "", f"error: {given}: not a results directory ({why})\n")
