"""liba2a learns MPI_Alltoallv: `learn alltoallv` lines (bench deploy --learn --collective alltoallv|both), the class
of each call agreed by the ranks at block ends (liba2a_learnv.c), the IS-like exchange and the sample sort served by
candidates with every element checked, and what was learned written and read back."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support import bench_here, built_program, launch_command
from test_deploy import report_lines, under_library

from a2a.deploy.file import Deployment, Learned, this_library
from a2a.deploy.learn import DEFAULT_CANDIDATES_V, learning
from a2a.deploy.transpose_sort import transpose_sort
from a2a.errors import BadInput
from a2a.mpi import clean_launcher_env

CANDIDATES = ["linear", "pairwise", "throttled"]
SERVING = {"linear", "pairwise"}  # the arms CANDIDATES are on 2 ranks: throttled's exchange is linear's there


@pytest.fixture(scope="module")
def is_like(tmp_path_factory) -> str:
    return str(built_program(tmp_path_factory, "is_like"))


def learn_file(tmp_path: Path, candidates: list[str], learned: tuple[str, ...] = ()) -> Path:
    made = learning(candidates, [2], 0, 1, -1, this_library(), "alltoallv")
    made.learned = list(learned)
    path = tmp_path / "learn.a2a"
    path.write_text(made.text())
    return path


def alltoallv_classes(stderr: str) -> dict[str, str]:
    """The report's alltoallv learn lines by size class ('8192-16383 B')."""
    return {m[1]: m[2] for m in re.finditer(r"learn alltoallv on 2 ranks, (\S+ B): (.*)", stderr)}


def agreement(stderr: str) -> tuple[int, int, int]:
    """The report's alltoallv agreement line: (agreements, of them probes, rounds set aside)."""
    found = re.search(r"learn alltoallv on \d+ ranks: the class .* agreed (\d+) times, (\d+) of them by a probe of its "
                      r"own; (\d+) rounds? set aside", stderr)
    assert found, stderr
    return int(found[1]), int(found[2]), int(found[3])


def test_a_learn_file_for_alltoallv_takes_its_own_candidates():
    """Learn lines for MPI_Alltoallv name alltoallv schedules (on 2 ranks, names whose exchange is one are one arm:
    throttled is linear there); a name whose alltoallv forwards blocks (bruck) is refused naming the collective; a
    name given twice runs as one arm."""
    made = learning(CANDIDATES, [2, 4], 0, 1, -1, "MPICH", "alltoallv")
    assert [(c, p, len(k)) for c, p, _, _, _, k in made.learning] == [("alltoallv", 2, 2), ("alltoallv", 4, 3)]
    with pytest.raises(BadInput, match="its alltoallv on 4 ranks is not exact data"):
        learning(["bruck"], [4], 0, 1, -1, "MPICH", "alltoallv")
    made = learning(["pairwise", "linear", "pairwise"], [2], 0, 1, -1, "MPICH", "alltoallv")
    assert len(made.learning[0][5]) == 2 and len(set(made.learning[0][5])) == 2


def test_bench_deploy_learn_collective_both_writes_each_collectives_defaults(tmp_path: Path, capsys):
    """--collective both: a learn line per collective and count, each with its own default candidates, said in the
    output (on 2 ranks each collective's defaults are two exchanges: two arms, the names that share one said); a
    repeated name is said to run as one arm; alltoall stays the default."""
    path = tmp_path / "learn.a2a"
    code, out, _ = bench_here(capsys, "deploy", "--learn", "--collective", "both", "--nprocs", "2", "-o", str(path))
    assert code == 0 and "2 learn lines" in out, out
    lines = Deployment.read(path).learning
    assert [(c, len(k)) for c, _, _, _, _, k in lines] == [("alltoall", 2), ("alltoallv", 2)]
    assert f"alltoallv on 2 ranks: {' and '.join(DEFAULT_CANDIDATES_V[i] for i in (0, 2, 3))} are one schedule " \
           f"there: one arm ({DEFAULT_CANDIDATES_V[0]})" in out, out
    assert f"learns MPI_Alltoallv at 1.. B per peer on 2 ranks among the library's own and " \
           f"{', '.join(DEFAULT_CANDIDATES_V)}" in out, out
    code, out, _ = bench_here(capsys, "deploy", "--learn", "--collective", "alltoallv", "--candidates",
                              "linear,pairwise,linear", "--nprocs", "2", "-o", str(path))
    assert code == 0 and "alltoallv on 2 ranks: linear and linear are one schedule there: one arm (linear)" in out
    code, out, _ = bench_here(capsys, "deploy", "--learn", "--nprocs", "2", "-o", str(path))
    assert code == 0 and [c for c, *_ in Deployment.read(path).learning] == ["alltoall"], out


@pytest.mark.launches
def test_the_is_like_exchange_is_served_by_candidates_and_every_key_is_right(tmp_path: Path, preload: str,
                                                                            is_like: str):
    """NPB IS's key exchange (bucket sizes by MPI_Alltoall, keys by MPI_Alltoallv), 60 iterations under an alltoallv
    learn file: every key checked, candidates serve alltoallv calls (the report counts them), one class learned,
    agreed at block ends with no round set aside; the learned line reads back, and a run from it goes on from its
    evidence."""
    path, out = learn_file(tmp_path, CANDIDATES), tmp_path / "learned.a2a"
    done = under_library(2, preload, is_like, "--iterations", "60", A2A_DEPLOY=str(path), A2A_DEPLOY_REPORT="1",
                         A2A_LEARN_OUT=str(out))
    assert done.returncode == 0 and "check ok" in done.stdout, done.stdout + done.stderr
    seen, by_schedule, _ = report_lines(done.stderr)["alltoallv"]
    assert seen == 120 and set(by_schedule) == SERVING and sum(by_schedule.values()) > 0, done.stderr
    classes = alltoallv_classes(done.stderr)
    assert list(classes) == ["8192-16383 B"] and classes["8192-16383 B"].startswith("60 calls"), done.stderr
    agreements, probes, aside = agreement(done.stderr)
    assert probes == 1 and agreements > 1 and aside == 0, done.stderr
    found = [Learned.parse(line) for line in Deployment.read(out).learned]
    assert [(k.collective, k.low, k.calls) for k in found] == [("alltoallv", 8192, 60)]
    again = under_library(2, preload, is_like, "--iterations", "20", A2A_DEPLOY=str(out), A2A_DEPLOY_REPORT="1")
    assert again.returncode == 0 and "check ok" in again.stdout, again.stdout + again.stderr
    assert "20 calls" in alltoallv_classes(again.stderr)["8192-16383 B"] and \
        "(this run; the file's evidence before it)" in again.stderr, again.stderr


@pytest.mark.launches
def test_sizes_that_change_are_learned_apart_and_mixed_rounds_set_aside(tmp_path: Path, preload: str, is_like: str):
    """The exchange's size changes every 7 iterations (4096 then 1024 keys a rank: two classes): every key right,
    both classes learned, and the rounds that straddle a change set aside on every rank alike (no hang, no wrong
    key)."""
    path = learn_file(tmp_path, CANDIDATES)
    done = under_library(2, preload, is_like, "--iterations", "84", "--vary", "7", A2A_DEPLOY=str(path),
                         A2A_DEPLOY_REPORT="1")
    assert done.returncode == 0 and "check ok" in done.stdout, done.stdout + done.stderr
    assert set(alltoallv_classes(done.stderr)) == {"2048-4095 B", "8192-16383 B"}, done.stderr
    assert agreement(done.stderr)[2] > 0, done.stderr


@pytest.mark.launches
def test_a_chosen_alltoallv_class_serves_its_choice_without_exploring(tmp_path: Path, preload: str, is_like: str):
    """A learned line that settled the class on pairwise: the next run serves pairwise at every call of the class,
    exploring none (revisits set beyond the run), every key right."""
    evidence, library = ",".join(["-0.4"] * 20), ",".join(["1e-05"] * 20)
    learned = (f"alltoallv 2 * 8192 16383 chosen 2 1000 80 0 -0.0001 live:{library} dropped:{evidence} "
               f"live:{evidence}",)  # the arms of CANDIDATES on 2 ranks: linear, pairwise
    path = learn_file(tmp_path, CANDIDATES, learned)
    done = under_library(2, preload, is_like, "--iterations", "30", A2A_DEPLOY=str(path), A2A_DEPLOY_REPORT="1",
                         A2A_LEARN_REVISIT="100000000")
    assert done.returncode == 0 and "check ok" in done.stdout, done.stdout + done.stderr
    assert re.match(r"30 calls, 0 exploring, 0 revisiting .* serves pairwise",
                    alltoallv_classes(done.stderr)["8192-16383 B"]), done.stderr
    assert report_lines(done.stderr)["alltoallv"][1] == {"pairwise": 60}, done.stderr


@pytest.mark.launches
def test_the_sample_sort_is_served_by_alltoallv_candidates_and_checks(tmp_path: Path, preload: str):
    """The project's sample sort (transpose_sort.c: splitters, bucket counts by MPI_Alltoall, keys by
    MPI_Alltoallv), learning alltoallv: its check passes and candidates serve alltoallv calls."""
    path = learn_file(tmp_path, CANDIDATES)
    done = under_library(2, preload, str(transpose_sort()), "--iterations", "40", "--keys", "3000",
                         A2A_DEPLOY=str(path), A2A_DEPLOY_REPORT="1")
    assert done.returncode == 0 and done.stdout.count("check ok") == 2, done.stdout + done.stderr
    seen, by_schedule, _ = report_lines(done.stderr)["alltoallv"]
    assert seen == 80 and sum(by_schedule.values()) > 0, done.stderr


@pytest.mark.launches
def test_the_is_like_check_catches_a_wrong_key(is_like: str):
    """The program's own check is real: one received key changed on one rank fails the run (exit 1) naming it."""
    done = subprocess.run(launch_command(2, is_like, "--iterations", "2", "--break"), env=clean_launcher_env(None),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "is_like: WRONG on rank 1, iteration 1" in done.stderr, done.stderr


@pytest.mark.launches
def test_a_learn_line_of_another_collective_is_refused_in_one_line(tmp_path: Path, preload: str, is_like: str):
    """A learn line for a collective liba2a does not learn: refused at MPI_Init in one line on rank 0 naming what is
    accepted; the program runs on the library and checks."""
    path = learn_file(tmp_path, CANDIDATES)
    made = Deployment.read(path)
    made.learning = [("alltoallw", *made.learning[0][1:])]
    path.write_text(made.text())
    done = under_library(2, preload, is_like, "--iterations", "3", A2A_DEPLOY=str(path))
    said = [line for line in done.stderr.splitlines() if line.startswith("a2a:")]
    assert done.returncode == 0 and "check ok" in done.stdout and len(said) == 1, done.stdout + done.stderr
    assert "a learn line is 'learn alltoall|alltoallv NPROCS LAYOUT LOW HIGH CANDIDATE,...'" in said[0], said


@pytest.mark.launches
def test_a_size_change_under_a_choice_is_met_within_a_probe(tmp_path: Path, preload: str, is_like: str):
    """A class settled on pairwise (revisits beyond the run), then the exchange shrinks to another class after 150
    calls: a probe agrees the new class within 128 calls, so the settled class serves at most 128 of the new size's
    calls, and every key is right."""
    evidence, library = ",".join(["-0.4"] * 20), ",".join(["1e-05"] * 20)
    learned = (f"alltoallv 2 * 8192 16383 chosen 2 1000 80 0 -0.0001 live:{library} dropped:{evidence} "
               f"live:{evidence}",)  # the arms of CANDIDATES on 2 ranks: linear, pairwise
    path = learn_file(tmp_path, CANDIDATES, learned)
    done = under_library(2, preload, is_like, "--iterations", "300", "--vary", "150", A2A_DEPLOY=str(path),
                         A2A_DEPLOY_REPORT="1", A2A_LEARN_REVISIT="100000000")
    assert done.returncode == 0 and "check ok" in done.stdout, done.stdout + done.stderr
    classes = alltoallv_classes(done.stderr)
    settled = int(classes["8192-16383 B"].split()[0])
    assert 150 <= settled <= 150 + 128 and "2048-4095 B" in classes, done.stderr
    assert agreement(done.stderr)[1] >= 2, done.stderr
