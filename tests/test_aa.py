"""The A/A self-check (a2a.analysis.aa): one schedule under several names is not called different; a twin that is
really slower is, and the floor of native's own control is what both are judged against."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from decide_fixtures import row_for

from a2a.analysis.aa import aa_check
from a2a.record.results import Recorder, write_meta

TWINS = [("native", "form=blocking"), ("control", "form=blocking;of=native;twin=1"), ("pairwise", "schedule=shift"),
         ("control", "form=blocking;of=pairwise;twin=1"), ("control", "form=blocking;of=pairwise;twin=2")]


def record(directory: Path, slower: float = 1.0) -> Path:
    """A record of 4 sizes, 25 rounds: every name of one schedule drawn alike (the second pairwise twin `slower`)."""
    rng, recorder = np.random.default_rng(5), Recorder(directory, launch="L")
    for size in (8, 64, 512, 4096):
        drift = np.exp(rng.normal(0, 0.3, 25))  # load that comes and goes, the same for a round's visits
        for algorithm, options in TWINS:
            factor = slower if options.endswith("twin=2") else 1.0
            seconds = 1e-5 * factor * drift * np.exp(rng.normal(0, 0.03, 25))
            recorder.add(row_for(2, size, algorithm, options, "float32", 4, seconds), seconds, rounds=range(25))
    recorder.close()
    write_meta(directory, {"status": "complete", "mpi_library": "MPICH Version: test"})
    return directory


def test_twins_of_one_schedule_are_not_called_different(tmp_path):
    check = aa_check([record(tmp_path / "aa")])
    assert (check.called, check.tested, check.cells) == (0, 12, 4) and check.passed, check.line()


def test_a_twin_really_slower_is_called_different_and_the_check_fails(tmp_path):
    check = aa_check([record(tmp_path / "ab", slower=1.5)])
    assert check.called == 8 and check.tested == 12 and not check.passed, check.line()  # twin 2 against the other two
    assert "FAILED" in check.line()
