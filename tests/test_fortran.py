"""Fortran programs under liba2a: their MPI_ALLTOALL and MPI_ALLTOALLV recorded and served, every element right, with
Debian's Open MPI (whose Fortran library calls PMPI_* itself, past liba2a's C functions) and Debian's MPICH (whose
Fortran library calls MPI_*), through `use mpi` and `use mpi_f08`; liba2a built by each library's own mpicc."""
from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support import ROOT, debian_launch, debian_libraries, debian_tool, needs_debian_mpi
from test_deploy import decision, passed, report_lines, served
from test_deploy_library import page_block

from a2a.deploy.file import Deployment, deployment
from a2a.deploy.library import preload_library
from a2a.kept import cache_home
from a2a.mpi import clean_launcher_env

PROGRAM = ROOT / "tests" / "programs" / "alltoall_check.f90"
P = 3
# a venv whose mpi4py runs on Debian's Open MPI, as .ci/setup.d/debian-mpi.sh makes it
OPEN_MPI_VENV = Path(os.environ.get("A2A_DEBIAN_VENVS") or Path.home() / ".cache" / "a2a") / "debian-openmpi"


def fortran_program(library: str, binding: str, folder: Path) -> Path:
    """tests/programs/alltoall_check.f90 built by the library's mpif90, with `use mpi` or `use mpi_f08`, named for
    both (alltoall_check_mpi.openmpi)."""
    compiler = debian_tool(library, "mpif90")
    program = folder / f"alltoall_check_{binding}{Path(compiler).suffix}"
    subprocess.run([compiler, "-O2", "-cpp", *(["-DF08"] if binding == "mpi_f08" else []),
                    "-o", str(program), str(PROGRAM)], check=True, capture_output=True, cwd=folder)
    return program


@pytest.fixture(scope="module")
def fortran_programs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """fortran_program(library, binding), each built once for the file's tests (the build costs more than a run)."""
    folder = tmp_path_factory.mktemp("fortran")
    built: dict[tuple[str, str], Path] = {}

    def program(library: str, binding: str) -> Path:
        if (library, binding) not in built:
            built[library, binding] = fortran_program(library, binding, folder)
        return built[library, binding]
    return program


def under(library: str, preload: Path, *program: str, **variables: str) -> subprocess.CompletedProcess:
    """The program on P ranks of Debian's `library`, liba2a preloaded in the ranks with these variables."""
    settings = [f"{k}={v}" for k, v in {"LD_PRELOAD": str(preload), **variables}.items()]
    return subprocess.run(debian_launch(library, P, "env", *settings, *program), env=clean_launcher_env(None),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.launches
@pytest.mark.parametrize("binding", ["mpi", "mpi_f08"])
@pytest.mark.parametrize("library", debian_libraries())
def test_a_fortran_programs_calls_are_recorded_and_served(tmp_path: Path, fortran_programs: Callable[[str, str], Path],
                                                          library: str, binding: str):
    """MPI_ALLTOALL at 2 and 1000 integers per peer (pairwise and bruck by the file), MPI_ALLTOALLV (linear) and an
    in-place MPI_ALLTOALL (passed through: Fortran's MPI_IN_PLACE told as C's): every call recorded, every one the
    file covers served, every element and error argument right, and the report says MPI_Init came through Fortran.
    Without liba2a's Fortran entry points, Open MPI's program is neither recorded nor reported."""
    made = deployment(decision([(0, "pairwise"), (100, "bruck")], "linear", [P]), [P], 0, library, ["tests"])
    (tmp_path / "deploy.a2a").write_text(made.text())
    program = fortran_programs(library, binding)
    preload = preload_library(debian_tool(library, "mpicc"))
    record = tmp_path / "record"
    done = under(library, preload, str(program), "2", "1000", A2A_DEPLOY=str(tmp_path / "deploy.a2a"),
                 A2A_DEPLOY_REPORT="1", A2A_RECORD=str(record))
    said = done.stdout + done.stderr
    assert done.returncode == 0 and done.stdout.strip() == "ok", said
    assert "MPI_Init through Fortran" in done.stderr, said
    assert served(done.stderr) == {"pairwise": P, "bruck": P, "linear": 2 * P}, said
    assert passed(done.stderr) == {"MPI_IN_PLACE": P}, said
    lines = [json.loads(line) for path in record.glob("record.*.jsonl") for line in path.open()]
    calls = sorted((r["collective"], r.get("count", 0), r["calls"]) for r in lines)  # an alltoallv: a line per matrix
    assert calls == [("alltoall", 2, 1), ("alltoall", 3, 1), ("alltoall", 1000, 1), ("alltoallv", 0, 1),
                     ("alltoallv", 0, 1)], lines
    assert {r["sendtype"] for r in lines} == {"MPI_INTEGER"} and {r["nprocs"] for r in lines} == {P}, lines


@pytest.mark.launches
@pytest.mark.parametrize("library", debian_libraries())
def test_without_variables_a_fortran_program_runs_untouched(fortran_programs: Callable[[str, str], Path], library: str):
    """liba2a preloaded with nothing asked: the Fortran program's result right, nothing printed."""
    program = fortran_programs(library, "mpi")
    done = under(library, preload_library(debian_tool(library, "mpicc")), str(program), "5")
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "ok", ""), done.stdout + done.stderr


@pytest.mark.launches
@needs_debian_mpi("Open MPI")
@pytest.mark.skipif(not (OPEN_MPI_VENV / "bin" / "python").exists(),
                    reason=f"needs a venv on Debian's Open MPI at {OPEN_MPI_VENV} (.ci/setup.d/debian-mpi.sh makes it)")
def test_the_deploy_pages_fortran_loop_runs_as_written(tmp_path: Path) -> None:
    """docs/deploy.md's Fortran block, pasted at a checkout's root with ~/venv-openmpi a venv on Debian's Open MPI
    4.1.4: every line exits 0 (before, no command made its ompi.a2a, and its oversubscribe hint was Open MPI 5's
    alone), the file is for Open MPI, and on the last run every call is served or passed for a true reason."""
    for name in ("a2a", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    home = tmp_path / "home"
    home.mkdir()
    (home / "venv-openmpi").symlink_to(OPEN_MPI_VENV)
    block = page_block("**Fortran programs.**")
    env = {**clean_launcher_env(None), "HOME": str(home), "XDG_CACHE_HOME": str(cache_home().parent)}
    done = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    folder = tmp_path / "results" / "fortran"
    assert Deployment.read(folder / "ompi.a2a").library == "Open MPI"
    assert done.stdout.splitlines().count("ok") == 2 and "MPI_Init through Fortran" in done.stderr, said[-3000:]
    kept = {c for c in ("alltoall", "alltoallv") if re.search(rf"^{c} on 3 ranks.*: the library$", said, re.M)}
    for collective, (seen, by_schedule, reasons) in report_lines(done.stderr).items():
        true = {"MPI_IN_PLACE"} if collective == "alltoall" else set()
        assert seen == {"alltoall": 3 * P, "alltoallv": 2 * P}[collective], said[-2000:]
        assert sum(by_schedule.values()) + sum(reasons.values()) == seen, said[-2000:]
        assert set(reasons) <= true | ({"the file keeps the library's choice"} if collective in kept else set()), said
