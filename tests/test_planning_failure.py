"""One rank failing to plan (a source missing where the executor is built, a full disk while tracing, a library that
will not load, a factory's error, at plan time or at the first start) is one error on every rank within seconds,
through the library API, the one-shot calls and the driver: never a rank left waiting for its peers, not even the
ranks inside a plan the factory makes of another algorithm (on_pairwise, at 2 to 4 ranks). The cases of one program
and rank count share a job, each on a communicator of its own and with what it broke put back after it, since a job
costs a second of start-up and a case a few milliseconds; a rank left waiting still hangs that job, which is killed
(and its tests failed) if it outlives TIMEOUT."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support import ROOT, cleaned, launch_command

from a2a.record.results import read_rows

pytestmark = pytest.mark.launches

TIMEOUT = 45  # seconds a job may take before it counts as hung (each takes 1 to 4 s here)
FACTORY_FAILS = "RuntimeError: fails_on_one: rank 1 cannot prepare, on purpose"
NESTED_FAILS = "RuntimeError: on_pairwise: rank 1 cannot prepare, on purpose"
SECONDS_TO_THE_ERROR = 15.0  # from the call to the error on every rank (under a second here, oversubscribed)
# each case of PROGRAM: the rank that fails, and its cause as every rank tells it
CASES = {"source": (0, "building the C executor: FileNotFoundError: [Errno 2] No such file or directory"),
         "disk": (1, "OSError: [Errno 28] No space left on device"),
         **{case: (1, FACTORY_FAILS) for case in ("factory", "start", "alltoall", "ialltoall")}}

PLUGIN = '''
import a2a

FAILING = {"now": True}  # a program may hold the failure back (until the first start prepares the plan again)


@a2a.register("fails_on_one")
def fails_on_one(comm, sendbuf, recvbuf):
    """Alltoall; preparing it fails on rank 1 while FAILING["now"]."""
    if comm.rank == 1 and FAILING["now"]:
        raise RuntimeError("fails_on_one: rank 1 cannot prepare, on purpose")
    return lambda: comm.Alltoall(sendbuf, recvbuf)


@a2a.register("on_pairwise")
def on_pairwise(comm, sendbuf, recvbuf):
    """Alltoall by a plan of pairwise made here; rank 1 raises before making it while FAILING["now"]."""
    if comm.rank == 1 and FAILING["now"]:
        raise RuntimeError("on_pairwise: rank 1 cannot prepare, on purpose")
    inner = a2a.get("pairwise").plan(comm, sendbuf, recvbuf)
    return inner, inner.free
'''

# on_pairwise through the library API (plan) or a one-shot call, failing or not (each case HOW:fails or HOW:runs, in
# turn, on a duplicate of the world of its own); each rank tells what each case met and when
NESTED = '''
import sys
import time

import numpy as np
from mpi4py import MPI

import a2a

sys.path.insert(0, sys.argv[1])
from fails_on_one import FAILING

for case in sys.argv[2:]:
    how, comm = case.split(":")[0], MPI.COMM_WORLD.Dup()
    FAILING["now"] = case.endswith(":fails")
    send = np.arange(2 * comm.size, dtype=np.int32) + 100 * comm.rank
    recv = np.zeros_like(send)
    want = np.concatenate([np.arange(2) + 2 * comm.rank + 100 * q for q in range(comm.size)]).astype(np.int32)
    began = time.monotonic()
    try:
        if how == "plan":
            with a2a.get("on_pairwise").plan(comm, send, recv) as plan:
                plan()
        else:
            a2a.alltoall(comm, send, recv, algorithm="on_pairwise")
        outcome = f"ran right={np.array_equal(recv, want)}"
    except Exception as error:
        outcome = f"{type(error).__name__}: {error}"
    print(f"rank {comm.rank} case {case} says: {outcome} after {time.monotonic() - began:.2f} s", flush=True)
'''

# each case of CASES, and load, in turn, each on a duplicate of the world of its own: source first, before any case
# has built the node's executor (it is kept per group, once built); what a case broke is put back after it
PROGRAM = '''
import errno
import sys

import numpy as np
from mpi4py import MPI

import a2a
from a2a.execute import executor

sys.path.insert(0, sys.argv[1])
from fails_on_one import FAILING

kept = {"SOURCES": executor.SOURCES, "traced": executor.traced, "loaded": executor.loaded}


def refused(*args, **kwargs):
    raise {"disk": OSError(errno.ENOSPC, "No space left on device"),
           "load": OSError("liba2ax.so: cannot open shared object file")}[case]


for case in sys.argv[2:]:
    comm = MPI.COMM_WORLD.Dup()
    rank, size = comm.rank, comm.size
    send = np.arange(2 * size, dtype=np.int32) + 100 * rank
    recv = np.zeros_like(send)
    want = np.concatenate([np.arange(2) + 2 * rank + 100 * q for q in range(size)]).astype(np.int32)
    if case == "source" and rank == 0:  # the rank that builds the node's executor
        executor.SOURCES = [executor.C / "gone.c", executor.C / "executor.h"]
    elif case == "disk" and rank == 1:
        executor.traced = refused
    elif case == "load" and rank == 1:
        executor.loaded = refused
    FAILING["now"] = case != "start"
    try:
        if case in ("source", "disk", "load"):
            with a2a.get("pairwise").plan(comm, send, recv) as plan:
                plan()
                outcome = f"ran executor={plan.executor} right={np.array_equal(recv, want)}"
        elif case in ("factory", "start"):
            with a2a.get("fails_on_one").plan(comm, send, recv) as plan:
                FAILING["now"] = True
                plan.start()
                plan.wait()
                outcome = "ran"
        elif case == "alltoall":
            a2a.alltoall(comm, send, recv, algorithm="fails_on_one")
            outcome = "ran"
        else:
            a2a.ialltoall(comm, send, recv, "fails_on_one").wait()
            outcome = "ran"
    except Exception as error:
        outcome = f"{type(error).__name__}: {error}"
    for name, value in kept.items():
        setattr(executor, name, value)
    print(f"rank {rank} case {case} says: {outcome}", flush=True)
'''


def launched(n: int, *args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """`mpiexec -n N python ARGS` in the checkout (whose a2a it imports), in a session of its own whose every process
    is killed if it outlives `timeout` (then the test fails: some rank hung)."""
    job = subprocess.Popen(launch_command(n, sys.executable, *args), cwd=ROOT, env=cleaned(None, asleep=True),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        out, err = job.communicate()
        pytest.fail(f"the job hung: killed after {timeout} s\nstdout:\n{out}\nstderr:\n{err[-3000:]}")
    return subprocess.CompletedProcess(job.args, job.returncode, out, err)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("plugin")
    (directory / "fails_on_one.py").write_text(PLUGIN)
    return directory


def said(done: subprocess.CompletedProcess, cases: list[str], n: int = 2) -> dict[str, list[str]]:
    """Each case's outcome on each rank (of `n`), by case, then rank."""
    found = {(rank, case): outcome.strip() for rank, case, outcome  # lines may meet: an outcome ends at the next
             in re.findall(r"rank (\d) case (\S+) says: (.*?)(?=rank \d case |$)", done.stdout, re.MULTILINE)}
    wanted = [(str(rank), case) for case in cases for rank in range(n)]
    assert sorted(found) == sorted(wanted), f"{done.stdout}\n{done.stderr[-3000:]}"
    return {case: [found[str(rank), case] for rank in range(n)] for case in cases}


def timed(outcome: str) -> tuple[str, float]:
    """An outcome of NESTED as (what the rank met, seconds from its call)."""
    what, seconds = re.fullmatch(r"(.*) after ([\d.]+) s", outcome, re.DOTALL).groups()  # type: ignore[union-attr]
    return what, float(seconds)


@pytest.fixture(scope="module")
def planned(plugin: Path) -> dict[str, list[str]]:
    """PROGRAM's cases, one job of 2 ranks: each case's outcome on each rank."""
    cases = [*CASES, "load"]
    done = launched(2, "-c", PROGRAM, str(plugin), *cases)
    assert done.returncode == 0, done.stderr
    return said(done, cases)


@pytest.fixture(scope="module")
def nested(plugin: Path) -> Callable[[int], dict[str, list[tuple[str, float]]]]:
    """NESTED's cases on n ranks, one job per n (asked for once): each case's timed outcome on each rank."""
    jobs: dict[int, dict[str, list[tuple[str, float]]]] = {}

    def outcomes(n: int) -> dict[str, list[tuple[str, float]]]:
        if n not in jobs:
            cases = ["plan:fails", "one-shot:fails", *(["plan:runs"] if n == 3 else [])]
            done = launched(n, "-c", NESTED, str(plugin), *cases)
            assert done.returncode == 0, done.stderr
            jobs[n] = {case: [timed(outcome) for outcome in told] for case, told in said(done, cases, n).items()}
        return jobs[n]
    return outcomes


@pytest.mark.parametrize("case", CASES)
def test_one_rank_failing_to_plan_is_one_error_on_every_rank(planned, case):
    failing, cause = CASES[case]
    outcomes = planned[case]
    assert outcomes[0] == outcomes[1], outcomes  # the same exception on every rank
    assert outcomes[0].startswith(f"PlanFailed: planning failed on rank {failing} of 2: {cause}"), outcomes[0]


def test_a_library_that_one_rank_cannot_load_runs_python_on_every_rank(planned):
    assert planned["load"] == ["ran executor=python right=True"] * 2


@pytest.mark.parametrize("how", ["plan", "one-shot"])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_factory_failing_before_its_own_plan_of_pairwise_is_one_error_on_every_rank(nested, how, n):
    """Rank 1 raises before the plan of pairwise its factory makes; the other ranks are inside that plan's agreement
    when rank 1 tells how its factory ended: they raise what it told (the same communicator, one allgather each),
    and every rank ends with rank 1's error. Before, they waited there for ever (the test killed the job)."""
    outcomes = nested(n)[f"{how}:fails"]
    first = outcomes[0][0]
    assert first.startswith(f"PlanFailed: planning failed on rank 1 of {n}: {NESTED_FAILS}; every rank raises"), first
    assert [what for what, _ in outcomes] == [first] * n  # the same error on every rank, naming only rank 1
    assert max(seconds for _, seconds in outcomes) < SECONDS_TO_THE_ERROR, outcomes


def test_a_factory_that_makes_its_own_plan_of_pairwise_runs_right(nested):
    """The agreement of the plan inside the factory is the ordinary one when every rank makes it (in the job of 3
    ranks, after its failing cases)."""
    assert [what for what, _ in nested(3)["plan:runs"]] == ["ran right=True"] * 3


def test_the_driver_fails_the_point_one_rank_cannot_plan_on_every_rank_and_goes_on(plugin, tmp_path):
    """Without the agreement, rank 0 would wait in the exchange, and the job would end after the driver's 10 s."""
    out = tmp_path / "run"
    done = launched(2, "-m", "bench", "run", "--plugin", str(plugin / "fails_on_one.py"), "--algorithms",
                    "fails_on_one,pairwise", "--sizes", "8", "--nprocs", "2", "--iterations", "3", "--quiet",
                    "--output", str(out))
    assert done.returncode == 0, done.stderr
    rows = {row.algorithm: row for row in read_rows(out)}
    assert rows["pairwise"].valid
    assert not rows["fails_on_one"].valid
    assert rows["fails_on_one"].note.startswith(f"failed on rank 1: {FACTORY_FAILS}"), rows["fails_on_one"].note


def test_a_sweep_fails_the_point_whose_factory_fails_before_its_own_plan_and_measures_native(plugin, tmp_path):
    """At 3 ranks, rank 1's factory raises while ranks 0 and 2 are inside the plan of pairwise theirs make: the point
    fails on every rank with rank 1's error (its traceback in errors.log), and native's points are measured. Before,
    the job hung until the watchdog's 300 s, every point lost."""
    out = tmp_path / "run"
    done = launched(3, "-m", "bench", "run", "--plugin", str(plugin / "fails_on_one.py"), "--algorithms",
                    "on_pairwise,native", "--sizes", "8,64", "--nprocs", "3", "--iterations", "3", "--no-control",
                    "--quiet", "--output", str(out))
    assert done.returncode == 0, done.stderr
    rows = {(row.algorithm, row.bytes_per_peer): row for row in read_rows(out)}
    assert sorted(rows) == [(a, size) for a in ("native", "on_pairwise") for size in (8, 64)]
    assert rows["native", 8].valid and rows["native", 64].valid
    for size in (8, 64):
        row = rows["on_pairwise", size]
        assert not row.valid and row.note.startswith(f"failed on rank 1: {NESTED_FAILS}"), row.note
    assert "in on_pairwise\n    raise RuntimeError" in (out / "errors.log").read_text()  # rank 1's own traceback
