"""liba2a beside another PMPI tool (tests/programs/counting_shim.c, which counts MPI_Init, MPI_Alltoall(v) and
MPI_Isend): preloaded in either order the program stays right; after liba2a the tool still sees MPI_Init and
MPI_Finalize, the calls liba2a passes on, and the executor's point-to-point messages of the calls liba2a serves;
before liba2a, a tool that forwards to the next MPI_X (dlsym(RTLD_NEXT)) lets liba2a serve, and a classic one that
forwards to PMPI_X takes every call from liba2a (docs/liba2a.md)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import ROOT
from test_deploy import under_library
from test_liba2a_errors import pairwise_file

from a2a.deploy.library import preload_library
from a2a.kept import compiled

PROGRAMS = ROOT / "tests" / "programs"
FLAGS = ["-O2", "-Wall", "-Wextra", "-Werror"]
SERVED, PASSED = 2, 4  # per rank, of alltoall_check's alltoalls at 3 ints with CHECK_PASS_THROUGH on 2 ranks


@pytest.fixture(scope="module")
def libraries() -> tuple[str, str]:
    """liba2a, and the counting tool."""
    return str(preload_library()), str(compiled([PROGRAMS / "counting_shim.c"], "counting_shim.so", [*FLAGS, "-ldl"],
                                                shared=True))


@pytest.fixture(scope="module")
def check_program() -> str:
    return str(compiled([PROGRAMS / "alltoall_check.c"], "alltoall_check", FLAGS))


def counts(stderr: str) -> dict[str, int]:
    """The tool's counts summed over the ranks: init, alltoall, alltoallv, isend."""
    total = dict.fromkeys(("init", "alltoall", "alltoallv", "isend"), 0)
    lines = re.findall(r"shim: rank \d+: init (\d+) alltoall (\d+) alltoallv (\d+) isend (\d+)", stderr)
    assert len(lines) == 2, stderr
    for line in lines:
        for name, value in zip(total, line):
            total[name] += int(value)
    return total


def liba2a_seen(stderr: str) -> tuple[str, str]:
    """liba2a's report lines of alltoall and alltoallv ('' where it printed none)."""
    found = [re.search(rf"^  {c}: (seen .*)$", stderr, re.M) for c in ("alltoall", "alltoallv")]
    return (found[0][1] if found[0] else "", found[1][1] if found[1] else "")


def run(tmp_path: Path, order: str, forward: str, program: str) -> tuple[str, str]:
    done = under_library(2, order, program, "3", A2A_DEPLOY=str(pairwise_file(tmp_path, 2)), A2A_DEPLOY_REPORT="1",
                         CHECK_PASS_THROUGH="1", A2A_TEST_SHIM_FORWARD=forward)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    return done.stdout, done.stderr


@pytest.mark.launches
def test_liba2a_first_serves_and_the_tool_sees_the_rest(tmp_path: Path, libraries: tuple[str, str],
                                                          check_program: str):
    liba2a, tool = libraries
    _, stderr = run(tmp_path, f"{liba2a}:{tool}", "pmpi", check_program)
    alltoall, alltoallv = liba2a_seen(stderr)
    assert alltoall.startswith(f"seen {2 * (SERVED + PASSED)}, served {2 * SERVED} (pairwise") and \
        alltoallv.startswith("seen 4, served 4"), stderr
    # MPI_Init reached it; the alltoalls liba2a passed on; the executor's sends (one per served call at p = 2)
    assert counts(stderr) == {"init": 2, "alltoall": 2 * PASSED, "alltoallv": 0, "isend": 2 * (SERVED + 2)}, stderr


@pytest.mark.launches
def test_a_tool_first_that_forwards_to_the_next_lets_liba2a_serve(tmp_path: Path, libraries: tuple[str, str],
                                                                   check_program: str):
    liba2a, tool = libraries
    _, stderr = run(tmp_path, f"{tool}:{liba2a}", "next", check_program)
    alltoall, alltoallv = liba2a_seen(stderr)
    assert alltoall.startswith(f"seen {2 * (SERVED + PASSED)}, served {2 * SERVED} (pairwise") and \
        alltoallv.startswith("seen 4, served 4"), stderr
    assert counts(stderr) == {"init": 2, "alltoall": 2 * (SERVED + PASSED), "alltoallv": 4,
                              "isend": 2 * (SERVED + 2)}, stderr


@pytest.mark.launches
def test_a_classic_tool_first_takes_every_call_and_the_program_stays_right(tmp_path: Path,
                                                                           libraries: tuple[str, str],
                                                                           check_program: str):
    liba2a, tool = libraries
    _, stderr = run(tmp_path, f"{tool}:{liba2a}", "pmpi", check_program)
    assert liba2a_seen(stderr) == ("", ""), stderr  # its MPI_Init never ran: it reports nothing, serves nothing
    assert counts(stderr) == {"init": 2, "alltoall": 2 * (SERVED + PASSED), "alltoallv": 4, "isend": 0}, stderr
