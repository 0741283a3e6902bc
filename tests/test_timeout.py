"""--timeout: a visit that runs past it ends the job with one line, leaves its cell unrecorded, and the resume line
it prints finishes the sweep instead of timing out the same way. A stop signal ends a sweep whose ranks are stuck
inside a collective within seconds, the record closed and resumable, not at the --timeout."""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import ROOT, bench, cleaned, is_mpich, launch_command

from a2a.errors import A2AError
from a2a.mpi import clean_launcher_env
from a2a.record.results import read_meta, read_rows
from a2a.sweep.session import STOP_GRACE_SECONDS, StopRequest, longer_timeout, retry_hint

SLEEPY = "tests/plugins/sleepy.py"
STUCK = "tests/plugins/stuck.py"
SECONDS_TO_THE_END = 15.0  # from a stop signal to the end of a job stuck in a collective (about 3 s here)
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


def test_a_stop_signal_not_honoured_within_the_grace_is_handed_to_stuck_and_the_handlers_are_given_back():
    """The thread hears the signal however busy the main thread is; `stuck` runs once the grace is over."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    heard: list[str] = []
    stop = StopRequest(stuck=heard.append)
    with stop.installed():
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = time.monotonic() + STOP_GRACE_SECONDS + 10
        while not heard and time.monotonic() < deadline:
            time.sleep(0.05)
    assert heard == ["SIGUSR1"] and stop()
    assert {signum: signal.getsignal(signum) for signum in before} == before


def test_a_stop_signal_honoured_within_the_grace_is_not_handed_to_stuck():
    heard: list[str] = []
    stop = StopRequest(stuck=heard.append)
    with stop.installed():
        os.kill(os.getpid(), signal.SIGTERM)
        while not stop():
            time.sleep(0.01)
        stop.settled.set()  # as a sweep does once it has closed its record
        time.sleep(STOP_GRACE_SECONDS + 0.5)
    assert heard == [] and stop.name == "SIGTERM"


def stuck_record(out: Path) -> bool:
    """Whether the sweep of test_a_stop_signal... is in its 64 B cell, whose stuck visit never ends."""
    try:
        return "64" in read_meta(out).get("point_in_progress", {}).get("key", [])
    except (OSError, A2AError):  # being written
        return False


@pytest.mark.launches
def test_a_stop_signal_ends_a_sweep_stuck_in_a_collective_within_seconds_and_the_resume_finishes(tmp_path):
    """Ranks 1 and 2 wait in a barrier rank 0 never joins, and rank 0 in the next synchronisation: none runs Python's
    handler. The thread that hears the signal closes the record (the 8 B cell kept) and ends the job; before, the job
    ran on to --timeout's 300 s. MPICH's mpirun passes SIGTERM on, Open MPI's only SIGUSR1."""
    out = tmp_path / "run"
    signum = signal.SIGTERM if is_mpich() else signal.SIGUSR1
    args = ["-m", "bench", "run", "--plugin", STUCK, "--algorithms", "native,stuck", "--sizes", "8,64", "--nprocs",
            "3", "--iterations", "3", "--no-control", "--output", str(out), "--quiet"]
    job = subprocess.Popen(launch_command(3, sys.executable, *args), cwd=ROOT, text=True, start_new_session=True,
                           env=cleaned({**os.environ, "A2A_TEST_STUCK_FROM": "64"}, asleep=True),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not stuck_record(out) and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(3)  # native's visit of the cell is over: the ranks are inside stuck's
        job.send_signal(signum)
        signalled = time.monotonic()
        _, err = job.communicate(timeout=60)
        took = time.monotonic() - signalled
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.communicate()
    name = signal.Signals(signum).name
    assert job.returncode == 143, err
    assert took < SECONDS_TO_THE_END, (took, err)
    assert f"within {STOP_GRACE_SECONDS:g} s of {name} (inside a visit of stuck at 64 B per peer on 3 ranks)" in err
    assert err.count(f"sweep terminated by {name} after 2 of 4 points") == 1, err
    assert f"--resume {out}" in err
    assert read_meta(out)["status"] == f"terminated by {name}"
    assert sorted((r.algorithm, r.bytes_per_peer, r.valid) for r in read_rows(out)) == [("native", 8, True),
                                                                                     ("stuck", 8, True)]

    done = bench(3, "run", "--resume", str(out), "--quiet", timeout=120)  # not stuck now: the 64 B cell measured
    assert done.returncode == 0, done.stderr
    assert sorted((r.algorithm, r.bytes_per_peer) for r in read_rows(out) if r.valid) == \
        [(a, size) for a in ("native", "stuck") for size in (8, 64)]
