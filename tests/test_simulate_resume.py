"""`bench simulate --resume` keeps a record to one SimGrid: a record of Debian's 3.32 is refused under the 4.1 first on
PATH (and the other way), unless forced, the way `bench run --resume` refuses another MPI library."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import bench_here, python

from a2a.simulate import simgrid

DEBIAN = Path("/usr/bin/smpirun")
pytestmark = [pytest.mark.simgrid, pytest.mark.launches,
              pytest.mark.skipif(not DEBIAN.exists() or not simgrid.smpirun() or simgrid.version() == "3.32",
                                 reason="needs Debian's SimGrid 3.32 (/usr/bin/smpirun) and another first on PATH")]


def interrupted_on_debian(directory: Path) -> list[str]:
    """A 4-rank simulation on SimGrid 3.32 cut to its first point, as an interrupted one leaves it: results.csv."""
    done = python("-m", "bench", "simulate", "--platform", "torus:2x2", "--nprocs", "4", "--sizes", "8,1K",
                  "--algorithms", "pairwise", "--copy-bandwidth", "5e9", "--output", str(directory), "--quiet",
                  env={**os.environ, simgrid.SMPIRUN_VARIABLE: str(DEBIAN)}, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = (directory / "results.csv").read_text().splitlines()[:2]
    (directory / "results.csv").write_text("\n".join(lines) + "\n")
    return lines


def test_resume_under_another_simgrid_is_refused_unless_forced(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(simgrid.SMPIRUN_VARIABLE, raising=False)
    directory = tmp_path / "sim"
    lines = interrupted_on_debian(directory)

    code, _, err = bench_here(capsys, "simulate", "--resume", str(directory))
    assert code == 2, err
    said = f"was simulated on SimGrid 3.32 ({DEBIAN}), but this smpirun ({simgrid.smpirun()}) is SimGrid " \
           f"{simgrid.version()}"
    assert err.count(said) == 1 and len(err.strip().splitlines()) == 1, err
    assert "--force-resume" in err and (directory / "results.csv").read_text().splitlines() == lines

    code, _, err = bench_here(capsys, "simulate", "--resume", str(directory), "--force-resume", "--quiet")
    assert code == 0, err
    meta = json.loads((directory / "meta.json").read_text())
    assert [launch["simgrid"] for launch in meta["launches"]] == ["3.32", simgrid.version()]
    assert len((directory / "results.csv").read_text().splitlines()) == 3
