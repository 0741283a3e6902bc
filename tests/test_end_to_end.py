"""Paths through `bench` that no other test walks: a wrong result, --max-time-per-point, --format json,
rare dtypes and `bench overhead` (`bench compare`'s: tests/test_compare.py)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from support import mpi_library, mpiexec, python

from a2a.record.decision import read_decision
from a2a.record.results import read_meta, read_rows, read_samples

pytestmark = pytest.mark.launches  # every test here starts jobs of its own

SLEEPY = "tests/plugins/sleepy.py"
WRONG = "tests/plugins/wrong.py"


def bench_run(n: int, out, *args: str, timeout: float = 300):
    """`bench run` with its ranks waiting asleep: these tests check what it records, not how fast (a rank waiting for
    a sleepy peer would spin through every stall)."""
    return mpiexec(n, "-m", "bench", "run", "--output", str(out), *args, timeout=timeout, asleep=True)


def test_a_wrong_result_is_recorded_invalid_warned_and_left_out_of_decisions(tmp_path):
    out = tmp_path / "run"
    done = bench_run(2, out, "--plugin", WRONG, "--algorithms", "wrong,native", "--sizes", "8,1K",
                     "--nprocs", "2", "--iterations", "3")
    assert done.returncode == 0, done.stderr
    rows = {(r.algorithm, r.bytes_per_peer): r for r in read_rows(out)}
    for size in (8, 1024):
        assert rows["native", size].valid and not rows["wrong", size].valid
        assert rows["wrong", size].note.startswith("WRONG RESULT on ranks 0-1"), rows["wrong", size].note
        warning = f"WARNING: wrong gave a WRONG RESULT at {size} B per peer on 2 ranks"
        assert done.stderr.count(warning) == 1, done.stderr  # once, from rank 0
    # wrong exchanges nothing, so it is the fastest; decide must still pick native
    decided = python("-m", "bench", "decide", str(out), "--output", str(tmp_path / "decision.json"))
    assert decided.returncode == 0, decided.stderr
    document = read_decision(tmp_path / "decision.json")
    assert [r.algorithm for t in document.tables for r in t.ranges] == ["native"]
    assert all(c.algorithm == "native" for t in document.tables for cell in t.cells for c in cell.candidates)


def test_max_time_per_point_stops_a_slow_point_after_five_samples(tmp_path):
    out = tmp_path / "run"
    slow = "sleepy:stall_calls=" + "/".join(map(str, range(1, 11))) + ":seconds=0.5"  # call 0 is the warm-up
    done = bench_run(2, out, "--plugin", SLEEPY, "--algorithms", f"{slow},native", "--sizes", "8",
                     "--nprocs", "2", "--iterations", "10", "--rounds", "5", "--max-time-per-point", "2", "--quiet")
    assert done.returncode == 0, done.stderr
    rows = {r.algorithm: r for r in read_rows(out)}
    # 5 rounds of 2 timed calls, 0.4 s a visit: round k warms up on call 2k and times call 2k+1, which stalls
    # 0.5 s and spends the visit's time, so its second call is never made; but a visit times at least one call
    assert rows["sleepy"].iterations == 5 and len(read_samples(out)[rows["sleepy"].key]) == 5
    assert "stopped after 5 iterations (--max-time-per-point 2 s)" in rows["sleepy"].note
    assert rows["native"].iterations == 10 and "stopped" not in rows["native"].note


def test_format_json_prints_the_recorded_rows(tmp_path):
    out = tmp_path / "run"
    done = bench_run(2, out, "--algorithms", "native,bruck", "--sizes", "8,1K", "--nprocs", "2", "--no-control",
                     "--iterations", "3", "--quiet", "--format", "json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    recorded = [json.loads(json.dumps(vars(r))) for r in read_rows(out)]
    key = lambda r: (r["algorithm"], r["bytes_per_peer"])  # noqa: E731
    assert len(printed) == 4
    for shown, kept in zip(sorted(printed, key=key), sorted(recorded, key=key)):
        assert shown.keys() == kept.keys()
        for name, value in kept.items():  # the CSV keeps 6 significant digits; JSON has no NaN, so null
            if isinstance(value, float) and math.isnan(value):
                assert shown[name] is None, name
            else:
                assert shown[name] == (pytest.approx(value, rel=1e-5) if isinstance(value, float) else value), name


@pytest.mark.parametrize("dtype,itemsize", [("float16", 2), ("longdouble", 16), ("int64", 8)])
def test_rare_dtypes_run_and_check_through_native(tmp_path, dtype, itemsize):
    out = tmp_path / "run"
    done = bench_run(2, out, "--dtype", dtype, "--algorithms", "native,pairwise", "--sizes", "16,64K",
                     "--nprocs", "2", "--no-control", "--iterations", "2", "--quiet")
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    name = np.dtype(dtype).name  # longdouble is recorded as float128 (x86-64) or float96
    assert len(rows) == 4 and all(r.valid and r.dtype == name for r in rows), [(r.algorithm, r.note) for r in rows]
    assert sorted({r.count for r in rows}) == [16 // itemsize, 65536 // itemsize]
    assert read_meta(out)["config"]["dtype"] == name


def test_overhead_prints_a_ratio_per_twin_and_size(tmp_path):
    done = python("-m", "bench", "overhead", "--nprocs", "2", "--sizes", "8,1K", "--iterations", "5",
                  "--repeats", "1", timeout=900)
    assert done.returncode == 0, done.stderr
    # nprocs, size, ours, library words, twin, median ratio, one ratio per launch
    lines = [line.split() for line in done.stdout.splitlines() if line[:1].isdigit()]
    twins = {(line[2], line[-3]) for line in lines}
    if "MPICH" in mpi_library():  # by default every algorithm with a twin in the library, at its defaults
        assert twins == {("pairwise", "pairwise"), ("bruck", "brucks"), ("throttled", "scattered"),
                         ("bruck_zero_copy", "brucks"), ("linear", "scattered"), ("linear_sync", "scattered")}
    else:
        assert twins == {("pairwise", "pairwise"), ("bruck", "modified_bruck"), ("throttled", "linear"),
                         ("bruck_zero_copy", "modified_bruck"), ("linear", "linear"), ("linear_sync", "linear_sync")}
    assert sorted(line[1] for line in lines) == ["1K"] * len(twins) + ["8"] * len(twins)
    assert all(float(line[-2]) > 0 for line in lines)  # median ratio ours / native
    assert "ratio = our p50 / native p50 in the same launch" in done.stdout

