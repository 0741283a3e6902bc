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
