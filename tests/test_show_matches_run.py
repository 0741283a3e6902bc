"""`bench show` prints what `bench run` printed for the same rows, to the last digit; its options and `validate`'s
arguments are explained, and it offers every format `run` does."""
from __future__ import annotations

import json
import re

import pytest
from support import bench, bench_here, python

from a2a.record import report
from a2a.record.results import Recorder, Row, read_rows
from a2a.sweep.session import FORMATS


def test_a_row_read_back_prints_the_digits_it_printed_before_it_was_written(tmp_path):
    row = Row(nprocs=2, nnodes=1, ppn=2, algorithm="native", options="", dtype="uint8", count=8, bytes_per_peer=8,
              iterations=3, valid=True, t_min_us=1234.5500001, t_p50_us=99999.96, t_mean_us=123456.5,
              t_max_us=1.000000123456789, busbw_GBps=0.00123456789)
    recorder = Recorder(tmp_path)
    recorder.add(row, [1e-3])
    recorder.close()
    [back] = read_rows(tmp_path)
    assert report.table([back]) == report.table([row])
    assert report.as_json([back]) == report.as_json([row])
    assert report.tpu_table([back]) == report.tpu_table([row])


@pytest.mark.launches
def test_show_prints_the_json_run_printed(tmp_path):
    out = tmp_path / "run"
    done = bench(2, "run", "--sizes", "8,100K", "--algorithms", "native,pairwise", "--iterations", "3", "--output",
                 str(out), "--format", "json", "--quiet")
    assert done.returncode == 0, done.stderr
    shown = python("-m", "bench", "show", str(out), "--format", "json")
    assert json.loads(shown.stdout) == json.loads(done.stdout)


def test_show_offers_every_format_of_run_each_explained(capsys):
    code, out, _ = bench_here(capsys, "show", "--help")
    assert code == 0
    assert f"[{'|'.join(FORMATS)}]" in out
    assert "TPU benchmark's columns" in out and "CSV or JSON" in out


def test_show_prints_the_tpu_columns(capsys, small_sweep):
    code, out, err = bench_here(capsys, "show", str(small_sweep), "--format", "tpu")
    assert code == 0, err
    header, *lines = out.strip().splitlines()
    assert header.startswith("iteration\top_type\trank\t") and len(lines) == 3  # native, linear, control at 8 B
    count = read_rows(small_sweep)[0].count  # elements per peer, not an iteration number; the group size, not a rank
    assert all(line.split("\t")[:3] == [str(count), "A2A", "2"] for line in lines)


def test_validate_help_says_what_each_argument_is(capsys):
    code, out, _ = bench_here(capsys, "validate", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert re.search(r"MEASURED is a `bench run` results directory; SIMULATED is a `bench simulate` one", text)


def test_the_tpu_columns_are_documented():
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "record.md").read_text()
    for column in ("iteration", "rank", "mesh_shape", "op_dimension", "sharding_strategy", "step_time_ms_num_runs"):
        assert f"| `{column}` |" in text, column
