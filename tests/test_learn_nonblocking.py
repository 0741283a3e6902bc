"""Once the blocking calls of a size class have chosen a candidate, liba2a serves that class's MPI_Ialltoall and
persistent MPI_Alltoall_init with the choice (where the executor progresses inside MPI: MPICH's); before, and for a
persistent request made before, they go to the library. Every element is checked and the report counts them."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support import built_program
from test_deploy import progress_hook, report_lines, under_library
from test_learn import learn_file

from a2a.deploy.file import this_library
from a2a.deploy.learn import learning

P, COUNT = 2, 3  # ranks; ints per peer: 12 B, the 8-15 B class
NONBLOCKING, STARTS = 4, 2  # rounds of two MPI_Ialltoall in flight; starts of each persistent request
FIRST = "first non-blocking call on the communicator (its private copy is being made)"
NOT_CHOSEN = "learning: a non-blocking or persistent call whose class has no choice yet"
LIBRARY_TURN = "learning: the library's own (its turn, or held)"
NO_HOOK = ("non-blocking form (the executor has no progress hook here)",
           "persistent form (the executor has no progress hook here)")


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_program(tmp_path_factory, "learn_nonblocking")


def series(values: list[float]) -> str:
    return ",".join(f"{value:.6g}" for value in values)


# 40 rounds of pairwise at about 0.67x the library's time, in an order without runs (the rounds' ranks uncorrelated)
STRONG = series([-0.4 + 0.01 * ((i * 17) % 40 - 20) for i in range(40)])
LIBRARY = series([1e-5 * (1 + 0.02 * ((i * 23) % 40)) for i in range(40)])


def run(tmp_path: Path, preload: str, program: Path, learned: str, blocking: int,
        collective: str = "alltoall") -> subprocess.CompletedProcess:
    """The program on P ranks under a learn file of pairwise at every size, with one learned line."""
    path = tmp_path / "learn.a2a"
    if collective == "alltoall":
        path = learn_file(tmp_path, ["pairwise"], [P], [learned])
    else:
        made = learning(["pairwise"], [P], 0, 1, -1, this_library(), collective)
        made.learned = [learned]
        path.write_text(made.text())
    done = under_library(P, preload, str(program), str(COUNT), str(blocking), str(NONBLOCKING), str(STARTS),
                         *(["v"] if collective == "alltoallv" else []), A2A_DEPLOY=str(path), A2A_DEPLOY_REPORT="1",
                         A2A_LEARN_REVISIT="100000000")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    return done


def counted(report: str, collective: str = "alltoall") -> tuple[dict[str, int], dict[str, int]]:
    """A collective's calls in the report: served by schedule, and passed through by reason (each reason this test
    knows, found by its words: one has a comma); every call seen is one or the other."""
    seen, by_schedule, _ = report_lines(report)[collective]
    line = next(line for line in report.splitlines() if line.strip().startswith(f"{collective}: seen"))
    reasons = {why: int(found[1]) for why in (FIRST, NOT_CHOSEN, LIBRARY_TURN, *NO_HOOK)
               if (found := re.search(re.escape(why) + r" (\d+)", line))}
    assert seen == sum(by_schedule.values()) + sum(reasons.values()), report
    return by_schedule, reasons


def after_the_choice() -> int:
    """Calls per rank made after the blocking calls: the MPI_Ialltoall, and the persistent request made then."""
    return 2 * NONBLOCKING + 1


@pytest.mark.launches
def test_a_class_that_chose_serves_its_nonblocking_and_persistent_calls(tmp_path: Path, preload: str,
                                                                        program: Path):
    """A learned line that chose pairwise at 8-15 B (no revisit in the run): every blocking call and every
    MPI_Ialltoall and MPI_Alltoall_init after the first blocking call run pairwise, counted in the report's served;
    the two calls made before any blocking call (no learner on the communicator yet) and the first (the private
    copy) go to the library, and the persistent request made then stays the library's, right at every start."""
    blocking = 4
    done = run(tmp_path, preload, program, f"alltoall {P} * 8 15 chosen 1 1000 80 0 -0.0001 live:{LIBRARY} "
               f"live:{STRONG}", blocking)
    by_schedule, reasons = counted(done.stderr)
    if not progress_hook():
        # Open MPI: MPI_Alltoall_init is intercepted only where mpi.h says MPI 4 (Open MPI 5 says 3.1)
        assert by_schedule == {"pairwise": P * blocking} and NO_HOOK[0] in reasons, done.stderr
        assert set(reasons) <= set(NO_HOOK), done.stderr
        return
    assert by_schedule == {"pairwise": P * (blocking + after_the_choice())}, done.stderr
    assert reasons == {FIRST: P, NOT_CHOSEN: 2 * P}, done.stderr


@pytest.mark.launches
def test_a_class_that_chooses_in_the_run_serves_the_calls_after_the_choice(tmp_path: Path, preload: str,
                                                                           program: Path):
    """A class still exploring, from a learned line whose 40 rounds show pairwise at 0.67x the library's: its next
    block (pairwise warmed up, 4 rounds: 9 calls) chooses pairwise whatever this run's rounds say; the non-blocking
    and persistent calls after the blocking ones are served with it, none passed as unchosen but the two before."""
    blocking = 12
    done = run(tmp_path, preload, program, f"alltoall {P} * 8 15 exploring 0 100 80 0 0.0001 live:{LIBRARY} "
               f"live:{STRONG}", blocking)
    assert re.search(r"learn alltoall on 2 ranks, 8-15 B: .* serves pairwise", done.stderr), done.stderr
    library_visits = 4  # the block's rounds visit the library once each
    by_schedule, reasons = counted(done.stderr)
    if not progress_hook():
        assert by_schedule == {"pairwise": P * (blocking - library_visits)}, done.stderr
        return
    assert by_schedule == {"pairwise": P * (blocking - library_visits + after_the_choice())}, done.stderr
    assert reasons == {FIRST: P, NOT_CHOSEN: 2 * P, LIBRARY_TURN: P * library_visits}, done.stderr


@pytest.mark.launches
def test_a_class_that_has_not_chosen_leaves_its_nonblocking_calls_to_the_library(tmp_path: Path, preload: str,
                                                                                  program: Path):
    """A class that kept the library (no candidate faster): its MPI_Ialltoall and persistent calls go to the library,
    counted as not chosen, every element right."""
    blocking = 3
    slower = STRONG.replace("-", "")
    done = run(tmp_path, preload, program, f"alltoall {P} * 8 15 kept 0 1000 80 0 0.0001 live:{LIBRARY} "
               f"dropped:{slower}", blocking)
    by_schedule, reasons = counted(done.stderr)
    assert by_schedule == {}, done.stderr
    if progress_hook():
        assert reasons == {FIRST: P, NOT_CHOSEN: P * (2 + after_the_choice()), LIBRARY_TURN: P * blocking}, done.stderr


@pytest.mark.launches
def test_an_alltoallv_class_that_chose_serves_its_nonblocking_calls(tmp_path: Path, preload: str, program: Path):
    """MPI_Alltoallv of uneven blocks (the largest 16 B: the 16-31 B class), a learned line that chose pairwise: once
    a blocking call agreed the class, every MPI_Ialltoallv runs pairwise, every element right; the two before any
    blocking call go to the library."""
    blocking = 4
    done = run(tmp_path, preload, program, f"alltoallv {P} * 16 31 chosen 1 1000 80 0 -0.0001 live:{LIBRARY} "
               f"live:{STRONG}", blocking, "alltoallv")
    by_schedule, reasons = counted(done.stderr, "alltoallv")
    if not progress_hook():
        assert by_schedule == {"pairwise": P * blocking} and set(reasons) == {NO_HOOK[0]}, done.stderr
        return
    assert by_schedule == {"pairwise": P * (blocking + 2 * NONBLOCKING)}, done.stderr
    assert reasons == {FIRST: P, NOT_CHOSEN: P}, done.stderr
