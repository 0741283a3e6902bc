"""`bench run --collective alltoallv`: rows, checks, bandwidth from bytes moved, bad options."""
from __future__ import annotations

import csv

import numpy as np
import pytest
from support import assert_refused_here, bench, mpiexec

import a2a
from a2a.record.results import COLUMNS, Row, point_key, read_rows
from a2a.sweep.workload import parse_workload

# drops the last byte of every nonempty block: the check must notice
WRONG_PLUGIN = '''
import a2a
from a2a.algos.builtin.linear import spread_out


@a2a.register("lossy", collective="alltoallv")
def lossy(comm, send, recv):
    """Like linear, but every received block loses its last byte."""
    run, free = spread_out(comm, send.blocks(), recv.blocks())

    def lose():
        run()
        for block in recv.blocks():
            if len(block):
                block[-1] = 0
    return lose, free
'''


@pytest.mark.launches
def test_alltoallv_sweep_every_algorithm_valid(tmp_path):
    out = tmp_path / "run"
    done = bench(4, "run", "--collective", "alltoallv", "--workload", "zipf:s=1.1", "--algorithms", "all",
                 "--sizes", "64,4K", "--nprocs", "3,4", "--iterations", "3", "--output", str(out),
                 "--allow-oversubscribed", asleep=True)
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert {r.algorithm for r in rows} == set(a2a.algorithms("alltoallv")) - {"auto"}
    assert len(rows) == 2 * 2 * len({r.algorithm for r in rows})
    assert all(r.valid and r.collective == "alltoallv" and r.workload == "zipf:s=1.1" for r in rows), \
        [(r.algorithm, r.note) for r in rows if not r.valid]
    for row in rows:  # bandwidths from the bytes the matrix moves, imbalance from the matrix
        counts = parse_workload("zipf:s=1.1").counts(row.nprocs, row.bytes_per_peer, 4)
        assert row.imbalance == pytest.approx(counts.max() / counts.mean(), rel=1e-5)
        total = counts.sum() * 4
        assert row.algbw_GBps == pytest.approx(total / row.nprocs / (row.t_p50_us * 1e-6) / 1e9, rel=1e-4)
        off = total - np.trace(counts) * 4
        assert row.busbw_GBps == pytest.approx(off / row.nprocs / (row.t_p50_us * 1e-6) / 1e9, rel=1e-4)
    assert "alltoallv, workload zipf:s=1.1" in done.stdout


@pytest.mark.launches
def test_a_wrong_alltoallv_result_marks_the_row_invalid(tmp_path):
    plugin = tmp_path / "lossy.py"
    plugin.write_text(WRONG_PLUGIN)
    out = tmp_path / "run"
    done = bench(3, "run", "--plugin", str(plugin), "--collective", "alltoallv", "--workload", "sparse:density=0.5",
                 "--algorithms", "lossy,linear", "--sizes", "256", "--nprocs", "3", "--iterations", "2",
                 "--output", str(out))
    assert done.returncode == 0, done.stderr
    rows = {r.algorithm: r for r in read_rows(out)}
    assert rows["linear"].valid and not rows["lossy"].valid
    assert "WRONG RESULT on ranks" in rows["lossy"].note and "lossy gave a WRONG RESULT" in done.stderr


@pytest.mark.launches
def test_a_matrix_for_other_process_counts_is_refused_per_point(tmp_path):
    matrix = tmp_path / "m.csv"
    matrix.write_text("0,1\n3,0\n")
    out = tmp_path / "run"
    done = bench(3, "run", "--collective", "alltoallv", "--workload", f"matrix:{matrix}", "--algorithms",
                 "native,tuna", "--sizes", "64", "--nprocs", "2,3", "--iterations", "2", "--output", str(out))
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert all(r.valid for r in rows if r.nprocs == 2)
    refused = [r for r in rows if r.nprocs == 3]
    assert refused and all(r.note.startswith("refused: workload matrix:") and "has 3 ranks" in r.note
                           for r in refused)


@pytest.mark.parametrize("args,message", [
    (["--collective", "alltoallv", "--workload", "zipf:q=1"], "'q=1'; zipf takes s=1.1"),
    (["--collective", "alltoallv", "--workload", "pareto"], "unknown kind 'pareto'; accepted: uniform,"),
    (["--workload", "zipf"], "--workload zipf:s=1.1 makes uneven counts; add --collective alltoallv"),
    (["--collective", "alltoallv", "--algorithms", "bruck"],
     "bruck serves alltoall, not alltoallv; algorithms serving alltoallv:"),
    (["--algorithms", "tuna"], "tuna serves alltoallv, not alltoall"),
    (["--collective", "alltoallw"], "Invalid value for '--collective'"),
])
def test_bad_alltoallv_options_exit_2_once(capsys, tmp_path, args, message):
    assert_refused_here(capsys, args, message, tmp_path / "run")


def test_old_rows_read_as_alltoall_uniform(tmp_path):
    old = {c: "" for c in COLUMNS[: COLUMNS.index("timing") + 1]}
    old.update(nprocs="2", nnodes="1", ppn="2", algorithm="native", dtype="float32", count="2", bytes_per_peer="8")
    row = Row.from_csv(old)
    assert (row.collective, row.workload) == ("alltoall", "uniform")
    assert point_key(old) == row.key


@pytest.mark.launches
def test_list_shows_which_collective_each_serves():
    listing = mpiexec(1, "-m", "bench", "list")
    assert listing.returncode == 0
    lines = [line.split() for line in listing.stdout.splitlines() if line and not line.startswith(" ")]
    served = {(words[0], words[1]) for words in lines if len(words) > 1}
    assert {("native", "alltoall"), ("native", "alltoallv"), ("tuna", "alltoallv"), ("bruck", "alltoall")} <= served
    assert ("bruck", "alltoallv") not in served and ("tuna", "alltoall") not in served


@pytest.mark.launches
def test_results_csv_ends_with_the_new_columns(small_sweep):
    header = next(csv.reader(open(small_sweep / "results.csv")))
    assert header.index("collective") > header.index("timing")
    row = read_rows(small_sweep)[0]
    assert (row.collective, row.workload, row.imbalance) == ("alltoall", "uniform", 1.0)
    assert row.algbw_GBps == pytest.approx(8 * 2 / (row.t_p50_us * 1e-6) / 1e9, rel=1e-4)  # nccl-tests' formulas
    assert row.busbw_GBps == pytest.approx(row.algbw_GBps / 2, rel=1e-4)
