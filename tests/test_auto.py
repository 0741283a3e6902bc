"""The `auto` algorithm: per plan, the algorithm a decision table names for this size."""
from __future__ import annotations

import json

import numpy as np
import pytest
from decide_fixtures import minimal_table
from support import mpiexec, shared_path

import a2a
from a2a.errors import BadOption
from a2a.record.results import read_rows


def run_auto(comm, table: str | None, bytes_per_peer: int) -> bool:
    """Plan auto at a size (table None: no table option), run it once; True if every rank got the right data."""
    p, r = comm.size, comm.rank
    send = np.repeat((np.arange(p) + 16 * r).astype(np.uint8), bytes_per_peer)
    recv = np.zeros_like(send)
    options = {} if table is None else {"table": table}
    with a2a.get("auto").plan(comm, send, recv, **options) as plan:
        plan()
    expected = np.repeat((r + 16 * np.arange(p)).astype(np.uint8), bytes_per_peer)
    return all(comm.allgather(np.array_equal(recv, expected)))


@pytest.mark.mpi
def test_auto_follows_the_table_per_size(comm, tmp_path):
    # the middle range names options bruck refuses: planning there fails, proving the lookup
    table = shared_path(comm, tmp_path, "t.json", minimal_table(comm.size, [
        (0, "bruck", "radix=3"), (100, "bruck", "radix=1"), (1000, "throttled", "window=2"), (5000, "native", "")]))
    assert run_auto(comm, table, 8) and run_auto(comm, table, 99)
    with pytest.raises(BadOption, match="bruck with options the algorithm refuses.*radix"):
        run_auto(comm, table, 100)
    assert run_auto(comm, table, 1000) and run_auto(comm, table, 6000)


@pytest.mark.mpi
def test_auto_below_every_measured_count_is_native(comm, tmp_path):
    table = shared_path(comm, tmp_path, "t.json", minimal_table(comm.size + 1, [(0, "bruck", "radix=1")]))
    assert run_auto(comm, table, 64)


@pytest.mark.mpi
def test_auto_uses_the_nearest_measured_count_below(comm, tmp_path):
    document = minimal_table(comm.size, [(0, "bruck", "radix=1")])
    document["tables"].append(minimal_table(comm.size + 1, [(0, "native", "")])["tables"][0])
    table = shared_path(comm, tmp_path, "t.json", document)
    with pytest.raises(BadOption, match="radix"):
        run_auto(comm, table, 64)


@pytest.mark.mpi
def test_auto_table_errors_are_clear(comm, tmp_path):
    with pytest.raises(BadOption, match="option table is required"):
        run_auto(comm, None, 8)
    with pytest.raises(BadOption, match="accepted: the path of a decision.json"):
        run_auto(comm, "", 8)
    missing = comm.bcast(str(tmp_path / "missing.json") if comm.rank == 0 else None)
    with pytest.raises(BadOption, match="does not exist"):
        run_auto(comm, missing, 8)
    with pytest.raises(BadOption, match="not valid JSON"):
        run_auto(comm, shared_path(comm, tmp_path, "bad.json", "{"), 8)
    with pytest.raises(BadOption, match="schema"):
        run_auto(comm, shared_path(comm, tmp_path, "other.json", {"tables": []}), 8)


@pytest.mark.launches
def test_bench_run_measures_auto_beside_the_others(tmp_path):
    table = tmp_path / "t.json"
    table.write_text(json.dumps(minimal_table(2, [(0, "bruck", "radix=2"), (512, "pairwise", "")])))
    done = mpiexec(2, "-m", "bench", "run", "--algorithms", "auto,native", "--table", str(table),
                   "--sizes", "8,1K", "--iterations", "3", "--quiet", "--output", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    rows = read_rows(tmp_path / "run")
    assert {(r.algorithm, r.bytes_per_peer, r.valid) for r in rows if r.nprocs == 2} == {
        ("auto", 8, True), ("auto", 1024, True), ("native", 8, True), ("native", 1024, True),
        ("control", 8, True), ("control", 1024, True)}  # the library's own under a second name, beside native
    assert all(r.options == f"table={table};workload=" for r in rows if r.algorithm == "auto")
