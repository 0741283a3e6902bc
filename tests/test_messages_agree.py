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
