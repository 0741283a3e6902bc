"""Learning across runs: the rounds completed in a block that a run ends inside are agreed at MPI_Finalize and kept
in the learned file (A2A_LEARN_OUT), so a program that calls a size a few times a run learns over its runs; runs
too short for any round say so; and a chain of runs pays for its exploring from the calls of every run."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from support import ROOT, built_program
from test_deploy import under_library

from a2a.deploy.file import Deployment, Learned, this_library
from a2a.deploy.learn import learning
from a2a.mpi import mpi_tool

INTS = 64  # ints per peer of every call: the 256-511 B class


@pytest.fixture(scope="module")
def is_like(tmp_path_factory) -> Path:
    return built_program(tmp_path_factory, "is_like")


def controls(tmp_path: Path, arms: int, learned: list[str] | None = None, collective: str = "alltoall") -> Path:
    """A learn file for 2 ranks whose candidates are the library's own under `arms - 1` names (written as such:
    bench deploy would make identical schedules one arm), with these learned lines."""
    made = learning(["control"], [2], 0, 1, -1, this_library(), collective)
    made.learning = [(c, p, layout, low, high, (-1,) * (arms - 1)) for c, p, layout, low, high, _ in made.learning]
    made.learned = learned or []
    path = tmp_path / "learn.a2a"
    path.write_text(made.text())
    return path


def run(preload: str, program: Path, deploy: Path, out: Path, calls: int, **variables: str) -> str:
    """One run of the checked program making `calls` all-to-alls of INTS ints per peer on 2 ranks; its stderr."""
    done = under_library(2, preload, str(program), *[str(INTS)] * (calls // 2), A2A_DEPLOY=str(deploy),
                         A2A_LEARN_OUT=str(out), asleep=False, **variables)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    return done.stderr


def learned_class(path: Path) -> Learned:
    (line,) = Deployment.read(path).learned
    return Learned.parse(line)


@pytest.mark.launches
def test_rounds_completed_at_a_runs_end_are_kept_run_after_run(tmp_path: Path, preload: str, check_program: Path):
    """8 calls a run, 4 arms: 3 warm-ups, then 1 round completed and the next begun when the run ends. Each run's
    round is agreed at MPI_Finalize and kept: after run n the learned line has 3 + n rounds in every series (3 from
    the file: candidates priced 0.5x, so the pacing never waits) and 8 n more calls, all exploring. Without the
    agreement at the end no run would ever add a round, as on NPB FT."""
    line = f"alltoall 2 * 256 511 exploring 0 24 24 0 0 live:{','.join(['1e-05'] * 3)}" + " live:-0.69,-0.69,-0.69" * 3
    deploy, out = controls(tmp_path, 4, [line]), tmp_path / "learned.a2a"
    for n in range(1, 4):
        run(preload, check_program, deploy if n == 1 else out, out, 8)
        found = learned_class(out)
        assert (found.low, found.state, found.calls, found.explored) == (256, "exploring", 24 + 8 * n, 24 + 8 * n)
        assert len(found.library) == 3 + n and [len(values) for _, values in found.ratios] == [3 + n] * 3, found


@pytest.mark.launches
def test_an_is_like_exchange_learns_alltoallv_over_a_chain_of_short_runs(tmp_path: Path, preload: str, is_like: Path):
    """NPB IS makes 22 calls a run. An IS-like run of 12 iterations (an MPI_Alltoallv of the 8192-16383 B class
    each), 4 arms, from a learned line of 5 rounds (candidates priced 0.5x; cap 1: nothing paces): a probe at the
    first call, 3 warm-ups, then 2 rounds of a block of 4 completed when the run ends. The alltoallv block's rounds
    and each visit's largest block are agreed at MPI_Finalize and kept: after run n the learned alltoallv line has
    5 + 2 n rounds in every series and 12 n more calls, all exploring; every key right. Without the agreement at the
    end no run would add a round."""
    line = f"alltoallv 2 * 8192 16383 exploring 0 40 40 0 0 live:{','.join(['1e-05'] * 5)}" + \
        f" live:{','.join(['-0.69'] * 5)}" * 3
    deploy, out = controls(tmp_path, 4, [line], "alltoallv"), tmp_path / "learned.a2a"
    for n in range(1, 4):
        done = under_library(2, preload, str(is_like), "--iterations", "12", "--seed", str(n),
                             A2A_DEPLOY=str(deploy if n == 1 else out), A2A_LEARN_OUT=str(out), A2A_LEARN_CAP="1")
        assert done.returncode == 0 and "check ok" in done.stdout, done.stdout + done.stderr
        found = learned_class(out)
        assert (found.collective, found.low, found.state) == ("alltoallv", 8192, "exploring"), found
        assert (found.calls, found.explored) == (40 + 12 * n, 40 + 12 * n), found
        assert len(found.library) == 5 + 2 * n and [len(values) for _, values in found.ratios] == [5 + 2 * n] * 3, \
            found


@pytest.mark.launches
def test_a_run_too_short_for_any_round_says_so(tmp_path: Path, preload: str, check_program: Path):
    """6 calls a run, 4 arms (3 warm-ups, then 4 visits a round: 7 calls at least): one line on rank 0 says runs like
    it never learn the class, and the learned file keeps its calls and no round. With the report it is said once, on
    the class's own line of the report."""
    deploy, out = controls(tmp_path, 4), tmp_path / "learned.a2a"
    said = [line for line in run(preload, check_program, deploy, out, 6).splitlines() if "complete" in line]
    assert len(said) == 1 and "a run of 6 calls completes no round of its 4 arms" in said[0] and \
        "7 calls at least" in said[0], said
    found = learned_class(out)
    assert (found.calls, found.explored, found.library) == (6, 6, ()), found
    report = run(preload, check_program, deploy, out, 6, A2A_DEPLOY_REPORT="1")
    said = [line for line in report.splitlines() if "complete" in line]
    assert len(said) == 1 and said[0].startswith("  learn alltoall on 2 ranks, 256-511 B: 6 calls, 6 exploring") and \
        "this run's 6 calls complete no round of its 4 arms" in said[0] and "7 calls at least" in said[0], report


@pytest.mark.launches
def test_a_chain_of_runs_pays_for_its_exploring_from_the_calls_of_every_run(tmp_path: Path, preload: str,
                                                                            check_program: Path):
    """A learned line that explored 40 calls of 600 with candidates priced 1.9x the library (3 rounds each): the cost
    so far (40 visits at the candidates' mean price) and the next block's (3 x 5 visits) are paid only once the class
    has 810 calls (cap 5 %). Runs of 100 calls: the runs at 600 and 700 explore nothing, the one at 800 explores
    after its 10th call. A resumed class that forgot what its earlier runs spent would explore at once."""
    library, ratio = 1e-4, math.log(1.9)
    series = ",".join([f"{ratio:.9g}"] * 3)
    line = f"alltoall 2 * 256 511 exploring 0 600 40 0 0.0027 live:{','.join(['0.0001'] * 3)}" + \
        f" live:{series}" * 3
    deploy, out = controls(tmp_path, 4, [line]), tmp_path / "learned.a2a"
    explored = []
    for n in range(3):
        before = learned_class(deploy if n == 0 else out)
        run(preload, check_program, deploy if n == 0 else out, out, 100)
        after = learned_class(out)
        assert after.calls == before.calls + 100 and after.library[:3] == (library,) * 3, after
        explored.append(after.explored - before.explored)
    assert explored[:2] == [0, 0] and explored[2] >= 19, explored


@pytest.mark.launches
def test_the_second_communicator_of_a_size_to_learn_a_class_takes_a_quarter_share(tmp_path: Path, preload: str):
    """3 ranks, communicators {0, 1} and {0, 2}: rank 0 learns the 8-15 B class on the first before the second, the
    others each on their own. Both start from a learned line of 40 rounds (a candidate at the library's time), so each
    prints its interval's level: 5 % x 6 / pi^2 (0.03) for the first, a quarter of it (0.0076) for the second; rank 2,
    whose only communicator is the second, takes the quarter too (the largest ordinal is agreed with the times: it
    decides as rank 0 does). Every element right; both communicators freed before MPI_Finalize, the round completed
    in their last block agreed inside MPI_Comm_free and kept."""
    ratios = ",".join(["0.3", "-0.3"] * 20)
    line = f"alltoall 2 * 8 15 exploring 0 200 200 0 0 live:{','.join(['1e-05'] * 40)} live:{ratios}"
    deploy, out = controls(tmp_path, 2, [line]), tmp_path / "learned.a2a"
    done = under_library(3, preload, mpi_tool("python"), str(ROOT / "tests" / "programs" / "learn_share.py"), "20",
                         A2A_DEPLOY=str(deploy), A2A_DEPLOY_REPORT="1", A2A_LEARN_OUT=str(out), A2A_LEARN_CAP="1")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    levels = re.findall(r"control: .* at level ([0-9.e-]+)\)", done.stderr)
    assert sorted(levels) == ["0.0076", "0.03"], done.stderr
    # 20 calls (no pacing: cap 1): a warm-up, two blocks of 4 rounds, then a round completed that MPI_Comm_free agreed
    assert len(learned_class(out).library) == 40 + 9, learned_class(out)


@pytest.mark.launches
def test_alltoallv_rounds_are_kept_where_a_communicator_is_freed_and_at_the_runs_end(tmp_path: Path, preload: str):
    """The share test's communicators, {0, 1} and {0, 2} of 3 ranks, making MPI_Alltoallv (8 B a peer) 20 times
    each from a learned alltoallv line of 40 rounds: the first freed before MPI_Finalize (its last block's completed
    round agreed inside MPI_Comm_free), the second left to MPI_Finalize (agreed there, the largest blocks with the
    times). Each communicator's class keeps 9 rounds (a warm-up, two blocks of 4, a round of the block the run ends
    in), every element right, the second communicator's level a quarter of the first's (its ordinal agreed with its
    times)."""
    ratios = ",".join(["0.3", "-0.3"] * 20)
    line = f"alltoallv 2 * 8 15 exploring 0 200 200 0 0 live:{','.join(['1e-05'] * 40)} live:{ratios}"
    deploy = controls(tmp_path, 2, [line], "alltoallv")
    done = under_library(3, preload, mpi_tool("python"), str(ROOT / "tests" / "programs" / "learn_share.py"), "20",
                         "alltoallv", A2A_DEPLOY=str(deploy), A2A_DEPLOY_REPORT="1", A2A_LEARN_CAP="1")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    found = re.findall(r"control: .* over (\d+) rounds \(interval .* at level ([0-9.e-]+)\)", done.stderr)
    assert sorted(found) == [("49", "0.0076"), ("49", "0.03")], done.stderr


@pytest.mark.launches
def test_a_learn_out_the_run_did_not_learn_for_is_written_and_said(tmp_path: Path, preload: str, check_program: Path):
    """A learn file for 2 ranks (with a learned line) on 3 ranks, where no communicator is of 2: A2A_LEARN_OUT is
    written all the same, with the file's learn and learned lines, and one line on rank 0 says why nothing was
    learned."""
    line = "alltoall 2 * 256 511 exploring 0 8 8 0 0 live:1e-05 live:-0.1 live:0.1 live:0.2"
    deploy, out = controls(tmp_path, 4, [line]), tmp_path / "learned.a2a"
    done = under_library(3, preload, str(check_program), str(INTS), A2A_DEPLOY=str(deploy), A2A_LEARN_OUT=str(out))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if "A2A_LEARN_OUT" in line]
    assert len(said) == 1 and "no call of this run was in a learn range" in said[0] and \
        "it learns on communicators of 2 ranks); written again with what it had" in said[0], done.stderr
    written, read = Deployment.read(out), Deployment.read(deploy)
    assert (written.learning, written.learned) == (read.learning, read.learned)
