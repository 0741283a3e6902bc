"""Helpers for tests that start MPI programs of their own."""
from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from a2a.mpi import clean_launcher_env, launcher_flags, mpi_tool

ROOT = Path(__file__).resolve().parent.parent


@cache
def mpi_library() -> str:
    """This Python's MPI library, as MPI_Get_library_version says."""
    from mpi4py import MPI

    return MPI.Get_library_version()


def is_mpich() -> bool:
    return "MPICH" in mpi_library()


def needs_mpich(why: str) -> pytest.MarkDecorator:
    """Skip a test that only MPICH can pass, saying why (the suite also runs with Open MPI)."""
    return pytest.mark.skipif(not is_mpich(), reason=f"needs MPICH: {why}")


def launch_command(n: int, *program: str, cores: str | None = None) -> list[str]:
    """`mpiexec -n N PROGRAM...` as this MPI needs it for tests.

    Open MPI refuses more ranks than cores, and root, unless told; `cores` ("0", "0,1") pins
    the job to those CPUs with taskset, so that ranks outnumber cores on any machine.
    """
    pinned = ["taskset", "-c", cores] if cores else []
    return [*pinned, mpi_tool("mpiexec"), *launcher_flags(mpi_tool("mpiexec")), "-n", str(n), *program]


def mpiexec(n: int, *args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path | str = ROOT, cores: str | None = None) -> subprocess.CompletedProcess:
    """Run `mpiexec -n N python ARGS...` with a clean launcher environment; capture its output."""
    return subprocess.run(launch_command(n, sys.executable, *args, cores=cores), env=clean_launcher_env(env),
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


def python(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
           cwd: Path | str = ROOT) -> subprocess.CompletedProcess:
    """Run `python ARGS...` as a separate (singleton MPI) process; capture its output."""
    return subprocess.run([sys.executable, *args], env=clean_launcher_env(env), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
