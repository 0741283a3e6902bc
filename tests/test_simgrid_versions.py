"""`bench simulate` on Debian 12's SimGrid 3.32 (libsimgrid-dev, /usr/bin/smpirun), chosen with A2A_SMPIRUN beside
the 4.1 first on PATH: both replayers simulate every point, or the simulation stops before capturing."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from support import python

from a2a.simulate import simgrid

DEBIAN = Path("/usr/bin/smpirun")
pytestmark = [pytest.mark.simgrid, pytest.mark.launches,
              pytest.mark.skipif(not DEBIAN.exists(), reason="no Debian SimGrid (/usr/bin/smpirun): "
                                 "apt-get install libsimgrid-dev (.ci/setup.d/simgrid-debian.sh)")]


def simulated(directory: Path, *args: str) -> tuple[list[dict[str, str]], dict, str]:
    """`bench simulate ARGS` on Debian's SimGrid, which must succeed: its rows, meta.json and stderr."""
    done = python("-m", "bench", "simulate", *args, "--output", str(directory),
                  env={**os.environ, simgrid.SMPIRUN_VARIABLE: str(DEBIAN)}, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(directory / "results.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and all(r["valid"] == "true" for r in rows), [r["note"] for r in rows]
    return rows, json.loads((directory / "meta.json").read_text()), done.stderr


@pytest.mark.parametrize("replayer", simgrid.REPLAYERS)
def test_the_issues_torus_simulates_on_debians_simgrid(tmp_path, replayer):
    """Issue #40's command: 64 ranks on a 4x4x4 torus, 8 B and 1 MiB, pairwise and bruck: every point simulated."""
    rows, meta, err = simulated(tmp_path, "--platform", "torus:4x4x4", "--nprocs", "64", "--sizes", "8,1M",
                                "--algorithms", "pairwise,bruck", "--replayer", replayer)
    assert len(rows) == 4 and meta["simgrid"] == "3.32" and meta["smpirun"] == str(DEBIAN)
    assert meta["replayer"].startswith("/usr/lib/") and meta["replay"] == replayer
    assert (meta["s4u_replayer"] is not None) == (replayer == "s4u")
    assert "SimGrid 3.32 replays many small messages in flight slowly" in err


def test_both_replayers_charge_message_costs_alike_on_debians_simgrid(tmp_path):
    """3.32's SMPI reads a message cost only as a threshold table (one value crashed smpirun): the S4U replayer and
    smpirun give the same times, eager and rendezvous, SMPI's own MPI_Alltoall included."""
    args = ("--platform", "fattree:2x4,oversub=2", "--ppn", "2", "--nprocs", "8", "--sizes", "8,128K",
            "--algorithms", "linear,hierarchical,native:selector=mpich", "--message-cost", "0.5,0.7",
            "--copy-bandwidth", "5e9", "--quiet")
    times = {}
    for replayer in simgrid.REPLAYERS:
        rows, _, _ = simulated(tmp_path / replayer, *args, "--replayer", replayer)
        times[replayer] = {(r["algorithm"], r["bytes_per_peer"]): float(r["t_p50_us"]) for r in rows}
    assert len(times["s4u"]) == 6 and times["s4u"] == pytest.approx(times["smpi"], abs=1e-3)
    assert times["s4u"][("linear", "8")] > 0.5 + 7 * 0.7  # the costs are charged
