"""--timeout: a visit that runs past it ends the job with one line, leaves its cell unrecorded, and the resume line
it prints finishes the sweep instead of timing out the same way."""
from __future__ import annotations

import json
import shlex
import subprocess

import pytest
from support import ROOT, bench

from a2a.mpi import clean_launcher_env
from a2a.record.results import read_rows
from a2a.sweep.session import longer_timeout, retry_hint

SLEEPY = "tests/plugins/sleepy.py"
# rank 0 sleeps 0.15 s in its first call: past a 0.05 s timeout, but the cell ends within the abort's grace, which is
# when its rows used to reach the record, valid, after the error line said none had
STALLED = "sleepy:stall_calls=0:seconds=0.15"


@pytest.mark.launches
@pytest.mark.parametrize("nprocs", [1, 2])
def test_a_visit_past_the_timeout_records_nothing_of_its_cell_and_the_resume_line_finishes(tmp_path, nprocs):
    out = tmp_path / "run"
    ended = bench(nprocs, "run", "--plugin", SLEEPY, "--algorithms", f"native,{STALLED}", "--no-control",
                  "--sizes", "8", "--nprocs", str(nprocs), "--iterations", "2", "--rounds", "1", "--timeout", "0.05",
                  "--output", str(out), "--quiet", timeout=120)
    assert ended.returncode == 124, ended.stderr
    errors = [line for line in ended.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "did not finish within --timeout 0.05 s" in errors[0], ended.stderr
    assert "keeps the 0 points finished before it" in errors[0]
    assert not any(row.valid for row in read_rows(out))
    assert json.loads((out / "meta.json").read_text())["status"].startswith("timeout at ")

    resume = errors[0].rsplit(": ", 1)[1]
    assert resume.endswith("--timeout 300")
    as_root = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"}  # Open MPI as root on 2 cores (usage.md)
    done = subprocess.run(shlex.split(resume) + ["--quiet"], cwd=ROOT, env={**clean_launcher_env(), **as_root},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert sorted(r.algorithm for r in rows) == ["native", "sleepy"] and all(r.valid for r in rows), rows


def test_a_short_timeout_is_raised_on_resume_and_a_long_one_kept():
    assert retry_hint("CMD", 0.001).endswith("CMD --timeout 300")
    assert "--timeout" not in retry_hint("CMD", 300).split("(")[0]


def test_a_longer_timeout_measures_the_point_again():
    meta = {"point_in_progress": {"key": [], "point": "p", "timeout": 0.05}}
    assert longer_timeout(meta, 300) and not longer_timeout(meta, 0.05)
    assert not longer_timeout({"point_in_progress": {"key": [], "point": "p"}}, 300)  # the job died: no timeout
