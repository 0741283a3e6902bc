"""Messages that must say what was wrong and what is accepted, in plain grammar."""
from __future__ import annotations

import numpy as np
import pytest
from support import self_comm

import a2a


def test_an_option_of_the_wrong_type_says_what_is_accepted():
    with pytest.raises(a2a.BadOption) as refused:
        a2a.alltoall(self_comm(), np.zeros(4), np.zeros(4), "bruck", radix="abc")
    text = str(refused.value)
    assert "a int" not in text and "accepted" in text, text


def test_an_error_that_names_its_cause_ends_a_job_in_its_one_line(capsys):
    """abort_on_error: an A2AError mid-run (a disk that fills, a plan refused) is its one line and exit 2, not a
    traceback; anything else keeps its traceback."""
    from a2a.errors import BadInput
    from a2a.mpi import abort_on_error

    with pytest.raises(SystemExit) as ended, abort_on_error(self_comm()):
        raise BadInput("results.csv: no space left on device; what was measured before stays")
    assert ended.value.code == 2
    assert capsys.readouterr().err == "error: results.csv: no space left on device; what was measured before stays\n"
    with pytest.raises(SystemExit) as ended, abort_on_error(self_comm()):
        raise KeyError("a bug")
    assert ended.value.code == 1 and "Traceback" in capsys.readouterr().err


def test_too_few_ranks_names_the_launch_that_has_enough(monkeypatch):
    """docs/usage.md: a sweep asked for more ranks than its job has says the launch it needs."""
    import sys

    from a2a.errors import BadConfig
    from a2a.sweep.config import from_options

    monkeypatch.setattr(sys, "argv", ["bench", "run", "--nprocs", "4"])
    with pytest.raises(BadConfig, match=r"world size 2; this job has 2: \S*(mpirun|mpiexec) (.* )?-n 4 .*--nprocs 4"):
        from_options({"nprocs": "4"}, world=2)


@pytest.mark.launches
def test_the_library_named_in_the_record_and_the_header_holds_no_nul(tmp_path):
    """Open MPI's MPI_Get_library_version ends in a NUL byte: neither meta.json nor the printed header keeps it."""
    from support import mpiexec

    done = mpiexec(1, "-m", "bench", "run", "--algorithms", "native", "--sizes", "8", "--iterations", "2",
                   "--output", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    meta = (tmp_path / "run" / "meta.json").read_text()
    assert "\\u0000" not in meta and "\0" not in meta and "\0" not in done.stdout
    from a2a.mpi import library_version
    assert library_version("Open MPI v5.0.9, package: Open MPI\0") == "Open MPI v5.0.9, package: Open MPI"
