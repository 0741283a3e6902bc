"""Small MPI helpers shared by the driver and the tests; mpi4py is imported only when called."""
from __future__ import annotations

import os
import shutil
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

LAUNCHER_VARIABLES = ("PMI_", "PMIX_", "HYDRA_", "HYDI_", "MPI_LOCAL", "OMPI_", "I_MPI_", "MPIR_CVAR_")


def world() -> Any:
    """MPI.COMM_WORLD (initialises MPI on first use)."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


def idle_barrier(comm: Any, poll: float = 0.005) -> None:
    """Barrier that sleeps between polls, so waiting ranks leave the cores to working ones."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll)


@contextmanager
def abort_on_error(comm: Any) -> Iterator[None]:
    """Turn an exception on any one rank into the end of the whole job, with the error shown."""
    try:
        yield
    except SystemExit as done:
        if done.code in (0, None):
            raise
        abort_job(comm, f"exit {done.code}", int(done.code) if isinstance(done.code, int) else 1)
    except BaseException:
        abort_job(comm, traceback.format_exc(), 1)


# MPI_Abort tears the launcher's output pipes down at once; a moment first lets it forward the
# message (without it, about one abort in six lost its message here)
ABORT_GRACE_SECONDS = 0.3


def abort_job(comm: Any, message: str, code: int, prefix_rank: bool = True) -> None:
    """Show `message` on stderr, then end every rank of the job with exit code `code`."""
    sys.stdout.flush()
    prefix = f"[rank {comm.rank} of {comm.size}] " if comm.size > 1 and prefix_rank else ""
    sys.stderr.write("".join(prefix + line + "\n" for line in message.rstrip().splitlines()))
    sys.stderr.flush()
    if comm.size > 1:
        time.sleep(ABORT_GRACE_SECONDS)
        comm.Abort(code)
    sys.exit(code)


def mpi_tool(name: str) -> str | None:
    """An MPI program (mpiexec, mpicc) beside this Python, as an MPI wheel puts it, else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def launcher_flags(mpiexec: str) -> list[str]:
    """What `mpiexec` needs for the testbed's jobs: Open MPI refuses root and more ranks than cores unless told."""
    if not (Path(mpiexec).resolve().parent / "ompi_info").exists():
        return []
    return ["--oversubscribe", *(["--allow-run-as-root"] if os.geteuid() == 0 else [])]


def clean_launcher_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without the variables an MPI launcher set for this process."""
    env = dict(os.environ if env is None else env)
    return {k: v for k, v in env.items() if not k.startswith(LAUNCHER_VARIABLES)}
