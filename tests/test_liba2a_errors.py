"""Every MPI error inside liba2a reaches the program as MPI would hand it: an MPI_Isend made to fail under liba2a (a
PMPI shim preloaded after it, tests/programs/failing_isend.c) ends the job with a line naming the call under
MPI_ERRORS_ARE_FATAL, and is the call's result under MPI_ERRORS_RETURN (a persistent request's: its wait's), on every
rank, none left waiting; the C executor's Python binding raises it. No MPI call in liba2a's or the executor's C
leaves its result unread."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, is_mpich, launch_command
from test_deploy import under_library

from a2a.deploy.file import deployment, this_library
from a2a.deploy.library import SOURCES_OF_LIBA2A, preload_library
from a2a.execute.executor import SOURCES as EXECUTOR_SOURCES
from a2a.kept import compiled
from a2a.mpi import clean_launcher_env

PROGRAMS = ROOT / "tests" / "programs"
CALL = re.compile(r"\b(P?MPIX?_[A-Z][a-z0-9_]*)\s*\(")  # a function of MPI's (constants are upper case)


def code_only(text: str) -> str:
    """C text with its comments and string literals blanked (lines kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m[0]), text, flags=re.S)
    return re.sub(r'"(?:\\.|[^"\\])*"', lambda m: '"' + " " * (len(m[0]) - 2) + '"', text)


def bare_calls(path: Path) -> list[str]:
    """The MPI calls of a C file made as statements of their own (after ';', '{', '}', 'else', or an if's
    condition): their result is never read."""
    text, found = code_only(path.read_text()), []
    for call in CALL.finditer(text):
        before = text[:call.start()].rstrip()
        statement = not before or before[-1] in ";{}" or re.search(r"\b(else|do)$", before) or (
            before[-1] == ")" and re.search(r"\b(if|for|while)\s*\([^;{}]*\)$", before[-400:]))
        if statement:
            found.append(f"{path.name}:{text.count(chr(10), 0, call.start()) + 1}: {call[1]}")
    return found


def test_no_mpi_call_in_liba2a_or_the_executor_leaves_its_result_unread():
    """Each MPI call is compared, assigned or made through A2AX_CHECKED (which keeps the first error and its call)."""
    sources = [p for p in [*SOURCES_OF_LIBA2A, *EXECUTOR_SOURCES] if p.suffix == ".c"]
    assert len(sources) >= 10
    assert [line for path in sources for line in bare_calls(path)] == []


def test_the_check_finds_a_bare_call(tmp_path: Path):
    """The check above is not blind: a statement that drops an MPI call's result is found, a used one is not."""
    source = tmp_path / "bare.c"
    source.write_text("void f(MPI_Comm c) {\n    int r;\n    PMPI_Barrier(c);\n    if (r) MPI_Comm_free(&c);\n"
                      "    r = PMPI_Barrier(c);\n    if (PMPI_Barrier(c) != MPI_SUCCESS) return;\n"
                      "    /* PMPI_Barrier(c); */\n    A2AX_CHECKED(NULL, MPI_Barrier(c));\n}\n")
    assert bare_calls(source) == ["bare.c:3: PMPI_Barrier", "bare.c:4: MPI_Comm_free"]


@pytest.fixture(scope="module")
def preload_with_shim() -> str:
    """liba2a, then the shim that fails the n-th MPI_Isend: the executor's MPI_Isend meets the shim."""
    shim = compiled([PROGRAMS / "failing_isend.c"], "failing_isend.so", ["-O2", "-Wall", "-Wextra", "-Werror"],
                    shared=True)
    return f"{preload_library()}:{shim}"


@pytest.fixture(scope="module")
def failing_exchange() -> str:
    return str(compiled([PROGRAMS / "failing_exchange.c"], "failing_exchange", ["-O2", "-Wall", "-Wextra", "-Werror"]))


def pairwise_file(tmp_path: Path, p: int) -> Path:
    """A deploy file whose alltoall and alltoallv on p ranks run pairwise's schedule (one send per round)."""
    ranges: list[dict[str, Any]] = [{"bytes_min": 0, "bytes_max": None, "algorithm": "pairwise", "options": "",
                                     "cells": []}]
    tables = [{"nprocs": p, "collective": c, "ranges": ranges} for c in ("alltoall", "alltoallv")]
    made = deployment({"schema": "a2a-decision/1", "metric": "mean", "tables": tables, "sources": []}, [p], 0,
                      this_library(), ["pairwise everywhere (tests)"])
    path = tmp_path / "pairwise.a2a"
    path.write_text(made.text())
    return path


def failing_at(p: int) -> str:
    """The MPI_Isend to fail: at p = 2 the first exchange's only one; at p = 3 its second round's, after a round
    that completed."""
    return "1" if p == 2 else "2"


CASES = [(2, "alltoall"), (3, "alltoall"), (2, "alltoallv"), (3, "alltoallv")]


@pytest.mark.launches
@pytest.mark.parametrize("p, collective", CASES)
def test_under_errors_return_the_call_returns_the_error_and_the_next_call_is_right(
        tmp_path: Path, preload_with_shim: str, failing_exchange: str, p: int, collective: str):
    done = under_library(p, preload_with_shim, failing_exchange, "return", collective, "3",
                         A2A_DEPLOY=str(pairwise_file(tmp_path, p)), A2A_DEPLOY_REPORT="1",
                         A2A_TEST_FAIL_ISEND=failing_at(p))
    assert done.returncode == 0 and "ok" in done.stdout.splitlines(), done.stdout + done.stderr
    classes = re.findall(rf"rank \d+: {collective} returned class (\d+)", done.stdout)
    assert len(classes) == p and all(int(c) != 0 for c in classes), done.stdout
    assert re.search(rf"{collective}: seen {2 * p}, served {2 * p} \(pairwise {2 * p}\)", done.stderr), done.stderr
    assert "served by liba2a" not in done.stderr, done.stderr  # the program handles it: no line of liba2a's


@pytest.mark.launches
@pytest.mark.parametrize("p, collective", CASES)
def test_under_errors_are_fatal_the_job_ends_with_a_line_naming_the_call(
        tmp_path: Path, preload_with_shim: str, failing_exchange: str, p: int, collective: str):
    done = under_library(p, preload_with_shim, failing_exchange, "fatal", collective, "3",
                         A2A_DEPLOY=str(pairwise_file(tmp_path, p)), A2A_TEST_FAIL_ISEND=failing_at(p))
    assert done.returncode != 0, done.stdout + done.stderr
    assert "returned class" not in done.stdout, done.stdout  # no rank went on past the failed call
    call = "MPI_Alltoall" if collective == "alltoall" else "MPI_Alltoallv"
    assert re.search(rf"a2a: rank \d+: {call} served by liba2a \(schedule pairwise\) failed: MPI_Isend returned "
                     r"MPI error \d+", done.stderr), done.stderr


@pytest.mark.launches
@pytest.mark.skipif(not is_mpich(), reason="liba2a serves MPI_Ialltoall where MPICH's progress hook runs it")
def test_a_failed_nonblocking_exchange_is_the_waits_result(tmp_path: Path, preload_with_shim: str,
                                                           failing_exchange: str):
    """MPI_Ialltoall (served from a communicator's second call): the program's MPI_Wait returns the error."""
    done = under_library(3, preload_with_shim, failing_exchange, "return", "ialltoall", "3",
                         A2A_DEPLOY=str(pairwise_file(tmp_path, 3)), A2A_TEST_FAIL_ISEND="2")
    assert done.returncode == 0 and "ok" in done.stdout.splitlines(), done.stdout + done.stderr
    assert len(re.findall(r"ialltoall returned class [1-9]", done.stdout)) == 3, done.stdout


@pytest.mark.launches
@pytest.mark.parametrize("p, how, progress", [(2, "run", ""), (3, "run", ""), (3, "start", "test"),
                                              (3, "start", "thread"), (3, "start", "mpi")])
def test_the_python_binding_raises_the_executors_error(p: int, how: str, progress: str):
    """Blocking, and started then waited for under each way an exchange progresses (mpi: where MPICH's hook is)."""
    shim = compiled([PROGRAMS / "failing_isend.c"], "failing_isend.so", ["-O2", "-Wall", "-Wextra", "-Werror"],
                    shared=True)
    if progress == "mpi" and not is_mpich():
        pytest.skip("the executor progresses inside MPI with MPICH's MPIX_Async only")
    command = launch_command(p, "env", f"LD_PRELOAD={shim}", f"A2A_TEST_FAIL_ISEND={failing_at(p)}",
                             f"A2A_EXECUTOR_PROGRESS={progress}", f"PYTHONPATH={ROOT}", sys.executable,
                             str(PROGRAMS / "executor_failing.py"), how)
    done = subprocess.run(command, env=clean_launcher_env(None), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


PERSISTENT_CASES = [(2, "persistent-wait"), (3, "persistent-wait"), (3, "persistent-test"), (3, "persistent-waitall")]
PERSISTENT_LINE = (r"a2a: rank (\d+): MPI_Start \(MPI_Alltoall_init's request\) served by liba2a \(schedule pairwise\) "
                   r"failed: MPI_Isend returned MPI error \d+")


@pytest.mark.launches
@pytest.mark.skipif(not is_mpich(), reason="liba2a serves MPI_Alltoall_init where MPICH's progress hook runs it")
@pytest.mark.parametrize("p, form", PERSISTENT_CASES)
def test_a_failed_persistent_exchange_is_an_error_of_the_programs_wait(tmp_path: Path, preload_with_shim: str,
                                                                       failing_exchange: str, p: int, form: str):
    """MPI_Alltoall_init's request (served from a communicator's second), under MPI_ERRORS_RETURN: MPI_Wait, MPI_Test
    or MPI_Waitall (and its status's MPI_ERROR) return an error after a failed exchange, a line on each rank names
    the MPI call that failed, and the same request started again exchanges every element right."""
    done = under_library(p, preload_with_shim, failing_exchange, "return", form, "3",
                         A2A_DEPLOY=str(pairwise_file(tmp_path, p)), A2A_DEPLOY_REPORT="1",
                         A2A_TEST_FAIL_ISEND=failing_at(p))
    assert done.returncode == 0 and "ok" in done.stdout.splitlines(), done.stdout + done.stderr
    from mpi4py import MPI

    classes = re.findall(rf"rank \d+: {form} returned class (\d+)(?: \(status class (\d+)\))?", done.stdout)
    want = (MPI.ERR_IN_STATUS, MPI.ERR_TRUNCATE) if form == "persistent-waitall" else (MPI.ERR_TRUNCATE, None)
    assert [(int(c), int(s) if s else None) for c, s in classes] == [want] * p, done.stdout  # docs/liba2a.md's codes
    assert re.search(rf"alltoall: seen {2 * p}, served {p} \(pairwise {p}\)", done.stderr), done.stderr
    assert sorted(re.findall(PERSISTENT_LINE, done.stderr)) == [str(r) for r in range(p)], done.stderr


@pytest.mark.launches
@pytest.mark.skipif(not is_mpich(), reason="liba2a serves MPI_Alltoall_init where MPICH's progress hook runs it")
def test_a_failed_persistent_exchange_under_errors_are_fatal_ends_the_job_with_a_line(
        tmp_path: Path, preload_with_shim: str, failing_exchange: str):
    """MPI_ERRORS_ARE_FATAL on the request's communicator: the job ends from the exchange's end, each rank's line
    said once, before any MPI_Wait returns."""
    done = under_library(3, preload_with_shim, failing_exchange, "fatal", "persistent-wait", "3",
                         A2A_DEPLOY=str(pairwise_file(tmp_path, 3)), A2A_TEST_FAIL_ISEND=failing_at(3))
    assert done.returncode != 0, done.stdout + done.stderr
    assert "returned class" not in done.stdout, done.stdout  # no rank went on past its MPI_Wait
    ranks = re.findall(PERSISTENT_LINE, done.stderr)
    assert ranks and len(ranks) == len(set(ranks)), done.stderr  # one line per failing rank, said once
