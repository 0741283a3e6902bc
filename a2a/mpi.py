"""Small MPI helpers shared by the driver and the tests; mpi4py is imported only when called."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from a2a.errors import A2AError, HarnessError

# What launchers (MPICH's hydra, Open MPI, PMIx, MVAPICH, Intel MPI, Slurm's srun) tell each process
LAUNCHER_VARIABLES = ("PMI_", "PMIX_", "HYDRA_", "HYDI_", "MPI_LOCAL", "OMPI_", "I_MPI_", "MPIR_CVAR_")  # prefixes
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")
SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE")
TOPOLOGY_ENV = "A2A_TOPOLOGY"  # the emulated cluster's topology spec, set on every rank by `cluster run`
LOCAL_SIZE_VARIABLES = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE")


def launcher_rank() -> int:
    """This process's rank as the launcher tells it, without starting MPI (0 when alone)."""
    return next((int(os.environ[n]) for n in RANK_VARIABLES if os.environ.get(n, "").isdigit()), 0)


def launcher_size() -> int:
    """The job's size as the launcher tells it, without starting MPI (1 when alone)."""
    return next((int(os.environ[n]) for n in SIZE_VARIABLES if os.environ.get(n, "").isdigit()), 1)


def typed(name: str) -> str:
    """How to type the program `name` (python, mpirun, mpicc) of this Python's environment from the working folder:
    the bare name where PATH finds that one (an activated venv), else its path, relative where it lies below here."""
    beside = Path(sys.executable).absolute().parent / name
    if not beside.exists():
        return name
    found = shutil.which(name)
    if found and Path(found).absolute().parent == beside.parent:
        return name
    try:
        return "./" * (beside.parent == Path.cwd()) + str(beside.relative_to(Path.cwd()))
    except ValueError:
        return str(beside)


def bench_words() -> list[str]:
    """`python -m bench` as the user types it from here (see typed)."""
    return [typed("python"), "-m", "bench"]


def launch_command(n: int, args: list[str]) -> str:
    """The shell line that runs `python -m bench ARGS` on n ranks, launched as this process was: across the emulated
    cluster, by srun in a Slurm job step, else by mpirun (alone, `python -m bench ARGS`, for one rank)."""
    if TOPOLOGY_ENV in os.environ:
        return shlex.join([*bench_words(), "cluster", "run", "-n", str(n), "--", *args])
    launcher = ["srun" if "SLURM_STEP_ID" in os.environ else typed("mpirun"), "-n", str(n)] if n > 1 else []
    return shlex.join([*launcher, *bench_words(), *args])


def tune_launcher() -> str:
    """The `bench tune` option (shell text) that launches its jobs as this process was launched: '' for mpirun, its
    default."""
    if TOPOLOGY_ENV in os.environ:
        return f'--launcher "$({shlex.join(bench_words())} cluster launcher)"'
    return "--launcher srun" if "SLURM_STEP_ID" in os.environ else ""


def library_version(text: str | None = None) -> str:
    """The MPI library's version text (MPI_Get_library_version, or `text` as a record kept it), clean: Open MPI's
    ends in a NUL byte, which would reach meta.json and the printed header."""
    if text is None:
        from mpi4py import MPI

        text = MPI.Get_library_version()
    return text.replace("\0", "").strip()


def relaunched(n: int) -> str:
    """This process's own `python -m bench` command as a launch of n ranks."""
    return launch_command(n, sys.argv[1:])


def ranks_on_this_node() -> int:
    """Ranks the launcher put on this node (the most per node for srun's "4(x2),2"), 1 when it does not say."""
    for name in LOCAL_SIZE_VARIABLES:
        counts = [int(c) for c in re.findall(r"(\d+)(?:\(x\d+\))?", os.environ.get(name, ""))]
        if counts:
            return max(counts)
    return 1


def world() -> Any:
    """MPI.COMM_WORLD (initialises MPI on first use)."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


def idle_wait(request: Any, poll: float = 0.005) -> None:
    """Wait for a request asleep between polls, so that waiting ranks leave the cores to working ones."""
    while not request.Test():
        time.sleep(poll)


def idle_barrier(comm: Any, poll: float = 0.005) -> None:
    """A barrier that waits asleep (idle_wait)."""
    idle_wait(comm.Ibarrier(), poll)


@contextmanager
def abort_on_error(comm: Any) -> Iterator[None]:
    """Turn an exception on any one rank into the end of the whole job, with the error shown (an A2AError in its
    one line, exit 2; anything else with its traceback)."""
    try:
        yield
    except SystemExit as done:
        if done.code in (0, None):
            raise
        abort_job(comm, f"exit {done.code}", int(done.code) if isinstance(done.code, int) else 1)
    except A2AError as refused:  # one that names what was wrong: its line, not a traceback
        abort_job(comm, f"error: {refused}", 2)
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


def mpi_tool(name: str) -> str:
    """An MPI program (mpiexec, mpicc) beside this Python, as an MPI wheel puts it, else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise HarnessError(f"no {name} found beside {sys.executable} or on PATH; install an MPI wheel "
                           "(pip install mpich) or your MPI's development package")
    return found


def launcher_library(mpiexec: str) -> str:
    """'Open MPI' or 'MPICH' from the tools installed beside `mpiexec`; '' when neither is there."""
    directory = Path(mpiexec).resolve().parent
    for library, tool in (("Open MPI", "ompi_info"), ("MPICH", "mpichversion")):
        if (directory / tool).exists():
            return library
    return ""


def launcher_flags(mpiexec: str) -> list[str]:
    """What `mpiexec` needs for the testbed's jobs: Open MPI refuses root and more ranks than cores unless told."""
    if launcher_library(mpiexec) != "Open MPI":
        return []
    return ["--oversubscribe", *(["--allow-run-as-root"] if os.geteuid() == 0 else [])]


def clean_launcher_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without the variables an MPI launcher set for this process."""
    env = dict(os.environ if env is None else env)
    return {k: v for k, v in env.items() if not k.startswith(LAUNCHER_VARIABLES)}


def run_job(command: list[str], what: str, timeout: float = 900,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run one MPI job with a clean launcher environment (plus `env`); return it done, with its output."""
    try:
        done = subprocess.run(command, check=False, env={**clean_launcher_env(), **(env or {})},
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as late:
        raise HarnessError(f"{what} did not finish within {timeout:.0f} s: {' '.join(command)}") from late
    if done.returncode != 0:
        raise HarnessError(f"{what} failed (exit {done.returncode}): {' '.join(command)}\n"
                           f"{done.stderr.strip()}")
    return done
