"""Helpers for tests that start MPI programs of their own."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from a2a.mpi import clean_launcher_env, mpi_tool

ROOT = Path(__file__).resolve().parent.parent


def mpiexec_path() -> str:
    """The mpiexec beside this Python (the venv's MPI wheel), else the one on PATH."""
    found = mpi_tool("mpiexec")
    if not found:
        raise RuntimeError("no mpiexec found beside this Python or on PATH")
    return found


def mpiexec(n: int, *args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path | str = ROOT, cores: str | None = None) -> subprocess.CompletedProcess:
    """Run `mpiexec -n N python ARGS...` with a clean launcher environment; capture its output.

    `cores` ("0", "0,1") pins the job to those CPUs with taskset: ranks outnumber cores on any machine.
    """
    pinned = ["taskset", "-c", cores] if cores else []
    command = [*pinned, mpiexec_path(), "-n", str(n), sys.executable, *args]
    return subprocess.run(command, env=clean_launcher_env(env), cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def python(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
           cwd: Path | str = ROOT) -> subprocess.CompletedProcess:
    """Run `python ARGS...` as a separate (singleton MPI) process; capture its output."""
    return subprocess.run([sys.executable, *args], env=clean_launcher_env(env), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
