"""The record across launches: every launch kept, refusals to mix libraries or dtypes, and a kill
between a point's samples and its row."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import mpi4py
import pytest
from support import bench, bench_here, mpi_library

from a2a.measure.driver import Context, set_thread_level
from a2a.mpi import LOCAL_SIZE_VARIABLES
from a2a.record.meta import git_commit
from a2a.record.results import KILL_BEFORE_ROW, read_rows, read_samples
from a2a.sweep.config import SweepConfig
from a2a.sweep.grid import Point, points
from a2a.sweep.mesh import Layout
from a2a.sweep.variants import Variant


def meta_of(out) -> dict:
    return json.loads((out / "meta.json").read_text())


@pytest.mark.launches
def test_a_kill_between_samples_and_row_loses_nothing_and_the_record_keeps_both_launches(tmp_path):
    out = tmp_path / "run"
    # points in order: 1 rank x (native, linear), then 2 ranks x (native, linear); killed after the
    # third point's samples reached the disk, before its row
    killed = bench(2, "run", "--sizes", "8", "--algorithms", "native,linear", "--nprocs", "1,2", "--no-control",
                   "--iterations", "3", "--output", str(out), "--quiet", env={KILL_BEFORE_ROW: "3"})
    assert killed.returncode != 0
    rows = read_rows(out)
    assert [r.nprocs for r in rows] == [1, 1]
    orphans = set(read_samples(out)) - {r.key for r in rows}
    assert len(orphans) == 1 and next(iter(orphans))[0] == "2"  # the kill came at that moment

    done = bench(2, "run", "--resume", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    rows, samples = read_rows(out), read_samples(out)
    assert len(rows) == 4 and len({r.key for r in rows}) == 4
    assert set(samples) == {r.key for r in rows} and all(len(samples[r.key]) == 3 for r in rows)

    meta = meta_of(out)
    first, second = meta["launches"]
    assert first["status"].startswith("ended without closing the record") and first["points"] == 2
    assert sorted(first["by_nprocs"]) == ["1", "2"]
    assert second["status"] == "complete" and (second["points_before"], second["points"]) == (2, 2)
    assert second["orphan_samples_dropped"] == 3 and sorted(second["by_nprocs"]) == ["2"]
    assert sorted(meta["by_nprocs"]) == ["1", "2"]  # merged: 1 rank was measured by the first launch only
    assert meta["status"] == "complete" and meta["start"] == first["start"] <= second["start"]
    for launch in meta["launches"]:
        assert launch["command"].split()[1] == "run" and launch["mpi_library"].startswith(mpi_library()[:8])
        assert sum(launch["hosts"].values()) == 2 and launch["dtype"] == "float32"
        assert "harness" in launch["by_nprocs"]["2"] and "oversubscribed" in launch["by_nprocs"]["2"]


@pytest.fixture(scope="module")
def one_rank_run(tmp_path_factory):
    """A 1-rank record of native at 8 B (no control beside it), launched once for this file: tests take copies."""
    out = tmp_path_factory.mktemp("one-rank") / "run"
    done = bench(1, "run", "--sizes", "8", "--algorithms", "native", "--no-control", "--iterations", "2",
                 "--output", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture
def small_run(one_rank_run, tmp_path):
    """A copy of `one_rank_run` of this test's own, to resume and change."""
    return shutil.copytree(one_rank_run, tmp_path / "run")


@pytest.mark.launches
def test_resume_under_another_mpi_library_is_refused_unless_forced(small_run):
    meta = meta_of(small_run)
    recorded = meta["mpi_library"]
    meta["mpi_library"] = "Open MPI v5.0.5, package: Open MPI Distribution"
    meta["launches"][0]["mpi_library"] = meta["mpi_library"]
    (small_run / "meta.json").write_text(json.dumps(meta))

    refused = bench(1, "run", "--resume", str(small_run))
    assert refused.returncode == 2
    assert refused.stderr.count("was measured with Open MPI v5.0.5, package: Open MPI Distribution, "
                                "but this job runs ") == 1, refused.stderr
    assert "--force-resume" in refused.stderr and len(meta_of(small_run)["launches"]) == 1

    forced = bench(1, "run", "--resume", str(small_run), "--force-resume", "--quiet")
    assert forced.returncode == 0, forced.stderr
    libraries = [launch["mpi_library"] for launch in meta_of(small_run)["launches"]]
    assert libraries == [meta["mpi_library"], recorded]


@pytest.mark.launches
def test_resume_at_another_dtype_is_refused_unless_forced(small_run):
    same = bench(1, "run", "--resume", str(small_run), "--dtype", "float32", "--quiet")
    assert same.returncode == 0, same.stderr

    refused = bench(1, "run", "--resume", str(small_run), "--dtype", "float64")
    assert refused.returncode == 2
    assert refused.stderr.count("was measured in float32, not float64") == 1, refused.stderr
    assert [r.dtype for r in read_rows(small_run)] == ["float32"]

    forced = bench(1, "run", "--resume", str(small_run), "--dtype", "float64", "--force-resume", "--quiet")
    assert forced.returncode == 0, forced.stderr
    assert sorted(r.dtype for r in read_rows(small_run)) == ["float32", "float64"]
    assert [launch["dtype"] for launch in meta_of(small_run)["launches"]] == ["float32", "float32", "float64"]


def test_force_resume_needs_resume(capsys, tmp_path):
    code, _, err = bench_here(capsys, "run", "--force-resume", "--output", str(tmp_path / "run"))
    assert code == 2 and "--force-resume goes with --resume DIR" in err


@pytest.mark.launches
def test_the_watchdog_thread_makes_the_sweep_start_mpi_serialized(monkeypatch, small_run):
    assert meta_of(small_run)["mpi_thread_level"] == "serialized"  # one rank always has a core
    monkeypatch.delenv("MPI4PY_RC_THREAD_LEVEL", raising=False)
    monkeypatch.setattr(mpi4py.rc, "thread_level", "multiple")
    for variable in LOCAL_SIZE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("MPI_LOCALNRANKS", "100000")  # crowded: MULTIPLE stays
    set_thread_level()
    assert mpi4py.rc.thread_level == "multiple"
    monkeypatch.setenv("MPI_LOCALNRANKS", "1")
    set_thread_level()
    assert mpi4py.rc.thread_level == "serialized"


@pytest.mark.launches
def test_a_thread_level_the_user_chose_is_kept(tmp_path):
    out = tmp_path / "run"
    done = bench(1, "run", "--sizes", "8", "--algorithms", "native", "--iterations", "2", "--output", str(out),
                 "--quiet", env={"MPI4PY_RC_THREAD_LEVEL": "funneled"})
    assert done.returncode == 0, done.stderr
    assert meta_of(out)["mpi_thread_level"] == "funneled"


def test_a_point_and_its_row_have_one_key():
    """Resume skips a point when a row of its key is recorded: the two keys must be built alike."""
    layout = Layout((2, 4), (False, True))
    config = SweepConfig([8, 64], "float64", [Variant("bruck", {"radix": 4}), Variant("native")], [8],
                         timing="global", layouts=[layout], collective="alltoallv", workload="zipf:s=1.1",
                         cache="cold")
    context = Context(2, 4, True, {}, {})
    made = points(config, 8)
    assert len(made) == 4 and all(isinstance(p, Point) for p in made)
    for point in made:
        assert point.key == point.row(context.nnodes, context.ppn).key


def test_the_commit_is_read_without_writing_the_index(tmp_path):
    """A checkout whose index is stale (a file touched, not changed) would have `git status` rewrite the index
    under its lock; a run killed then leaves index.lock and the user's next commit fails. The record reads it
    all the same, and leaves the index as it found it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "f").write_text("a")
    git("add", "f")
    git("commit", "-qm", "a")
    index = tmp_path / ".git" / "index"
    os.utime(tmp_path / "f", ns=(index.stat().st_mtime_ns + 2_000_000_000,) * 2)  # stale in the index's eyes
    before = index.stat()
    assert git_commit(tmp_path) == git("rev-parse", "HEAD")
    after = index.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    (tmp_path / "f").write_text("b")
    assert git_commit(tmp_path) == git("rev-parse", "HEAD") + "+dirty"
