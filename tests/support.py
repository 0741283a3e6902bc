"""Helpers the tests share: MPI programs of their own, `bench` jobs, and collective set-ups."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from a2a.mpi import clean_launcher_env, launcher_flags, mpi_tool

if TYPE_CHECKING:
    from a2a.algos.schedule import Step

ROOT = Path(__file__).resolve().parent.parent
SIZES_VARIABLE = "A2A_TEST_SIZES"  # a nested run's sizes per test file, "test_a:5,8 test_b:5,6,7"
# oversubscribed MPICH ranks wait asleep instead of spinning (as the Makefile's test-mpi); given after the launcher's
# variables are cleaned out, since MPIR_CVAR_ ones are among them
QUIET_WAIT = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}


@cache
def mpi_library() -> str:
    """This Python's MPI library, as MPI_Get_library_version says it (without Open MPI's NUL byte, as the record
    keeps it)."""
    from a2a.mpi import library_version

    return library_version()


def is_mpich() -> bool:
    return "MPICH" in mpi_library()


def needs_mpich(why: str) -> pytest.MarkDecorator:
    """Skip a test that only MPICH can pass, saying why (the suite also runs with Open MPI)."""
    return pytest.mark.skipif(not is_mpich(), reason=f"needs MPICH: {why}")


def built_program(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """tests/programs/NAME.c built with this MPI library's mpicc, warnings as errors, in a folder of its own."""
    program = tmp_path_factory.mktemp("programs") / name
    subprocess.run([mpi_tool("mpicc"), "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(program),
                    str(ROOT / "tests" / "programs" / f"{name}.c")], check=True)
    return program


def launch_command(n: int, *program: str, cores: str | None = None) -> list[str]:
    """`mpiexec -n N PROGRAM...` as this MPI needs it for tests.

    Open MPI refuses more ranks than cores, and root, unless told; `cores` ("0", "0,1") pins
    the job to those CPUs with taskset, so that ranks outnumber cores on any machine.
    """
    pinned = ["taskset", "-c", cores] if cores else []
    return [*pinned, mpi_tool("mpiexec"), *launcher_flags(mpi_tool("mpiexec")), "-n", str(n), *program]


def mpiexec(n: int, *args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path | str = ROOT, cores: str | None = None, asleep: bool = False) -> subprocess.CompletedProcess:
    """Run `mpiexec -n N python ARGS...` with a clean launcher environment (ranks waiting asleep if `asleep`);
    capture its output."""
    return subprocess.run(launch_command(n, sys.executable, *args, cores=cores), env=cleaned(env, asleep),
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


def python(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
           cwd: Path | str = ROOT, asleep: bool = False) -> subprocess.CompletedProcess:
    """Run `python ARGS...` as a separate (singleton MPI) process (the ranks it launches waiting asleep if `asleep`);
    capture its output."""
    return subprocess.run([sys.executable, *args], env=cleaned(env, asleep), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def cleaned(env: dict[str, str] | None, asleep: bool) -> dict[str, str]:
    """`env` (default: this one) less what a launcher set, plus QUIET_WAIT if `asleep`."""
    return {**clean_launcher_env(env), **(QUIET_WAIT if asleep else {})}


def bench(n: int, *args: str, timeout: float = 300, env: dict[str, str] | None = None,
          asleep: bool = False) -> subprocess.CompletedProcess:
    """`mpiexec -n N python -m bench ARGS...`, with `env` added to this environment (ranks waiting asleep if
    `asleep`: for a test of what a run records, not of how fast)."""
    return mpiexec(n, "-m", "bench", *args, timeout=timeout, env={**os.environ, **env} if env else None, asleep=asleep)


def bench_here(capsys, *args: str) -> tuple[int, str, str]:
    """Run `python -m bench ARGS` in this process: (exit code, stdout, stderr)."""
    from bench.cli import entry

    code = 0
    try:
        entry(list(args))
    except SystemExit as ended:
        assert not isinstance(ended.code, str), ended.code  # bench exits with a number
        code = ended.code or 0
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused_before_measuring(args: list[str], message: str, out: Path, n: int = 2) -> None:
    """`bench run ARGS` on N ranks exits 2, prints `message` once (not once per rank) and records nothing."""
    done = bench(n, "run", *args, "--output", str(out), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count(message) == 1, done.stderr
    assert not (out / "results.csv").exists()


def assert_refused_here(capsys, args: list[str], message: str, out: Path) -> None:
    """`bench run ARGS` in this process exits 2, prints `message` once and records nothing.

    For refusals made before any rank measures: the launched form above proves once for all that they are
    printed by one rank only.
    """
    code, _, err = bench_here(capsys, "run", *args, "--output", str(out))
    assert code == 2, err
    assert err.count(message) == 1, err
    assert not (out / "results.csv").exists()


def collective_tests(files: tuple[tuple[str, tuple[int, ...]], ...], out: Path, timeout: float = 1200) -> Path:
    """Run the `mpi`-marked tests of each (file, sizes) in one `mpiexec -n N pytest` (N: the largest size named),
    each file's on subcommunicators of its own sizes only. A file may be named as `FILE::TEST`, once per test: those
    tests only (a file's entries name the same sizes).

    Returns the JUnit report, which `assert_collective_tests_passed` reads per file.
    """
    report = out / "collective.xml"
    sizes_of = {Path(path.split("::")[0]).stem: sizes for path, sizes in files}
    told = " ".join(f"{stem}:{','.join(map(str, sizes))}" for stem, sizes in sizes_of.items())
    done = mpiexec(max(max(sizes) for _, sizes in files), "-m", "pytest", "-q", "-m", "mpi", "-p", "no:cacheprovider",
                   f"--junitxml={report}", *(path for path, _ in files), timeout=timeout,
                   env={**os.environ, SIZES_VARIABLE: told}, asleep=True)
    said = done.stdout[-3000:] + done.stderr[-3000:]
    assert report.exists(), said
    # a job that failed with every test passed (a crash at exit, say) is the whole run's failure, not one file's
    assert done.returncode == 0 or failures(report), said
    return report


def cases(report: Path, module: str = "") -> list:
    """The test cases of a JUnit report, of the test file `module` (its stem) if named."""
    import xml.etree.ElementTree as ET

    return [case for case in ET.parse(report).iter("testcase") if case.get("classname", "").endswith(module)]


def failures(report: Path, module: str = "") -> list[str]:
    """'name: message' for each failed or errored test case of a JUnit report (of `module` if named)."""
    return [f"{case.get('name')}: {(case[0].get('message') or '')[:300]}" for case in cases(report, module)
            if len(case) and case[0].tag in ("failure", "error")]


def assert_collective_tests_passed(report: Path, path: str) -> None:
    """Every test of `path` in a `collective_tests` report passed (some ran; none failed or errored)."""
    module = Path(path).stem
    ran = [case for case in cases(report, module) if not len(case) or case[0].tag != "skipped"]
    bad = failures(report, module)
    assert ran and not bad, f"{path}: {len(ran)} ran; failed: {bad}"


DEBIAN_MPI = {"MPICH": "mpich", "Open MPI": "openmpi"}  # the suffix of each library's tools in Debian's packages


def debian_tool(library: str, tool: str) -> str:
    """The tool (mpicc, mpif90, mpirun) of Debian's package of `library`, e.g. /usr/bin/mpif90.openmpi."""
    return f"/usr/bin/{tool}.{DEBIAN_MPI[library]}"


def needs_debian_mpi(library: str) -> pytest.MarkDecorator:
    """Mark a test of the `debian` tier, skipped (saying why) where Debian's package of `library` or gfortran is
    missing; CI installs them (.ci/setup.d/debian-mpi.sh)."""
    missing = [tool for tool in (debian_tool(library, "mpicc"), debian_tool(library, "mpif90"),
                                 debian_tool(library, "mpirun")) if not Path(tool).exists()]
    why = f"needs Debian's {library} ({', '.join(missing)} missing: `bash .ci/setup.d/debian-mpi.sh` installs it)"
    return pytest.mark.debian(pytest.mark.skipif(bool(missing), reason=why))


def debian_libraries() -> list:
    """Debian's MPICH and Open MPI as parameters of a test, each skipped (saying why) where it is missing."""
    return [pytest.param(library, marks=needs_debian_mpi(library)) for library in DEBIAN_MPI]


def debian_launch(library: str, n: int, *program: str) -> list[str]:
    """`mpirun -n N PROGRAM...` with Debian's package of `library`: Open MPI's as root and beyond the cores, as told."""
    told = ["--oversubscribe", *(["--allow-run-as-root"] if os.geteuid() == 0 else [])] if library == "Open MPI" else []
    return [debian_tool(library, "mpirun"), *told, "-n", str(n), *program]


def needs_simgrid(test):
    """Mark a test of the `simgrid` tier, skipped (saying why) where SimGrid's SMPI is missing."""
    from a2a.simulate.simgrid import missing

    why = missing()
    return pytest.mark.simgrid(pytest.mark.skipif(why is not None, reason=f"needs SimGrid: {why}")(test))


def self_comm():
    """MPI.COMM_SELF: one rank, for checks that fail before any message moves."""
    from mpi4py import MPI

    return MPI.COMM_SELF


def sizes_to_test(world_size: int) -> list[int]:
    """The subcommunicator sizes the collective tests loop over: 1 .. world size, or those A2A_TEST_SIZES names for
    the running test's file."""
    named = os.environ.get(SIZES_VARIABLE)
    if not named:
        return list(range(1, world_size + 1))
    module = Path(os.environ["PYTEST_CURRENT_TEST"].split("::")[0]).stem
    sizes = dict(entry.split(":") for entry in named.split())[module]
    return [int(p) for p in sizes.split(",") if int(p) <= world_size]


def subcommunicators(comm):
    """(p, communicator of the first p ranks or None) for each p of `sizes_to_test`."""
    from mpi4py import MPI

    from a2a.mpi import idle_barrier

    for p in sizes_to_test(comm.size):
        sub = comm.Split(0 if comm.rank < p else MPI.UNDEFINED, comm.rank)
        yield p, (sub if sub != MPI.COMM_NULL else None)
        if sub != MPI.COMM_NULL:
            sub.Free()
        idle_barrier(comm, poll=0.001)  # asleep, but not 5 ms at a time: a test crosses it once per size


def shared_path(comm, tmp_path: Path, name: str, document) -> str:
    """Rank 0 writes `document` (a dict as JSON, or text) to tmp_path/name; every rank gets its path."""
    path = str(tmp_path / name) if comm.rank == 0 else None
    if comm.rank == 0:
        (tmp_path / name).write_text(json.dumps(document) if isinstance(document, dict) else document)
    return comm.bcast(path)


def runs_alike(plan, got: np.ndarray, want: np.ndarray, calls: int = 3) -> bool:
    """Call a plan `calls` times, clearing `got` before each; True if every call gave `want`. Frees the plan."""
    with plan:
        for _ in range(calls):
            got[:] = 0
            plan()
            if not np.array_equal(got, want):
                return False
    return True


def listed(steps: Iterable[Step]) -> list[tuple]:
    """a2a.algos.schedule Steps with their blocks as lists of (source, destination) tuples."""
    return [(s.dest, [tuple(b) for b in s.sent.tolist()], s.source, [tuple(b) for b in s.received.tolist()])
            for s in steps]
