"""The project's own all-to-all program (a transpose and a sample sort) builds clean, is kept, passes its own check
at 2 and 3 ranks, and its check catches a planted wrong value; the build rule it shares with the executor."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from support import launch_command

from a2a.deploy.transpose_sort import FLAGS, SOURCE, phase_times, transpose_sort
from a2a.errors import BadConfig, HarnessError
from a2a.kept import cache_home, compiled, compiled_path
from a2a.mpi import clean_launcher_env


def run(n: int, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(launch_command(n, str(transpose_sort()), *options), env=clean_launcher_env(None),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.launches
def test_it_compiles_without_a_warning_and_is_kept():
    """-Wall -Wextra -Werror compiles it; a second build returns the kept program untouched; other flags keep
    another."""
    strict = compiled([SOURCE], "transpose_sort", [*FLAGS, "-Werror"])
    made = strict.stat().st_mtime_ns
    assert compiled([SOURCE], "transpose_sort", [*FLAGS, "-Werror"]) == strict and strict.stat().st_mtime_ns == made
    assert transpose_sort() == compiled_path([SOURCE], "transpose_sort", FLAGS) != strict


@pytest.mark.launches
@pytest.mark.parametrize("n", [2, 3])
def test_it_passes_its_own_check(n: int):
    """Both phases print a time and 'check ok', the sort with uneven counts (skew), the transpose at N = 12 x p."""
    done = run(n, "--n", str(12 * n), "--keys", "300", "--skew", "2", "--iterations", "3", "--seed", "7")
    assert done.returncode == 0, done.stdout + done.stderr
    times = phase_times(done.stdout)
    assert set(times) == {"transpose", "sample sort"} and all(0 < part <= whole for whole, part in times.values())
    assert f"N={12 * n} on {n} ranks, {8 * 12 * 12} B per peer" in done.stdout


@pytest.mark.launches
@pytest.mark.parametrize("phase, said", [("transpose", "element (11, 11) of the transpose is 144, expected 143"),
                                         ("sort", "the keys' hash differs")])
def test_a_planted_wrong_value_is_caught(phase: str, said: str):
    """--break changes one value after the exchange: the check names it, every rank exits 1, no time is printed."""
    done = run(2, "--n", "12", "--keys", "100", "--iterations", "2", "--break", phase)
    assert done.returncode == 1 and said in done.stderr, done.stdout + done.stderr
    with pytest.raises(HarnessError, match="transpose" if phase == "transpose" else "sample sort"):
        phase_times(done.stdout)


@pytest.mark.launches
def test_bad_arguments_are_refused_once():
    done = run(2, "--n", "13")
    said = [line for line in done.stderr.splitlines() if "accepted" in line]
    assert done.returncode == 2 and len(said) == 1 and "--n 13" in said[0] and "multiple of the 2 ranks" in said[0]


def test_a_compiler_that_fails_says_why(tmp_path: Path, monkeypatch):
    """A source that does not compile raises HarnessError with the compiler's message; nothing is kept."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    broken = tmp_path / "broken.c"
    broken.write_text("int main(void) { return missing; }\n")
    with pytest.raises(HarnessError, match="missing"):
        compiled([broken], "broken", FLAGS)
    assert not compiled_path([broken], "broken", FLAGS).exists()


@pytest.mark.launches
def test_a_kept_program_is_this_users_alone_and_one_another_could_write_is_refused(tmp_path: Path, monkeypatch):
    """Built under a fresh cache with a umask that leaves group write on, the program and every directory down to it
    are 0700; made group-writable afterwards, it is refused (BadConfig naming it), not returned to be run."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    old = os.umask(0o002)
    try:
        program = transpose_sort()
    finally:
        os.umask(old)
    for path in (program, program.parent, program.parent.parent, cache_home()):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    program.chmod(0o770)
    with pytest.raises(BadConfig, match=f"{program} is writable by its group or others"):
        transpose_sort()
