"""The suite's MPI mode (tests/conftest.py), run on a small test file under mpiexec -n 2."""
from __future__ import annotations

import os
import time

import pytest
from support import ROOT, mpiexec

pytestmark = pytest.mark.nested  # every test here runs a small pytest under mpiexec -n 2

SAMPLE = '''
import time

import pytest


@pytest.mark.mpi
def test_fails_on_rank_1(comm):
    assert comm.rank != 1, "rank 1 fails on purpose"


@pytest.mark.mpi
def test_collective(comm):
    assert comm.allreduce(1) == comm.size


@pytest.mark.mpi
def test_hangs_on_rank_1(comm):
    if comm.rank == 1:
        time.sleep(600)


def test_single_process():
    raise AssertionError("single-process tests must not run under mpirun")
'''


def run_sample(tmp_path, *selection: str, watchdog: str = "300", timeout: float = 120):
    """mpiexec -n 2 python -m pytest on SAMPLE, with this suite's conftest."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    mpi: collective\n")
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F401,F403\n")
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    # TMPDIR: an aborted job leaves its temporary directories (the schedule cache's) here, not in /tmp
    env = {**os.environ, "PYTHONPATH": str(ROOT), "A2A_TEST_WATCHDOG": watchdog, "TMPDIR": str(tmp_path)}
    return mpiexec(2, "-m", "pytest", "-v", "--color=no", "-p", "no:cacheprovider", str(tmp_path / "test_sample.py"),
                   *selection, env=env, cwd=tmp_path, timeout=timeout)


def test_a_failure_on_one_rank_fails_the_test_on_every_rank(tmp_path):
    done = run_sample(tmp_path, "-k", "not hangs")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "mpirun mode: 2 ranks" in done.stdout
    # rank 0 passed its assertion; the verdict names rank 1's failure
    assert "failed on other ranks: rank 1: AssertionError: rank 1 fails on purpose" in done.stdout
    assert "test_sample.py::test_collective PASSED" in done.stdout
    assert "1 failed, 1 passed, 2 deselected" in done.stdout  # test_single_process did not run


def test_a_hung_test_aborts_the_job_naming_it(tmp_path):
    began = time.monotonic()
    done = run_sample(tmp_path, "-k", "hangs", watchdog="3")
    elapsed = time.monotonic() - began
    assert done.returncode != 0
    assert "test_sample.py::test_hangs_on_rank_1 did not finish within 3 s; aborting the job" in done.stderr
    assert elapsed < 60, f"the hung job took {elapsed:.0f} s to end"
