"""The tier guard: a test that starts a process its markers do not admit fails before the process starts."""
from __future__ import annotations

import subprocess
import sys

import pytest
from tiers import tier_of


def test_a_command_names_its_tier():
    assert tier_of(["taskset", "-c", "0", "/v/bin/mpiexec", "-n", "8", sys.executable, "-m", "pytest"]) == "nested"
    assert tier_of(["/v/bin/mpiexec", "-n", "2", sys.executable, "-m", "bench", "run"]) == "launches"
    assert tier_of([sys.executable, "-m", "bench", "tune"]) == "launches"
    assert tier_of(["/usr/local/bin/smpirun", "--version"]) == "simgrid"
    assert tier_of(["ip", "netns", "add", "a2a-n0"]) == "netns"
    assert tier_of(["slurmctld", "-D"]) == "slurm"
    assert tier_of(["cc", "-O2", "-o", "x", "x.c"]) is None


def test_an_unmarked_test_cannot_start_a_python_program(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(pytest.fail.Exception, match="mark it @pytest.mark.launches"):
        subprocess.run([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], check=True)
    assert not marker.exists()  # refused before it started


@pytest.mark.launches
def test_a_marked_test_starts_it(tmp_path):
    marker = tmp_path / "ran"
    subprocess.run([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], check=True)
    assert marker.exists()
