"""The shipped batch script and `bench slurm`, run by a real (private, single-node) Slurm."""
from __future__ import annotations

import json
import re
import shlex
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import Cluster, missing
from support import ROOT, python

from a2a.mpi import launcher_flags
from a2a.record.results import COLUMNS, load, read_samples

SCRIPT = ROOT / "a2a" / "workflows" / "slurm" / "sweep.sbatch"
HOSTFILE = ROOT / "hostfiles" / "from-slurm.sh"
JOB = ("--nodes=1", "--ntasks=4", "--overcommit", "--time=5")  # 4 ranks on however few cores
NAP = '''\
import time
from a2a.algos.registry import register


@register("nap")
def nap(comm, sendbuf, recvbuf, *, seconds=0.25):
    """MPI_Alltoall after a nap: a slow algorithm, so that a sweep can be stopped halfway."""
    def run():
        time.sleep(seconds)
        comm.Alltoall(sendbuf, recvbuf)
    return run
'''


@pytest.fixture
def slurm():
    """A private single-node Slurm, stopped (daemons and jobs) after the test."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    cluster = Cluster.start()
    yield cluster
    cluster.stop()


# what the venv's mpirun needs here (Open MPI, as root), passed to the job as a user would
MPIRUN_ARGS = " ".join(launcher_flags(str(Path(sys.executable).parent / "mpirun")))


def sweep_env(**settings: str) -> dict[str, str]:
    """The job's environment: this Python (its venv holds mpirun) and the sweep's settings."""
    return {"A2A_PYTHON": sys.executable, "A2A_NPROCS": "4", "A2A_ITERATIONS": "5", "A2A_MPIRUN_ARGS": MPIRUN_ARGS,
            **settings}


def job_output(directory: Path, job: str) -> str:
    return (directory / f"a2a-sweep-{job}.out").read_text()


def assert_complete(directory: Path, sizes: list[int], algorithms: list[str], job: str,
                    nprocs: int = 4) -> None:
    """Every point measured once and valid (native's control beside native), its samples on disk,
    meta.json naming the job."""
    run = load(directory)
    keys = [(row.algorithm, row.bytes_per_peer) for row in run.rows]
    measured = algorithms + ["control"] * ("native" in algorithms)
    assert sorted(keys) == sorted((a, s) for a in measured for s in sizes)
    assert all(row.valid and row.nprocs == nprocs for row in run.rows), [row.note for row in run.rows]
    assert all(len(run.samples[row.key]) == row.iterations > 0 for row in run.rows)
    assert run.meta["slurm_job_id"] == job
    assert run.meta["status"] == "complete"


@pytest.mark.slurm
def test_sweep_job_records_every_point(slurm, tmp_path):
    job = slurm.sbatch(*JOB, str(SCRIPT), cwd=tmp_path,
                       env=sweep_env(A2A_SIZES="8,1K", A2A_ALGORITHMS="native,pairwise,bruck"))
    state = slurm.wait(job, timeout=240)
    output = job_output(tmp_path, job)
    assert state["JobState"] == "COMPLETED", output
    assert "sweep complete" in output
    directory = tmp_path / "results" / f"slurm-{job}"
    assert_complete(directory, [8, 1024], ["native", "pairwise", "bruck"], job)
    header = (directory / "results.csv").read_text().splitlines()[0].split(",")
    assert header[: len(COLUMNS)] == COLUMNS


@pytest.mark.slurm
def test_time_limit_warning_stops_cleanly_and_resume_finishes(slurm, tmp_path):
    """Slurm's warning (--signal=B:TERM@N) goes to the batch shell; the script's trap must stop
    the ranks cleanly. Slurm's time limits have a minimum of one minute and its warning comes
    with up to a minute's slack, so the test sends the batch shell the same SIGTERM at once."""
    plugin = tmp_path / "nap.py"
    plugin.write_text(NAP)
    sizes, algorithms = [8, 64, 512, 4096], ["native", "nap"]
    job = slurm.sbatch(*JOB, str(SCRIPT), cwd=tmp_path, env=sweep_env(
        A2A_SIZES="8,64,512,4K", A2A_ALGORITHMS="native,nap", A2A_RUN_ARGS=f"--plugin {plugin}"))
    directory = tmp_path / "results" / f"slurm-{job}"
    wait_for_rows(directory / "results.csv", 1, slurm, job)
    slurm.run("scancel", "--signal=TERM", "--batch", job)
    state = slurm.wait(job, timeout=120)
    output = job_output(tmp_path, job)

    assert (state["JobState"], state["ExitCode"]) == ("FAILED", "143:0"), output  # not TIMEOUT, not killed
    assert "Slurm's warning before the time limit" in output and "stopped cleanly" in output
    run = load(directory)
    assert run.meta["status"].startswith("terminated") and run.meta["slurm_job_id"] == job
    assert 1 <= len(run.rows) < len(sizes) * (len(algorithms) + 1)  # + native's control
    assert all(row.valid for row in run.rows)
    assert set(read_samples(directory)) == {row.key for row in run.rows}  # flushed, nothing half-written

    resume = printed_sbatch(output)
    assert f"A2A_OUTPUT={directory}" in " ".join(resume)
    submitted = slurm.run(*resume, cwd=tmp_path)
    found = re.search(r"Submitted batch job (\d+)", submitted.stdout)
    assert found, submitted.stdout + submitted.stderr
    again = found.group(1)
    state = slurm.wait(again, timeout=240)
    output = job_output(tmp_path, again)
    assert state["JobState"] == "COMPLETED", output
    assert f"resuming the sweep in {directory}" in output
    assert_complete(directory, sizes, algorithms, again)


@pytest.mark.slurm
@pytest.mark.launches
def test_bench_slurm_submits_a_campaign(slurm, tmp_path):
    done = python("-m", "bench", "slurm", "--nodes", "1", "--ntasks-per-node", "2", "--time", "5",
                  "--campaign", "campaign", "--submit", "--",
                  "--sizes", "8", "--algorithms", "native,linear", "--iterations", "5",
                  cwd=tmp_path, env={**slurm.env, "A2A_MPIRUN_ARGS": MPIRUN_ARGS})
    assert done.returncode == 0, done.stderr
    jobs = re.findall(r"submitted job (\d+): results in campaign/nodes-1", done.stdout)
    assert len(jobs) == 1, done.stdout
    state = slurm.wait(jobs[0], timeout=240)
    output = job_output(tmp_path, jobs[0])
    assert state["JobState"] == "COMPLETED", output
    assert "--nprocs 2" in output  # a campaign's job measures its whole allocation
    assert_complete(tmp_path / "campaign" / "nodes-1", [8], ["native", "linear"], jobs[0], nprocs=2)


@pytest.mark.slurm
@pytest.mark.launches
def test_bench_slurm_tune_runs_the_whole_tune_in_one_allocation(slurm, tmp_path):
    """Pairwise alone is swept, so the tune has a table to export, verify and apply."""
    done = python("-m", "bench", "slurm", "--tune", "--nodes", "1", "--ntasks-per-node", "2", "--time", "10",
                  "--output", "tuned", "--submit", "--",
                  "--sizes", "8,64K", "--algorithms", "pairwise", "--iterations", "3", "--verify-iterations", "3",
                  "--launches", "2", "--rounds", "2",
                  cwd=tmp_path, env={**slurm.env, "A2A_MPIRUN_ARGS": MPIRUN_ARGS})
    assert done.returncode == 0, done.stderr
    [job] = re.findall(r"submitted job (\d+): results in tuned", done.stdout)
    state = slurm.wait(job, timeout=600)
    output = (tmp_path / f"a2a-tune-{job}.out").read_text()
    assert state["JobState"] == "COMPLETED", output
    assert "tune complete" in output and "tuned/default" in output
    meta = json.loads((tmp_path / "tuned" / "meta.json").read_text())
    assert meta["status"] == "complete" and Path(meta["file"]).is_file()
    # 3 iterations a side decide nothing reliably: whichever way the verification went, the job says it
    assert ("apply it with" in output) == meta["verified"] and ("not applied:" in output) != meta["verified"], output
    assert meta["config"]["nprocs"] == [2]  # the whole allocation
    sweep = json.loads((tmp_path / "tuned" / "sweep-1" / "meta.json").read_text())
    assert sweep["slurm_job_id"] == job and sweep["world_size"] == 2


@pytest.mark.launches
def test_bench_slurm_prints_the_filled_script():
    done = python("-m", "bench", "slurm", "-N", "4", "--ntasks-per-node", "32", "-p", "compute", "-A", "proj42",
                  "-t", "2:00:00", "--warning", "300", "--sbatch=--qos=debug", "--",
                  "--sizes", "8:1M:x4", "--iterations", "50")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for line in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=32", "#SBATCH --partition=compute",
                 "#SBATCH --account=proj42", "#SBATCH --time=2:00:00", "#SBATCH --signal=B:TERM@300",
                 "#SBATCH --qos=debug",
                 '[ -n "${A2A_RUN_ARGS:-}" ] || A2A_RUN_ARGS=\'--sizes 8:1M:x4 --iterations 50\'',
                 f'[ -n "${{A2A_PYTHON:-}}" ] || A2A_PYTHON={sys.executable}'):
        assert line in lines
    assert not any(line.startswith("#SBATCH --ntasks=") for line in lines)  # it would win over per-node
    last_directive = max(i for i, line in enumerate(lines) if line.startswith("#SBATCH"))
    assert last_directive < lines.index("set -uo pipefail")  # sbatch stops reading at the first command


@pytest.mark.launches
@pytest.mark.parametrize("args, message", [
    (["-t", "2h"], "--time '2h'; accepted: MINUTES, MM:SS"),
    (["-N", "0"], "node counts start at 1"),
    (["-N", "1,2", "--output", "x"], "for a campaign use --campaign"),
    (["-p", ""], "--partition ''; accepted: a non-empty name"),
    (["--sbatch", "qos=debug"], "accepted: one long sbatch option"),
    (["--", "--sizez", "8"], "No such option '--sizez'"),
    (["--", "--resume", "x"], "--resume is the script's business"),
    (["--", "--plugin", "a b.py"], "cannot hold spaces"),
])
def test_bench_slurm_refuses_bad_options(args, message):
    done = python("-m", "bench", "slurm", *args)
    assert done.returncode == 2 and message in done.stderr and done.stdout == "", done.stderr


@pytest.mark.slurm
def test_hostfiles_from_the_slurm_nodelist(slurm, tmp_path):
    env = {"SLURM_JOB_NODELIST": "node[01-03],gpu7", "SLURM_TASKS_PER_NODE": "4(x2),2,8"}
    for flavour, expected in (("openmpi", ["node01 slots=4", "node02 slots=4", "node03 slots=2", "gpu7 slots=8"]),
                              ("mpich", ["node01:4", "node02:4", "node03:2", "gpu7:8"])):
        done = slurm.run("bash", str(HOSTFILE), flavour, env=env)
        assert done.stdout.split("\n")[:-1] == expected, done.stderr
    bad = slurm.run("bash", str(HOSTFILE), "lam", env=env, check=False)
    assert bad.returncode == 2 and "accepted: openmpi, mpich" in bad.stderr


def wait_for_rows(path: Path, rows: int, slurm: Cluster, job: str, timeout: float = 120) -> None:
    """Wait until results.csv holds `rows` points (while the job still runs)."""
    deadline = time.monotonic() + timeout
    while not path.exists() or len(path.read_text().splitlines()) < rows + 1:
        assert slurm.job(job)["JobState"] in ("PENDING", "RUNNING"), f"job {job} ended early"
        assert time.monotonic() < deadline, f"no {rows} rows in {path} after {timeout:g} s"
        time.sleep(0.2)


def printed_sbatch(output: str) -> list[str]:
    """The sbatch command the script printed for finishing the sweep."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "finish the sweep with" in line)
    return shlex.split(lines[start + 1])
