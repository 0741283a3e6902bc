"""The package as a user installs it (not `-e`): its wheel and sdist hold every file it reads from its own tree, and a
fresh venv with the wheel and `[mpich]` installed runs, outside the checkout, an executor=c exchange, `bench run` and
`bench deploy --library`, writing nothing inside the installed package. About 20 s here (copy, wheel and sdist 5 s,
venv and install from pip's index or cache 8 s, three launches and two compiles 6 s)."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from support import ROOT, cleaned, is_mpich

from a2a.mpi import launcher_flags
from a2a.record.results import read_rows

pytestmark = [pytest.mark.launches,
              pytest.mark.skipif(not is_mpich(), reason="checked once, in the suite's run with MPICH: the fresh venv "
                                                        "installs the [mpich] extra whichever MPI the suite runs")]

EXCHANGE = '''
import sys

import numpy as np
from mpi4py import MPI

import a2a

comm = MPI.COMM_WORLD
p, r = comm.size, comm.rank
send = np.arange(3 * p, dtype=np.int64) + 1000 * r
recv = np.full_like(send, -1)
with a2a.get("pairwise").plan(comm, send, recv, executor="c") as plan:
    plan()
    want = np.concatenate([np.arange(3) + 3 * r + 1000 * q for q in range(p)])
    print(f"rank {r}: executor={plan.executor} right={np.array_equal(recv, want)} from={a2a.__file__} "
          f"checkout_on_path={any(path.startswith(sys.argv[1]) for path in sys.path)}", flush=True)
'''


class Installed:
    """A fresh venv with the package's wheel installed, and where its build put the wheel and the sdist."""

    def __init__(self, root: Path):
        self.root, self.venv, self.dist = root, root / "venv", root / "dist"
        self.bin = self.venv / "bin"
        self.env = {k: v for k, v in cleaned(None, asleep=True).items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.env["XDG_CACHE_HOME"] = str(root / "cache")  # its own compiles, none of this user's kept ones
        self.away = root / "elsewhere"  # the directory it runs in: outside the checkout
        self.away.mkdir()
        self.before: set[str] = set()  # the installed package's files, once installed

    def wheel(self) -> Path:
        return next(self.dist.glob("*.whl"))

    @property
    def package(self) -> Path:
        return next((self.venv / "lib").glob("python*/site-packages/a2a"))

    def files(self) -> set[str]:
        """Every file of the installed package, relative to it."""
        return {str(p.relative_to(self.package)) for p in self.package.rglob("*") if p.is_file()}

    def run(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(command, cwd=self.away, env=self.env, capture_output=True, text=True, timeout=timeout)

    def mpirun(self, n: int, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        launcher = str(self.bin / "mpirun")
        return self.run(launcher, *launcher_flags(launcher), "-n", str(n), str(self.bin / "python"), *args,
                        timeout=timeout)


def listed() -> list[str]:
    """The checkout's files as git lists them (tracked, and untracked but not ignored): what a clone would hold."""
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.skip(f"{ROOT} is not a git checkout, so what a clone holds is not known: {done.stderr.strip()}")
    return [name for name in done.stdout.split("\0") if name and (ROOT / name).is_file()]


def read_by_the_package(names: list[str]) -> set[str]:
    """The files of the packages that are not Python: what the package reads or compiles from its own tree."""
    return {name for name in names if name.split("/")[0] in ("a2a", "bench") and not name.endswith(".py")}


def pip(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """The checkout copied as a clone would hold it, built into a wheel and an sdist, the wheel installed with
    [mpich] into a fresh venv (pip's cache reused; skipped, saying so, where no package index can be reached)."""
    made = Installed(tmp_path_factory.mktemp("installed"))
    source = made.root / "checkout"
    for name in listed():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    wheel = pip("wheel", "--no-deps", "--quiet", "--wheel-dir", str(made.dist), str(source))
    assert wheel.returncode == 0, wheel.stderr
    if importlib.util.find_spec("build"):
        sdist = [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(made.dist), str(source)]
    else:  # the build backend pyproject.toml names, called as `build` would
        sdist = [sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(made.dist)!r})"]
    built = subprocess.run(sdist, cwd=source, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(made.venv)], check=True)
    # the dependencies' bytecode is left to their first import (pip compiles all of numpy, most of it never imported
    # here); the package's own is compiled below, as pip compiles it, so that a run that writes there is still seen
    install = pip("--python", str(made.bin / "python"), "install", "--quiet", "--no-compile", f"{made.wheel()}[mpich]")
    if install.returncode:
        probe = pip("download", "--no-deps", "--dest", str(made.root / "probe"), "mpich", timeout=120)
        if probe.returncode:
            pytest.skip(f"pip reaches no package index with mpich here (offline?), so no fresh venv can be made: "
                        f"{probe.stderr.strip()[-300:]}")
        pytest.fail(f"the wheel does not install with [mpich]: {install.stderr.strip()[-2000:]}")
    subprocess.run([made.bin / "python", "-m", "compileall", "-q", made.package, made.package.parent / "bench"],
                   check=True, capture_output=True)
    made.before = made.files()
    return made


def test_the_wheel_and_the_sdist_hold_every_file_the_package_reads_from_its_tree(installed):
    names = listed()
    wanted = read_by_the_package(names)
    assert {"a2a/execute/c/executor.c", "a2a/execute/c/executor.h", "a2a/deploy/c/liba2a_serve.c",
            "a2a/deploy/c/liba2a_internal.h"} <= wanted
    in_wheel = set(zipfile.ZipFile(installed.wheel()).namelist())
    with tarfile.open(next(installed.dist.glob("*.tar.gz"))) as sdist:
        in_sdist = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert wanted - in_wheel == set(), "package data the wheel leaves out (setup.cfg's [options.package_data])"
    assert wanted - in_sdist == set(), "package data the sdist leaves out"
    assert {"setup.cfg", "pyproject.toml", "README.md"} <= in_sdist


def test_an_installed_package_exchanges_in_c_outside_the_checkout(installed):
    done = installed.mpirun(2, "-c", EXCHANGE, str(ROOT))
    assert done.returncode == 0, done.stderr
    said = sorted(re.findall(r"rank (\d): (.*?checkout_on_path=(?:True|False))", done.stdout))  # lines may meet
    want = f"executor=c right=True from={installed.package}/__init__.py checkout_on_path=False"
    assert said == [("0", want), ("1", want)], done.stdout
    assert installed.files() == installed.before, "a run wrote inside the installed package"


def test_bench_run_from_an_installed_package_measures_every_point(installed):
    out = installed.root / "record"
    done = installed.mpirun(2, "-m", "bench", "run", "--sizes", "8,64K", "--iterations", "3", "--quiet",
                            "--output", str(out))
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert rows and all(row.valid for row in rows), [row.note for row in rows if not row.valid]
    assert {row.bytes_per_peer for row in rows} == {8, 65536}
    assert installed.files() == installed.before, "a run wrote inside the installed package"


def test_bench_deploy_library_from_an_installed_package_builds_liba2a(installed):
    done = installed.run(str(installed.bin / "python"), "-m", "bench", "deploy", "--library")
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip().splitlines()[-1])
    assert path.name == "liba2a.so" and path.is_file(), done.stdout
    assert Path(installed.env["XDG_CACHE_HOME"]) in path.parents
    assert os.access(path, os.X_OK)
    assert installed.files() == installed.before, "a build wrote inside the installed package"
