"""Learning on a program with few calls a run: tests/programs/ft_like.c (NPB FT's all-to-alls, every element checked)
under liba2a, its evidence carried from run to run through one learned file, and examples/learn_chain.sh, which
chains such runs."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support import ROOT, built_program, launch_command
from test_deploy import under_library

from a2a.deploy.file import Deployment, Learned, this_library
from a2a.deploy.learn import learning
from a2a.mpi import clean_launcher_env

CALLS, BYTES = 8, 4096  # FT's 8 calls a run, at a size a test can afford
CLASS = "2 ranks, 4096-8191 B"


@pytest.fixture(scope="module")
def ft_like(tmp_path_factory) -> Path:
    return built_program(tmp_path_factory, "ft_like")


def learn_file(folder: Path, candidates: list[str]) -> Path:
    path = folder / "learn.a2a"
    path.write_text(learning(candidates, [2], 0, 1, -1, this_library()).text())
    return path


def learned(path: Path) -> Learned:
    """The one learned line of a learned file."""
    found = [Learned.parse(line) for line in Deployment.read(path).learned]
    assert len(found) == 1, path.read_text()
    return found[0]


@pytest.mark.launches
def test_ft_like_checks_its_calls_and_refuses_a_size_it_cannot_send(ft_like: Path):
    """Without liba2a: 8 calls of 4 KiB verify and print the time; a size that is not whole elements is refused in
    one line, once, exit 2."""
    done = subprocess.run(launch_command(2, str(ft_like), str(CALLS), f"{BYTES}"), env=clean_launcher_env(None),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.fullmatch(r"ft_like: 8 calls of 4096 B per peer on 2 ranks: time [\d.]+ s, alltoall [\d.]+ s, ok\n",
                        done.stdout), done.stdout
    done = subprocess.run(launch_command(2, str(ft_like), "8", "100"), env=clean_launcher_env(None),
                          capture_output=True, text=True, timeout=120)
    said = [line for line in done.stderr.splitlines() if line.startswith("ft_like:")]
    assert done.returncode == 2 and len(said) == 1 and "BYTES 100: accepted:" in said[0], done.stderr


@pytest.mark.launches
def test_a_chain_of_short_runs_keeps_every_completed_round(tmp_path: Path, ft_like: Path, preload: str):
    """Two runs of 8 calls, one candidate: every element right, the first run serves the candidate, and the learned
    file after each run holds the calls of every run so far and every round the run completed: with 2 arms a run's
    first exploring visit warms the candidate up and each 2 after it are a round, so a run that explored k calls
    adds (k - 1) // 2 rounds (3 where it explored all 8; fewer where pacing held the class after its first block).
    A run that dropped the rounds of the block it ended inside keeps only its first block's 2."""
    out, rounds, explored = tmp_path / "learned.a2a", 0, 0
    source = learn_file(tmp_path, ["pairwise"])
    for run in (1, 2):
        done = under_library(2, preload, str(ft_like), str(CALLS), str(BYTES), A2A_DEPLOY=str(source),
                             A2A_LEARN_OUT=str(out), A2A_DEPLOY_REPORT="1")
        assert done.returncode == 0 and done.stdout.rstrip().endswith(", ok"), done.stdout + done.stderr
        assert run == 2 or re.search(r"served \d+ \(pairwise [1-9]\d*\)", done.stderr), done.stderr
        found = learned(out)
        assert found.calls == CALLS * run and len(found.library) == len(found.ratios[0][1]), out.read_text()
        rounds += max(0, found.explored - explored - 1) // 2
        explored = found.explored
        assert len(found.library) == rounds >= 2, out.read_text()
        source = out


@pytest.mark.launches
def test_learn_chain_prints_each_runs_time_and_what_it_learned(tmp_path: Path, ft_like: Path):
    """examples/learn_chain.sh, 3 runs: per run the program's line and the class's learn line (8 calls, the run's), and
    the learned file counts 24 (each run read the learned file the one before it wrote)."""
    source, out = learn_file(tmp_path, ["pairwise"]), tmp_path / "learned.a2a"
    done = subprocess.run(["bash", str(ROOT / "examples" / "learn_chain.sh"), str(source), str(out), "3", "2",
                           str(ft_like), str(CALLS), str(BYTES)], cwd=ROOT, env=clean_launcher_env(None),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.findall(r"^run (\d) \(A2A_DEPLOY=(\S+)\):", done.stdout, re.M) == [
        ("1", "learn.a2a"), ("2", "learned.a2a"), ("3", "learned.a2a")], done.stdout
    assert len(re.findall(r"^  ft_like: .* time [\d.]+ s, alltoall [\d.]+ s, ok$", done.stdout, re.M)) == 3
    calls = re.findall(rf"^  learn alltoall on {CLASS}: (\d+) calls", done.stdout, re.M)
    assert calls == ["8", "8", "8"], done.stdout
    assert learned(out).calls == 24


def test_learn_chain_refuses_what_it_cannot_run(tmp_path: Path):
    """A learn file that does not exist: the usage line, exit 2, nothing launched."""
    done = subprocess.run(["bash", str(ROOT / "examples" / "learn_chain.sh"), str(tmp_path / "none.a2a"),
                           str(tmp_path / "out.a2a"), "3", "2", "true"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("usage: examples/learn_chain.sh"), done.stderr
