"""The timing driver: statistics, stalls, the record, resume, limits and bad options."""
from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from support import (
    ROOT,
    assert_refused_before_measuring,
    assert_refused_here,
    bench,
    bench_here,
    cleaned,
    launch_command,
    mpi_library,
    mpiexec,
    needs_mpich,
)

from a2a.errors import BadConfig
from a2a.record.results import read_rows, read_samples
from a2a.record.stats import Stats, bandwidths
from a2a.sweep.config import default_nprocs
from a2a.sweep.parsing import parse_list
from a2a.units import parse_size

SLEEPY = "tests/plugins/sleepy.py"
HEADER = ("nprocs,nnodes,ppn,algorithm,options,dtype,count,bytes_per_peer,iterations,warmup,t_min_us,"
          "t_p50_us,t_p90_us,t_p95_us,t_p99_us,t_mean_us,t_max_us,t_std_us,stalls,outliers,algbw_GBps,"
          "busbw_GBps,valid,note")


def test_stats_match_hand_computed_values():
    stats = Stats.of(np.array([0.010, 0.011, 0.012, 0.013, 0.300]), stall_threshold=0.1)
    assert (stats.n, stats.min, stats.p50, stats.max) == (5, 0.010, 0.012, 0.300)
    assert stats.mean == pytest.approx(0.0692)
    assert stats.p90 == pytest.approx(0.013 + 0.6 * 0.287)  # linear interpolation at rank 3.6
    assert stats.std == pytest.approx(np.sqrt(((np.array([10, 11, 12, 13, 300]) - 69.2) ** 2).sum() / 4) / 1000)
    assert stats.stalls == 1  # only 0.300 >= 0.010 + 0.1
    assert stats.outliers == 1  # fence: Q3 0.013 + 3 * IQR 0.002 = 0.019


def test_bandwidths_follow_nccl_tests():
    algbw, busbw = bandwidths(1024, 4, 1e-3)
    assert algbw == pytest.approx(0.004096) and busbw == pytest.approx(0.003072)


@pytest.mark.parametrize("text,values", [
    ("8,1K,64KiB,1M", [8, 1024, 65536, 1048576]),
    ("4:32:x2", [4, 8, 16, 32]),
    ("1K:3K:+1K", [1024, 2048, 3072]),
    ("16,4,16", [4, 16]),
])
def test_size_lists(text, values):
    assert parse_list(text, "size") == values


@pytest.mark.parametrize("text", ["12Q", "1.5K", "4:128:x1", "64:8:x2", "", "4:8"])
def test_bad_size_lists(text):
    with pytest.raises(BadConfig):
        parse_list(text, "size") if text else parse_size(text)


def test_default_process_counts():
    assert default_nprocs(8) == "2,4,8" and default_nprocs(6) == "2,4,6" and default_nprocs(1) == "1"


@pytest.mark.launches
def test_record_has_the_exact_header_and_every_sample(tmp_path):
    out = tmp_path / "run"
    done = bench(3, "run", "--sizes", "8,1K", "--algorithms", "native,bruck", "--iterations", "4",
                 "--output", str(out), asleep=True)
    assert done.returncode == 0, done.stderr
    lines = (out / "results.csv").read_text().splitlines()
    assert lines[0].startswith(HEADER + ",")  # later issues append columns after `note`
    rows = read_rows(out)
    assert {(r.nprocs, r.bytes_per_peer, r.algorithm) for r in rows} == {
        (n, s, a) for n in (2, 3) for s in (8, 1024) for a in ("native", "bruck", "control")}
    assert all(r.valid and r.iterations == 4 and r.t_min_us <= r.t_p50_us <= r.t_max_us for r in rows)
    samples = read_samples(out)
    assert all(len(samples[r.key]) == 4 for r in rows)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["world_size"] == 3
    assert meta["mpi_library"] == mpi_library().strip()
    assert meta["config"]["sizes"] == [8, 1024] and meta["end"]
    assert "\n3 ranks" in done.stdout and " bruck " in done.stdout


@pytest.mark.launches
def test_stalls_and_outliers_are_flagged(tmp_path):
    out = tmp_path / "run"
    # ten rounds of a warm-up call and a timed one: call 2k+1 is timed iteration k, so calls 5 and 11 are 2 and 5
    done = bench(2, "run", "--plugin", SLEEPY, "--algorithms", "sleepy:stall_calls=5/11,native",
                 "--sizes", "8", "--nprocs", "2", "--iterations", "10", "--output", str(out))
    assert done.returncode == 0, done.stderr
    rows = {r.algorithm: r for r in read_rows(out)}
    assert (rows["sleepy"].stalls, rows["sleepy"].outliers) == (2, 2)
    assert rows["native"].stalls == 0  # (microsecond jitter may still make outliers)
    seconds = read_samples(out)[rows["sleepy"].key]
    assert [i for i, s in enumerate(seconds) if s >= 0.25] == [2, 5]
    assert rows["sleepy"].t_max_us >= 250000
    line = next(text for text in done.stdout.splitlines() if "sleepy" in text)
    assert line.rstrip().endswith("!")


@pytest.mark.launches
def test_points_above_the_memory_cap_are_skipped(tmp_path):
    out = tmp_path / "run"
    done = bench(2, "run", "--sizes", "8,4K", "--algorithms", "native", "--nprocs", "2", "--no-control",
                 "--max-memory", "4K", "--iterations", "3", "--output", str(out), asleep=True)
    assert done.returncode == 0, done.stderr
    rows = {r.bytes_per_peer: r for r in read_rows(out)}
    assert rows[8].valid and rows[8].iterations == 3
    assert not rows[4096].valid and rows[4096].note.startswith("skipped: buffers need 16384 B per rank")


@pytest.mark.launches
def test_process_counts_run_on_subcommunicators(tmp_path):
    out = tmp_path / "run"
    done = bench(3, "run", "--sizes", "64", "--algorithms", "pairwise", "--nprocs", "1,2,3",
                 "--iterations", "3", "--output", str(out), "--quiet", "--allow-oversubscribed", asleep=True)
    assert done.returncode == 0, done.stderr
    assert sorted(r.nprocs for r in read_rows(out)) == [1, 2, 3]
    assert done.stdout == "" and done.stderr == f"results: {out}\n"  # quiet: only where the record is


@pytest.mark.launches
def test_config_file_with_command_line_winning(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text("sizes: [8, 1K]\nalgorithms: [native, pairwise]\niterations: 3\noption: []\n")
    out = tmp_path / "run"
    done = bench(2, "run", "--config", str(config), "--iterations", "4", "--output", str(out), "--quiet",
                 asleep=True)
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert {r.bytes_per_peer for r in rows} == {8, 1024} and {r.iterations for r in rows} == {4}


SLOW = "sleepy:stall_calls=1/2/3/4/5:seconds=0.15"


def interrupted_sweep(out: Path, signum: int, algorithms: str, rows_first: int) -> subprocess.CompletedProcess:
    """Start a slow 2-rank sweep, its ranks waiting asleep (each stall would keep the other spinning), send `signum`
    to mpiexec once `rows_first` rows are on disk."""
    args = ["-m", "bench", "run", "--plugin", SLEEPY, "--algorithms", algorithms, "--sizes", "8,16,32,64",
            "--nprocs", "2", "--iterations", "5", "--no-control", "--output", str(out), "--quiet"]
    job = subprocess.Popen(launch_command(2, sys.executable, *args), cwd=ROOT,
                           env=cleaned(None, asleep=True), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _rows_on_disk(out) < rows_first:
        time.sleep(0.1)
    job.send_signal(signum)
    stdout, stderr = job.communicate(timeout=60)
    return subprocess.CompletedProcess(job.args, job.returncode, stdout, stderr)


@pytest.mark.launches
@needs_mpich("Open MPI's mpirun ends its ranks on SIGTERM instead of passing it on; SIGUSR1 stops a run "
             "under every launcher (test_sigusr1_stops_like_sigterm)")
def test_sigterm_stops_cleanly_and_resume_measures_only_the_missing_points(tmp_path):
    out = tmp_path / "run"
    stopped = interrupted_sweep(out, signal.SIGTERM, f"{SLOW},native", rows_first=2)
    assert stopped.returncode == 143, stopped.stderr  # as the README promises
    first = read_rows(out)
    assert 2 <= len(first) < 8
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"].startswith("terminated"), meta["status"]
    assert f"--resume {out}" in stopped.stderr

    done = bench(2, "run", "--resume", str(out), "--quiet", asleep=True)
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert len(rows) == 8 and len({r.key for r in rows}) == 8
    assert [r.as_csv() for r in rows[: len(first)]] == [r.as_csv() for r in first]
    samples = read_samples(out)
    assert all(len(samples[r.key]) == 5 for r in rows)
    assert json.loads((out / "meta.json").read_text())["status"] == "complete"


def _rows_on_disk(out: Path) -> int:
    path = out / "results.csv"
    return max(0, len(path.read_text().splitlines()) - 1) if path.exists() else 0


@pytest.mark.launches
def test_a_point_past_the_timeout_ends_the_job_naming_it(tmp_path):
    out = tmp_path / "run"
    # the points before the stalled one must finish within the timeout on a loaded machine too
    done = bench(2, "run", "--plugin", SLEEPY, "--algorithms", "native,sleepy:stall_calls=0:seconds=60:from_bytes=1024",
                 "--sizes", "8,1K", "--nprocs", "2", "--timeout", "8", "--output", str(out), "--quiet",
                 timeout=120, asleep=True)  # asleep: rank 1 waits the 8 s in the exchange
    assert done.returncode != 0
    assert "sleepy:from_bytes=1024:seconds=60.0:stall_calls=0 at 1024 B per peer on 2 ranks" in done.stderr
    assert "did not finish within --timeout 8 s" in done.stderr
    assert {(r.algorithm, r.bytes_per_peer) for r in read_rows(out)} >= {("native", 8), ("sleepy", 8)}
    assert json.loads((out / "meta.json").read_text())["status"].startswith("timeout at sleepy")


@pytest.mark.parametrize("args,message", [
    (["--sizes", "12Q"], "size '12Q' is not a byte count"),
    (["--sizes", "6"], "sizes [6] are not multiples of float32's 4 bytes"),
    (["--algorithms", "brook"], "unknown algorithm 'brook'; did you mean 'bruck'? registered:"),
    (["--option", "bruck.radix=1"], "bruck: option radix=1; accepted: an integer >= 2"),
    (["--option", "bruck.fanout=3"], "bruck: unknown option fanout; accepted: radix"),
    (["--option", "radix=3"], "accepted: ALGORITHM.KEY=VALUE"),
    (["--config", "no/such/sweep.yaml"], "cannot read config no/such/sweep.yaml"),
    (["--dtype", "object"], "dtype 'object'; accepted:"),
    (["--iterations", "many"], "--iterations 'many'; accepted: a whole number, 1 or more"),
    (["--timeout", "-1"], "--timeout '-1'; accepted: a positive number of seconds"),
    (["--plugin", "no/such/plugin.py"], "plug-in file no/such/plugin.py does not exist"),
    (["--format", "xml"], "Invalid value for '--format'"),
])
def test_bad_options_exit_2_with_one_message_before_measuring(capsys, tmp_path, args, message):
    assert_refused_here(capsys, args, message, tmp_path / "run")


@pytest.mark.launches
@pytest.mark.parametrize("args,message", [
    (["--nprocs", "3"], "process counts [3] must lie between 1 and the world size 2"),
    (["--nprocs", "0"], "process counts [0] must lie between 1"),
])
def test_a_refusal_is_printed_by_one_rank_of_the_launch(tmp_path, args, message):
    assert_refused_before_measuring(args, message, tmp_path / "run")


def test_resume_refuses_sweep_options(capsys, tmp_path):
    code, _, err = bench_here(capsys, "run", "--resume", str(tmp_path), "--sizes", "8")
    assert code == 2 and "drop --sizes" in err


@pytest.mark.launches
def test_list_and_show(small_sweep):
    listing = mpiexec(1, "-m", "bench", "list")
    assert listing.returncode == 0
    for name in ("native", "linear", "pairwise", "throttled", "bruck", "node_aware", "hierarchical",
                 "pairwise_inplace"):
        assert f"\n{name} " in listing.stdout
    shown = mpiexec(1, "-m", "bench", "show", str(small_sweep))
    assert shown.returncode == 0 and "linear" in shown.stdout and "complete" in shown.stdout
    as_csv = mpiexec(1, "-m", "bench", "show", str(small_sweep), "--format", "csv")
    assert list(csv.reader(as_csv.stdout.splitlines()))[0][:3] == ["nprocs", "nnodes", "ppn"]


@pytest.mark.launches
def test_a_bad_record_on_resume_ends_the_job_instead_of_hanging(tmp_path):
    out = tmp_path / "run"
    assert bench(2, "run", "--sizes", "8", "--algorithms", "native", "--iterations", "2", "--output", str(out),
                 "--quiet", asleep=True).returncode == 0
    samples = out / "samples.csv"
    samples.write_text(samples.read_text().replace("timing,", "", 1))
    meta = json.loads((out / "meta.json").read_text())
    meta["config"]["sizes"].append(16)
    (out / "meta.json").write_text(json.dumps(meta))
    began = time.monotonic()
    done = bench(2, "run", "--resume", str(out), timeout=120, asleep=True)
    assert done.returncode != 0 and "unexpected CSV header" in done.stderr
    assert time.monotonic() - began < 60


@pytest.mark.launches
def test_sigusr1_stops_like_sigterm(tmp_path):
    out = tmp_path / "run"
    assert interrupted_sweep(out, signal.SIGUSR1, SLOW, rows_first=1).returncode != 0
    assert json.loads((out / "meta.json").read_text())["status"] == "terminated by SIGUSR1"
    assert 1 <= len(read_rows(out)) < 4
