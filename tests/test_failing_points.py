"""A failing point does not end the sweep; an error that leaves the exchange unusable does, and a resume skips its
point; a launch with no point measured says why and exits non-zero."""
from __future__ import annotations

import json

import pytest
from support import mpiexec

from a2a.record.results import read_rows

pytestmark = pytest.mark.launches  # every test here starts jobs of its own

PICKY = "tests/plugins/picky.py"
BROKEN = "tests/plugins/broken.py"


def run(out, *args: str, n: int = 2, timeout: float = 180):
    """`bench run` of these points, its ranks waiting asleep: what it records and how it ends are checked, not its
    times (a rank left in the exchange then sleeps instead of spinning through the driver's wait for agreement)."""
    return mpiexec(n, "-m", "bench", "run", "--output", str(out), "--iterations", "3", "--quiet", *args,
                   timeout=timeout, asleep=True)


def test_a_plugin_that_raises_on_some_sizes_fails_those_points_and_the_others_are_measured(tmp_path):
    out = tmp_path / "run"
    done = run(out, "--plugin", PICKY, "--algorithms", "picky,native", "--sizes", "8,64,1K,4K", "--nprocs", "2",
               "--no-control")
    assert done.returncode == 0, done.stderr
    rows = {(r.algorithm, r.bytes_per_peer): r for r in read_rows(out)}
    assert len(rows) == 8
    assert all(rows["native", size].valid for size in (8, 64, 1024, 4096))
    assert rows["picky", 8].valid and rows["picky", 4096].valid
    for size, kind, text in ((64, "ValueError", "64 B per peer refused"), (1024, "RuntimeError", "1 KiB per peer")):
        note = rows["picky", size].note
        assert not rows["picky", size].valid and note.startswith(f"failed on ranks 0-1: {kind}: picky plug-in: {text}")
        assert "\n" not in note and "second line" not in note
    log = (out / "errors.log").read_text()
    assert json.loads((out / "meta.json").read_text())["errors_log"] == "errors.log"
    assert log.count("Traceback") == 4 and "second line of the message" in log  # two ranks, two points, whole


def test_a_launch_whose_every_point_failed_exits_non_zero_and_says_why_once(tmp_path):
    out = tmp_path / "run"
    done = run(out, "--plugin", PICKY, "--algorithms", "picky", "--sizes", "64", "--nprocs", "2")
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("error: no point was measured: failed on ranks 0-1: ValueError: picky plug-in") == 1
    assert f"{out / 'errors.log'}" in done.stderr


def test_an_error_on_one_rank_inside_the_exchange_ends_the_job_and_a_resume_skips_its_point(tmp_path):
    """Rank 1 raises while the others wait in an Alltoall: they cannot agree, so the job ends (it does not hang);
    the resume records the point as skipped, says so once, and closes the record, the points measured before kept.
    The death does not say which visit of the cell's interleaved rounds it came in, so every point of that cell
    (broken, native and native's control) is skipped with it, and the resume, having measured nothing, says so and
    exits 1. On 1 rank broken has no rank 1: that cell is measured before the job dies."""
    out = tmp_path / "run"
    done = run(out, "--plugin", BROKEN, "--algorithms", "broken,native", "--sizes", "8", "--nprocs", "1,4", n=4,
               timeout=120)
    assert done.returncode != 0 and "broken plug-in: rank 1 fails on purpose" in done.stderr
    assert "the other ranks did not come to agree on it" in done.stderr
    resumed = mpiexec(4, "-m", "bench", "run", "--resume", str(out), "--quiet", timeout=120, asleep=True)
    assert resumed.returncode == 1, resumed.stderr
    assert resumed.stderr.count("note: skipping the 3 points of the cell of broken at 8 B per peer on 4 ranks: "
                                "the job died during it") == 1, resumed.stderr
    assert resumed.stderr.count("error: no point was measured: skipped: the job died during it") == 1
    assert "(all 3 points)" in resumed.stderr
    rows = {(r.algorithm, r.nprocs): r for r in read_rows(out)}
    assert sorted(rows) == [(a, n) for a in ("broken", "control", "native") for n in (1, 4)]
    assert all(rows[a, 1].valid for a in ("broken", "control", "native"))
    assert all(not rows[a, 4].valid and rows[a, 4].note.startswith("skipped: the job died during it")
               for a in ("broken", "control", "native"))
    assert json.loads((out / "meta.json").read_text())["status"] == "complete"  # nothing is left to resume
