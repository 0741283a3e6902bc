"""The deploy loop's far end: bench deploy writes the schedules a decision chose, and liba2a (LD_PRELOAD) runs them
inside programs that know nothing of the testbed, passes the rest to the MPI library, and records what they
exchange."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from support import ROOT, bench_here, built_program, cleaned, launch_command, self_comm

from a2a.algos.registry import algorithms
from a2a.deploy.file import Deployment, deployment, this_library
from a2a.execute.executor import PROGRESS, executor_library
from a2a.mpi import clean_launcher_env, mpi_tool
from a2a.record.decision import write_decision

# bytes per peer the largest calls carry: far above the libraries' eager sizes, so they take the path 1 MiB takes
# (the executor has no path that depends on a block's size), at a quarter of the bytes each of p ranks moves
LARGE = 1 << 18
ALLTOALLV_DIRECT = ("pairwise", "linear", "throttled", "node_aware")  # whose alltoallv sends blocks straight


def decision(choices: list[tuple[int, str]], alltoallv: str, nprocs: list[int]) -> dict:
    """A decision table by hand: (first byte, algorithm) ranges for alltoall, one algorithm for alltoallv."""
    def ranges(starts: list[tuple[int, str]]) -> list[dict]:
        ends = [low - 1 for low, _ in starts[1:]] + [None]
        return [{"bytes_min": low, "bytes_max": end, "algorithm": name, "options": "", "cells": []}
                for (low, name), end in zip(starts, ends)]
    tables = [t for p in nprocs for t in (
        {"nprocs": p, "collective": "alltoall", "ranges": ranges(choices)},
        {"nprocs": p, "collective": "alltoallv", "ranges": ranges([(0, alltoallv)])})]
    return {"schema": "a2a-decision/1", "metric": "mean", "tables": tables, "sources": []}


def every_schedule(names: list[str]) -> tuple[list[tuple[int, str]], list[int]]:
    """Ranges that give each algorithm a small size (4 (k + 1) bytes) and one near LARGE; the ints per peer that
    call each (small first)."""
    k = len(names)
    small = [(0 if i == 0 else 4 * i + 1, name) for i, name in enumerate(names)]
    gap = [(4 * k + 1, "native")]
    large = [(LARGE - 64 * (k - i) + 1, name) for i, name in enumerate(names)] + [(LARGE + 1, "native")]
    counts = [i + 1 for i in range(k)] + [(LARGE - 64 * (k - 1 - i)) // 4 for i in range(k)]
    return small + gap + large, counts


@pytest.fixture(scope="module")
def nonblocking_program(tmp_path_factory) -> Path:
    return built_program(tmp_path_factory, "ialltoall_recv")


def progress_hook() -> bool:
    """Whether the executor progresses inside MPI here (MPICH's MPIX_Async): liba2a serves the non-blocking forms."""
    return PROGRESS[executor_library(self_comm()).a2ax_progress_mode()][0] == "mpi"


def under_library(n: int, preload: str, *program: str, asleep: bool = False,
                  **variables: str) -> subprocess.CompletedProcess:
    """Run `program` on n ranks with liba2a preloaded in the ranks only (not in mpiexec) and these variables; with
    `asleep`, ranks that outnumber the cores wait asleep (MPICH) instead of spinning: for what a job serves and gets
    right, not how fast."""
    settings = [f"{k}={v}" for k, v in {"LD_PRELOAD": preload, **variables}.items()]
    return subprocess.run(launch_command(n, "env", *settings, *program), env=cleaned(None, asleep),
                          capture_output=True, text=True, timeout=300)


def report_lines(report: str) -> dict[str, tuple[int, dict[str, int], dict[str, int]]]:
    """The report's line per collective: (calls seen, served by schedule, passed through by reason)."""
    found = {}
    for line in report.splitlines():
        said = re.match(r"\s+(alltoallv?): seen (\d+), served (\d+)(?: \((.*)\))?, passed through: (.*)$", line)
        if said:
            by_schedule = {name: int(calls) for name, calls in re.findall(r"(\S+) (\d+)", said[4] or "")}
            assert sum(by_schedule.values()) == int(said[3]), line
            # a reason is any text (commas too: "(its turn, or held)") before its count and ", " or the line's end
            reasons = {} if said[5] == "none" else {why.strip(): int(calls) for why, calls
                                                    in re.findall(r"(.+?) (\d+)(?:, |$)", said[5])}
            found[said[1]] = (int(said[2]), by_schedule, reasons)
    assert found, report
    return found


def served(report: str) -> dict[str, int]:
    """Calls served, by schedule, over both collectives."""
    total: dict[str, int] = {}
    for _, by_schedule, _ in report_lines(report).values():
        for name, calls in by_schedule.items():
            total[name] = total.get(name, 0) + calls
    return total


def passed(report: str) -> dict[str, int]:
    """Calls passed through, by reason, over both collectives."""
    total: dict[str, int] = {}
    for _, _, reasons in report_lines(report).values():
        for why, calls in reasons.items():
            total[why] = total.get(why, 0) + calls
    return total


def test_the_reports_reasons_are_parsed_whole_commas_and_all():
    """A reason with a comma in it is one reason: its words before the count, not the part after the comma."""
    line = ("  alltoall: seen 9, served 2 (pairwise 2), passed through: learning: the library's own (its turn, or "
            "held) 5, MPI_IN_PLACE 2\n  alltoallv: seen 0, served 0, passed through: none")
    assert passed(line) == {"learning: the library's own (its turn, or held)": 5, "MPI_IN_PLACE": 2}


def written(tmp_path: Path, document: dict, nprocs: list[int], ranks_per_node: int = 0) -> tuple[Path, Deployment]:
    made = deployment(document, nprocs, ranks_per_node, this_library(), ["decision by hand (tests)"])
    path = tmp_path / "deploy.a2a"
    path.write_text(made.text())
    return path, made


@pytest.mark.launches
@pytest.mark.parametrize("p", range(2, 9))
def test_every_schedule_serves_a_c_program(tmp_path: Path, preload: str, check_program: Path, p: int):
    """A deploy file that gives each alltoall algorithm two sizes (4 (k + 1) B and near 256 KiB per peer) and an
    alltoallv algorithm: a C program's MPI_Alltoall and MPI_Alltoallv get every element right, and the report says
    each call was served by the schedule chosen for it."""
    names = [a for a in algorithms("alltoall") if a not in ("native", "auto", "onesided")]
    ranges, counts = every_schedule(names)
    alltoallv = ALLTOALLV_DIRECT[p % len(ALLTOALLV_DIRECT)]
    path, made = written(tmp_path, decision(ranges, alltoallv, [p]), [p])
    assert not made.kept, made.kept
    done = under_library(p, preload, str(check_program), *map(str, counts), A2A_DEPLOY=str(path),
                         A2A_DEPLOY_REPORT="1", asleep=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    got = served(done.stderr)
    want = {name: 4 * p for name in names}  # two sizes, each called twice, on p ranks
    want[alltoallv] = want.get(alltoallv, 0) + 2 * p
    assert got == want, done.stderr
    assert passed(done.stderr) == {}, done.stderr


@pytest.mark.launches
@pytest.mark.parametrize("p", [2, 3, 4])
def test_mpi4py_calls_are_served(tmp_path: Path, preload: str, p: int):
    """mpi4py's comm.Alltoall and comm.Alltoallv (which call the large-count MPI_Alltoall_c where the library has
    it) are served, with results equal to the library's own from 1 B to 1 MiB per peer."""
    document = decision([(0, "bruck"), (65, "pairwise"), (64 * 1024 + 1, "bine")], "linear", [p])
    path, _ = written(tmp_path, document, [p])
    done = under_library(p, preload, mpi_tool("python"), str(ROOT / "tests" / "programs" / "alltoall_mpi4py.py"),
                         A2A_DEPLOY=str(path), A2A_DEPLOY_REPORT="1", asleep=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    assert served(done.stderr) == {"bruck": 2 * p, "pairwise": 2 * p, "bine": 2 * p, "linear": p}, done.stderr


@pytest.mark.launches
def test_what_the_file_does_not_cover_passes_through(tmp_path: Path, preload: str, check_program: Path):
    """A communicator of another size, an intercommunicator, a derived datatype, MPI_IN_PLACE, a size the file
    leaves to the library and one it does not cover each go to the MPI library, counted by reason, with correct
    results."""
    document = decision([(0, "pairwise"), (9, "native"), (1001, "bruck")], "pairwise", [4])
    made = deployment(document, [4], 0, this_library(), [])
    made.entries = [e for e in made.entries if e[3] != 1001]  # above 1000 B: not in the file
    path = tmp_path / "deploy.a2a"
    path.write_text(made.text())
    done = under_library(4, preload, str(check_program), "1", "100", "3000", A2A_DEPLOY=str(path),
                         A2A_DEPLOY_REPORT="1", CHECK_PASS_THROUGH="1", asleep=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    assert served(done.stderr) == {"pairwise": 4 * 2 + 4 * 2}, done.stderr  # 1 int, twice; the alltoallv, twice
    assert passed(done.stderr) == {
        "the file keeps the library's choice": 8, "size not in the file": 8, "communicator size not in the file": 4,
        "intercommunicator": 4, "derived or non-contiguous datatype": 4, "MPI_IN_PLACE": 4}, done.stderr


NO_HOOK = "non-blocking form (the executor has no progress hook here)"
FIRST = "first non-blocking call on the communicator (its private copy is being made)"


@pytest.mark.launches
@pytest.mark.parametrize("p,count,chosen", [(2, 3, "pairwise"), (3, 2000, "bine"), (4, 3, "pairwise")])
def test_nonblocking_calls_complete_while_a_rank_blocks_in_a_receive(tmp_path: Path, preload: str,
                                                                     nonblocking_program: Path, p: int, count: int,
                                                                     chosen: str):
    """The program docs/deploy.md describes: rank 0 waits for its MPI_Ialltoall (then MPI_Ialltoallv, a persistent
    MPI_Alltoall_init started with MPI_Start and MPI_Startall) and then sends to rank 1, which meanwhile blocks in
    MPI_Recv. Where the executor progresses inside MPI, liba2a serves every call but each communicator's first (its
    private copy is made then), every element is right, and an MPI_Ialltoall never tested completes while the ranks
    only probe another communicator. Elsewhere every non-blocking call passes through, counted, and all is right."""
    document = decision([(0, "pairwise"), (100, "bruck"), (4000, "bine")], "pairwise", [p])
    path, _ = written(tmp_path, document, [p])
    done = under_library(p, preload, str(nonblocking_program), str(count), "3", A2A_DEPLOY=str(path),
                         A2A_DEPLOY_REPORT="1", asleep=True)
    assert done.returncode == 0 and done.stdout.split("\n")[0] == "ok", done.stdout + done.stderr
    if not progress_hook():
        assert served(done.stderr) == {} and set(passed(done.stderr)) == {NO_HOOK}, done.stderr
        return
    calls = 3 + 1 + 3 + 3  # per rank: MPI_Ialltoall each round and once more, MPI_Ialltoallv, MPI_Alltoall_init
    want = {chosen: p * (calls - 3 - 1), "pairwise": p * 3} if chosen != "pairwise" else {chosen: p * (calls - 1)}
    assert served(done.stderr) == want and passed(done.stderr) == {FIRST: p}, done.stderr
    assert f"complete unasked: {p} of {p}" in done.stdout, done.stdout


@pytest.mark.launches
def test_nonblocking_calls_the_file_does_not_cover_pass_through(tmp_path: Path, preload: str,
                                                               nonblocking_program: Path):
    """MPI_IN_PLACE, derived datatypes (MPI_Ialltoall and MPI_Alltoall_init), a communicator of another size and an
    intercommunicator go to the library, counted by reason, with right results; persistent point-to-point requests
    pass MPI_Start, MPI_Startall and MPI_Request_free untouched."""
    p = 4
    path, _ = written(tmp_path, decision([(0, "pairwise")], "pairwise", [p]), [p])
    done = under_library(p, preload, str(nonblocking_program), "3", "1", "pass", A2A_DEPLOY=str(path),
                         A2A_DEPLOY_REPORT="1", asleep=True)
    assert done.returncode == 0 and done.stdout.split("\n")[0] == "ok", done.stdout + done.stderr
    if not progress_hook():
        assert served(done.stderr) == {} and set(passed(done.stderr)) == {NO_HOOK}, done.stderr
        return
    assert passed(done.stderr) == {"intercommunicator": p, "MPI_IN_PLACE": p, FIRST: p,
                                   "derived or non-contiguous datatype": 2 * p,
                                   "communicator size not in the file": p - 1}, done.stderr


@pytest.mark.launches
def test_exchanges_in_flight_together_on_one_communicator_keep_their_own_messages(tmp_path: Path, preload: str,
                                                                                   nonblocking_program: Path):
    """Two served MPI_Ialltoall of 12 B and 256 KiB per peer in flight at once on one communicator, completed by one
    MPI_Waitall, and two persistent requests started by one MPI_Startall: each exchange has tags of its own, so every
    element is right (with one set of tags, the rounds of one matched the other's messages: a truncation abort)."""
    p = 4
    path, _ = written(tmp_path, decision([(0, "pairwise")], "pairwise", [p]), [p])
    done = under_library(p, preload, str(nonblocking_program), "3", "1", "together", A2A_DEPLOY=str(path),
                         A2A_DEPLOY_REPORT="1", asleep=True)
    assert done.returncode == 0 and done.stdout.split("\n")[0] == "ok", done.stdout + done.stderr
    if progress_hook():
        # per rank: the MPI_Ialltoallv, the persistent request, the untested MPI_Ialltoall and the four together (the
        # first MPI_Ialltoall passes while the private copy is made)
        assert served(done.stderr) == {"pairwise": p * (1 + 1 + 1 + 4)}, done.stderr


@pytest.mark.launches
def test_a_file_that_cannot_be_used_is_refused_in_one_line(tmp_path: Path, preload: str, check_program: Path):
    """A corrupted deploy file, one of another format version and one made for another MPI library: one line on
    rank 0 at MPI_Init, and the program completes correctly with every call passed through."""
    made = deployment(decision([(0, "bruck")], "pairwise", [2]), [2], 0, this_library(), [])
    text = made.text()
    other = "Open MPI" if this_library() != "Open MPI" else "MPICH"
    files = {"altered": text.replace("entry alltoall 2 * 0 -1 0", "entry alltoall 2 * 0 -1 1"),
             "cut": text[: len(text) // 2],
             "version": text.replace("a2a-deploy 1", "a2a-deploy 9", 1),
             "library": Deployment(other, [], made.entries, made.schedules).text()}
    said = {"altered": "does not match its contents", "cut": "truncated", "version": "format version 9",
            "library": f"made for {other}; this program runs {this_library()}"}
    for name, content in files.items():
        path = tmp_path / f"{name}.a2a"
        path.write_text(content)
        done = under_library(2, preload, str(check_program), "3", A2A_DEPLOY=str(path), A2A_DEPLOY_REPORT="1",
                             asleep=True)
        assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
        refusals = [line for line in done.stderr.splitlines() if "refused" in line]
        assert len(refusals) == 1 and said[name] in refusals[0], done.stderr
        assert served(done.stderr) == {} and passed(done.stderr) == {"no deploy file": 8}, done.stderr


@pytest.mark.launches
def test_without_a_file_the_library_only_counts_and_records(tmp_path: Path, preload: str, check_program: Path):
    """No A2A_DEPLOY: every call passes through, and nothing is printed or written unless asked. A2A_RECORD writes
    what the program exchanged: its sizes, and the alltoallv's count matrix, once with the number of calls."""
    done = under_library(3, preload, str(check_program), "2", "7", asleep=True)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "ok", ""), done.stderr
    record = tmp_path / "record"
    done = under_library(3, preload, str(check_program), "2", "7", A2A_RECORD=str(record), asleep=True)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "ok", ""), done.stderr
    lines = [json.loads(line) for path in sorted(record.glob("record.*.rank*.jsonl")) for line in path.open()]
    calls = {(r["collective"], r.get("count")): r["calls"] for r in lines}
    assert calls == {("alltoall", 2): 2, ("alltoall", 7): 2, ("alltoallv", None): 2}, lines
    matrix = next(r["matrix"] for r in lines if r["collective"] == "alltoallv")
    assert matrix == [[(i + j) % 3 + 1 for j in range(3)] for i in range(3)]  # what alltoall_check.c sends
    assert all(r["nprocs"] == 3 and r["sendtype"] == "MPI_INT" and r["seconds"] > 0 for r in lines)


def test_deploy_writes_what_it_can_compile_and_says_what_it_keeps(tmp_path: Path, capsys):
    """bench deploy on a decision: a schedule per exact choice, a node-aware one for the given layout, the library's
    choice kept (and said) where the winner is not exact data; a bad --nprocs, and two decisions of one collective
    and process count, are refused in one line."""
    document = decision([(0, "onesided"), (100, "node_aware"), (1000, "native")], "tuna", [4])
    table = tmp_path / "decision.json"
    write_decision(document, table)
    out = tmp_path / "d.a2a"
    code, stdout, _ = bench_here(capsys, "deploy", str(table), "--nprocs", "4,8", "--ranks-per-node", "2",
                                 "--extrapolate", "-o", str(out))
    assert code == 0 and "unverified: 8 ranks, which the decision never measured: the table of 4 ranks" in stdout
    assert "alltoall on 8 ranks (nodes 0,0,1,1,2,2,3,3), 100..999 B per peer: node_aware" in stdout
    assert stdout.count("onesided is not exact data") == 2 and stdout.count("tuna is not exact data") == 2, stdout
    text = out.read_text()
    assert "entry alltoall 4 * 0 99 -1" in text and "entry alltoall 4 0,0,1,1 100 999 0" in text, text
    assert "unverified 8 4" in text
    code, _, stderr = bench_here(capsys, "deploy", str(table), "--nprocs", "4,x", "-o", str(out))
    assert code != 0 and "'x' is not a process count" in stderr
    code, _, stderr = bench_here(capsys, "deploy", str(table), str(table), "-o", str(out))
    assert code != 0 and "more than one table decides alltoall on 4 ranks, alltoallv on 4 ranks" in stderr, stderr


@pytest.mark.launches
def test_the_documented_loop_runs_on_the_projects_own_program(tmp_path: Path):
    """examples/deploy_loop.sh (make deploy-demo) end to end at 2 ranks: the program's calls recorded, raced (two
    algorithms of the testbed's, so that one of them wins), deployed, and every one served on the rerun, its results
    checked by the program itself."""
    done = subprocess.run(["bash", str(ROOT / "examples" / "deploy_loop.sh"), str(tmp_path / "loop")], cwd=ROOT,
                          env={**clean_launcher_env(None), "NP": "2", "ITERATIONS": "2", "RACE_ITERATIONS": "3",
                               "ALGORITHMS": "pairwise,linear",
                               "VENV": str(Path(mpi_tool("python")).parent.parent)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    after = (tmp_path / "loop" / "after.txt").read_text()
    assert after.count("check ok") == 2 and "passed through: none" in after, after
    assert served(after) and sum(served(after).values()) == 2 * (2 * 2 + 2), after  # per rank: 2 x 2 alltoall, 2 v
    assert re.search(r"^transpose: [\d.]+ -> [\d.]+ \([\d.]+x\)$", done.stdout, re.MULTILINE), done.stdout[-2000:]


@pytest.fixture(scope="module")
def program() -> str:
    from a2a.deploy.transpose_sort import transpose_sort

    return str(transpose_sort())


PROGRAM_ARGS = ("--n", "48", "--keys", "200", "--iterations", "10")
PAST_INIT = "rank 0 is past MPI_Init"
INIT_ONLY = f"from mpi4py import MPI; import sys; MPI.COMM_WORLD.Get_rank() or print({PAST_INIT!r}, file=sys.stderr)"


def said_at_init(n: int, preload: str, **variables: str) -> list[str]:
    """The a2a: lines liba2a prints before rank 0 is past MPI_Init, in a job that makes no other call: rank 0 says
    so on its stderr after them, and one rank's stream keeps its order (stdout and stderr, forwarded apart, do not)."""
    done = under_library(n, preload, mpi_tool("python"), "-c", INIT_ONLY, **variables, asleep=True)
    before = done.stderr.split(PAST_INIT, 1)[0] if PAST_INIT in done.stderr else ""
    return [line for line in before.splitlines() if line.startswith("a2a:")]


@pytest.mark.launches
def test_a_collective_the_file_lacks_is_reported_as_such(tmp_path: Path, preload: str, program: str):
    """A file for alltoall on 4 ranks, under a program that also calls MPI_Alltoallv on 4 ranks: the report's
    alltoallv line passes every call because the file has no alltoallv, not for the communicator's size."""
    made = deployment(decision([(0, "pairwise")], "pairwise", [4]), [4], 0, this_library(), [])
    made.entries = [e for e in made.entries if e[0] == "alltoall"]
    path = tmp_path / "alltoall-only.a2a"
    path.write_text(made.text())
    done = under_library(4, preload, program, *PROGRAM_ARGS, A2A_DEPLOY=str(path), A2A_DEPLOY_REPORT="1", asleep=True)
    assert done.returncode == 0 and done.stdout.count("check ok") == 2, done.stdout + done.stderr
    lines = report_lines(done.stderr)
    seen, by_schedule, reasons = lines["alltoallv"]
    assert seen > 0 and by_schedule == {} and reasons == {"the file has no entry for this collective": seen}, lines
    seen, by_schedule, reasons = lines["alltoall"]
    assert seen > 0 and by_schedule == {"pairwise": seen} and reasons == {}, lines
    assert "at MPI_Init" not in done.stderr and done.stderr.count("a2a:") == 0, done.stderr  # it serves: no warning


@pytest.mark.launches
def test_a_file_that_serves_nothing_in_this_job_says_so_at_init(tmp_path: Path, preload: str, program: str):
    """A file for 2 ranks in a 3-rank job, without the report: one line on rank 0, said at MPI_Init; the program
    runs on, every call the library's."""
    path, _ = written(tmp_path, decision([(0, "pairwise")], "pairwise", [2]), [2])
    done = under_library(3, preload, program, *PROGRAM_ARGS, A2A_DEPLOY=str(path), asleep=True)
    said = [line for line in done.stderr.splitlines() if line.startswith("a2a:")]
    assert done.returncode == 0 and done.stdout.count("check ok") == 2, done.stdout + done.stderr
    assert said == [f"a2a: A2A_DEPLOY={path} has no entry for this job's 3 ranks (it has 2): only communicators of "
                    "those sizes are served"], done.stderr
    assert said_at_init(3, preload, A2A_DEPLOY=str(path)) == said


@pytest.mark.launches
def test_a_recording_is_checked_at_init(tmp_path: Path, preload: str, program: str):
    """A2A_RECORD that cannot be written: one line on rank 0, said at MPI_Init, nothing recorded, the program runs;
    a new nested folder is made, parents and all, and recorded into."""
    done = under_library(2, preload, program, *PROGRAM_ARGS, A2A_RECORD="/proc/a2a/nowhere", asleep=True)
    said = [line for line in done.stderr.splitlines() if line.startswith("a2a:")]
    assert done.returncode == 0 and done.stdout.count("check ok") == 2, done.stdout + done.stderr
    assert len(said) == 1 and said[0].startswith("a2a: A2A_RECORD=/proc/a2a/nowhere cannot be written (") and \
        said[0].endswith("); nothing will be recorded"), done.stderr
    assert said_at_init(2, preload, A2A_RECORD="/proc/a2a/nowhere") == said
    nested = tmp_path / "rec" / "a" / "b"
    done = under_library(2, preload, program, *PROGRAM_ARGS, A2A_RECORD=str(nested), asleep=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    calls = [json.loads(line) for path in nested.glob("record.*.jsonl") for line in path.open()]
    assert {c["collective"] for c in calls} == {"alltoall", "alltoallv"}, calls
    assert [p.name for p in nested.iterdir() if p.name.startswith(".")] == []  # the probe is gone


def deploy_page_block(heading: str) -> str:
    """The first shell block under HEADING in docs/deploy.md, as a newcomer pastes it."""
    text = (ROOT / "docs" / "deploy.md").read_text().split(f"\n## {heading}", 1)[1]
    return text.split("```sh\n", 1)[1].split("```", 1)[0]


def pasted(tmp_path: Path, block: str, asleep: bool = False) -> subprocess.CompletedProcess:
    """BLOCK run by `bash -e` at a checkout's root (TMP_PATH) whose venv is this one (with `asleep`, MPICH's ranks
    that outnumber the cores wait asleep: for a block whose times nothing checks)."""
    (tmp_path / ".venv").symlink_to(Path(mpi_tool("python")).parent.parent)
    (tmp_path / "a2a").symlink_to(ROOT / "a2a")
    env = {**cleaned(None, asleep), "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"}  # Open MPI as root on 2 cores, as the page says
    return subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.mark.launches
def test_the_deploy_pages_loop_by_hand_runs_as_written(tmp_path: Path):
    """docs/deploy.md's loop by hand, pasted into a shell at a checkout's root whose venv is this one: every line
    exits 0, and on the rerun every call is served or passed for a true reason (the file keeps the library's choice
    exactly where bench deploy said it would)."""
    done = pasted(tmp_path, deploy_page_block("The loop by hand"), asleep=True)  # 4 ranks on 2 cores
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    loop = tmp_path / "results" / "loop"
    assert {"rec", "race-alltoall", "race-alltoallv", "deploy.a2a", "program"} <= {p.name for p in loop.iterdir()}
    said = done.stdout + done.stderr
    assert said.count("check ok") == 4, said[-3000:]
    kept = {c for c in ("alltoall", "alltoallv") if re.search(rf"^{c} on 4 ranks.*: the library$", said, re.M)}
    for collective, (seen, by_schedule, reasons) in report_lines(said).items():
        assert seen > 0 and sum(by_schedule.values()) + sum(reasons.values()) == seen, said[-2000:]
        assert set(reasons) <= ({"the file keeps the library's choice"} if collective in kept else set()), said
