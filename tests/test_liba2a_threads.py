"""liba2a under MPI_THREAD_MULTIPLE: threads calling all-to-alls at once on communicators of their own (their first
calls included, recording and learning on) get every element right, liba2a's counts and records hold every call,
and its report says what it supports at the thread level (tests/programs/threads_alltoall.c; docs/liba2a.md)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from support import ROOT
from test_deploy import under_library

from a2a.deploy.file import deployment, this_library
from a2a.deploy.learn import learning
from a2a.deploy.library import preload_library
from a2a.kept import compiled

THREADS, COMMS, ROUNDS = 4, 2, 6
RUNS = int(os.environ.get("A2A_TEST_THREAD_RUNS", "2"))  # runs per process count (docs/findings/liba2a-threads.md: 20)


@pytest.fixture(scope="module")
def threads_program() -> str:
    return str(compiled([ROOT / "tests" / "programs" / "threads_alltoall.c"], "threads_alltoall",
                        ["-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]))


def learning_file(tmp_path: Path, p: int) -> Path:
    """MPI_Alltoall learned (pairwise and bruck against the library's own), MPI_Alltoallv served by pairwise."""
    made = learning(["pairwise", "bruck"], [p], 0, 1, -1, this_library())
    ranges: list[dict[str, Any]] = [{"bytes_min": 0, "bytes_max": None, "algorithm": "pairwise", "options": "",
                                     "cells": []}]
    served = deployment({"schema": "a2a-decision/1", "metric": "mean", "sources": [],
                         "tables": [{"nprocs": p, "collective": "alltoallv", "ranges": ranges}]},
                        [p], 0, this_library(), [])
    for collective, nprocs, layout, low, high, k in served.entries:
        made.entries.append((collective, nprocs, layout, low, high, made.schedule_for(*served.schedules[k])))
    path = tmp_path / f"threads{p}.a2a"
    path.write_text(made.text())
    return path


def recorded_calls(folder: Path) -> dict[str, dict[int, int]]:
    """Per collective, the calls recorded per communicator (by its id) over the folder's records."""
    calls: dict[str, dict[int, int]] = {"alltoall": {}, "alltoallv": {}}
    for path in folder.glob("record.*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            by_comm = calls[record["collective"]]
            by_comm[record["comm"]] = by_comm.get(record["comm"], 0) + record["calls"]
    return calls


@pytest.mark.launches
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("run", range(RUNS))
def test_threads_on_communicators_of_their_own_get_every_element_and_every_count(
        tmp_path: Path, threads_program: str, p: int, run: int):
    records = tmp_path / "records"
    done = under_library(p, str(preload_library()), threads_program, str(THREADS), str(COMMS), str(ROUNDS),
                         A2A_DEPLOY=str(learning_file(tmp_path, p)), A2A_DEPLOY_REPORT="1", A2A_RECORD=str(records))
    if done.stdout.startswith("no MPI_THREAD_MULTIPLE"):
        pytest.skip(f"this MPI library gives no MPI_THREAD_MULTIPLE: {done.stdout.strip()}")
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "ok", done.stdout + done.stderr
    per_rank = THREADS * COMMS * ROUNDS
    assert done.stdout.splitlines()[0] == f"calls alltoall {per_rank} alltoallv {per_rank}", done.stdout
    assert "threads: MPI_THREAD_MULTIPLE: all-to-alls served from any thread" in done.stderr, done.stderr
    for collective in ("alltoall", "alltoallv"):
        line = re.search(rf"^  {collective}: seen (\d+), served (\d+).*passed through: (.*)$", done.stderr, re.M)
        assert line, done.stderr
        passed_on = sum(map(int, re.findall(r" (\d+)(?:,|$)", line[3])))
        assert int(line[1]) == p * per_rank and int(line[2]) + passed_on == p * per_rank, line[0]
    calls = recorded_calls(records)  # each communicator's calls, once (its rank 0 writes them)
    for collective in ("alltoall", "alltoallv"):
        assert len(calls[collective]) == THREADS * COMMS, calls
        assert set(calls[collective].values()) == {ROUNDS}, calls
    assert re.search(rf"learn alltoall on {p} ranks", done.stderr), done.stderr
