"""Plug-ins: the decorator, files and modules on the command line, entry points, and failures."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest
from support import ROOT, mpiexec, python

import a2a

EXAMPLE = ROOT / "examples" / "scattered_pairs.py"


@pytest.mark.launches
def test_load_plugin_from_a_file_registers_its_algorithms():
    # in a fresh process: this one may have loaded the example already
    done = python("-c", f"import a2a; print(a2a.load_plugin({str(EXAMPLE)!r}))")
    assert done.stdout == "['shuffled_pairwise']\n", done.stdout + done.stderr
    a2a.load_plugin(EXAMPLE)
    algorithm = a2a.get("shuffled_pairwise")
    assert algorithm.summary.startswith("Pairwise Sendrecv")
    assert algorithm.resolve({"seed": "7"}) == {"seed": 7}


def test_plugin_from_a_module_name(tmp_path, monkeypatch):
    (tmp_path / "my_a2a_plugin.py").write_text(
        "import a2a\n@a2a.register('copy_self')\ndef copy_self(comm, sendbuf, recvbuf):\n"
        "    '''Only valid on one rank.'''\n    return lambda: recvbuf.__setitem__(slice(None), sendbuf)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert a2a.load_plugin("my_a2a_plugin") == ["copy_self"]
    from mpi4py import MPI

    send, recv = np.arange(4.0), np.zeros(4)
    a2a.alltoall(MPI.COMM_SELF, send, recv, "copy_self")
    assert np.array_equal(send, recv)


def test_missing_plugin_is_a_clear_error():
    with pytest.raises(a2a.PluginError, match="does not exist"):
        a2a.load_plugin("no/such/plugin.py")
    with pytest.raises(a2a.PluginError, match="cannot load plug-in no_such_module_xyz"):
        a2a.load_plugin("no_such_module_xyz")


def test_factory_with_var_keywords_is_refused():
    with pytest.raises(a2a.PluginError, match="keyword-only parameter"):
        a2a.register("sloppy")(lambda comm, sendbuf, recvbuf, **options: None)


@pytest.mark.launches
def test_entry_point_plugins_are_found(tmp_path):
    (tmp_path / "ep_plugin.py").write_text(
        "import a2a\n@a2a.register('from_entry_point')\ndef f(comm, sendbuf, recvbuf):\n"
        "    '''Registered through an entry point.'''\n    return lambda: None\n")
    info = tmp_path / "ep_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[a2a.algorithms]\nmine = ep_plugin\n")
    done = python("-c", "import a2a; print(a2a.algorithms())", env={"PYTHONPATH": str(tmp_path)})
    assert "from_entry_point" in done.stdout, done.stderr


@pytest.mark.launches
def test_readme_example_is_the_shipped_plugin_and_runs(tmp_path):
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(# examples/scattered_pairs.py\n.*?)```", readme, re.S)
    assert block, "README shows the plug-in example"
    shipped = EXAMPLE.read_text()
    assert block.group(1).split("\n", 1)[1].strip() == shipped.strip()
    done = mpiexec(3, "-m", "bench", "run", "--plugin", str(EXAMPLE), "--algorithms", "shuffled_pairwise",
                   "--sizes", "8,4K", "--iterations", "3", "--nprocs", "3", "--quiet", "--format", "csv",
                   "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    rows = done.stdout.strip().splitlines()[1:]
    assert len(rows) == 2 and all(",true," in row for row in rows)


@pytest.mark.launches
def test_failure_on_one_rank_ends_the_whole_job_quickly(tmp_path):
    """Rank 1 fails while rank 0 waits for it in MPI_Alltoall: a job that did not end would time out (2 ranks leave
    one waiting, as 4 leave three, at half the start-up)."""
    began = time.monotonic()
    done = mpiexec(2, "-m", "bench", "run", "--plugin", "tests/plugins/broken.py", "--algorithms", "broken",
                   "--sizes", "8", "--nprocs", "2", "--output", str(tmp_path / "out"), timeout=120,
                   asleep=True)  # the ranks left waiting on rank 1 need not spin on 2 cores until the job ends
    elapsed = time.monotonic() - began
    assert done.returncode != 0
    assert "broken plug-in: rank 1 fails on purpose" in done.stderr
    assert elapsed < 30, f"the job took {elapsed:.0f} s to end"


@pytest.mark.mpi
def test_a_plugin_written_for_the_old_layout_loads_and_runs():
    """The names a plug-in imported from a2a.algos before the schedules and execute wings (a2a.register,
    a2a.algos.registry, .buffers, .cost, .plan, .prebuilt, .schedule) still serve: its algorithms load, plan, run
    (in C where the schedule is exact data) and give MPI's answer."""
    from mpi4py import MPI

    assert a2a.load_plugin(ROOT / "tests" / "plugins" / "old_layout.py") == ["old_layout_copy", "old_layout_pairwise"]
    comm = MPI.COMM_WORLD
    p, r = comm.size, comm.rank
    send = np.arange(p * 3, dtype=np.int64) + 100 * r
    expected, got = np.empty_like(send), np.empty_like(send)
    comm.Alltoall(send, expected)
    for executor in ("python", "c"):
        got[:] = -1
        with a2a.get("old_layout_pairwise").plan(comm, send, got, executor=executor) as plan:
            plan()
            assert plan.executor == executor or "unavailable" in plan.note
        assert np.array_equal(got, expected), executor
    a2a.alltoall(MPI.COMM_SELF, send, got, "old_layout_copy")
    assert np.array_equal(got, send)
