"""Fortran programs under liba2a: their MPI_ALLTOALL and MPI_ALLTOALLV recorded and served, every element right, with
Debian's Open MPI (whose Fortran library calls PMPI_* itself, past liba2a's C functions) and Debian's MPICH (whose
Fortran library calls MPI_*), through `use mpi` and `use mpi_f08`; liba2a built by each library's own mpicc."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import ROOT, debian_launch, debian_libraries, debian_tool
from test_deploy import decision, passed, served

from a2a.deploy.file import deployment
from a2a.deploy.library import preload_library
from a2a.mpi import clean_launcher_env

PROGRAM = ROOT / "tests" / "programs" / "alltoall_check.f90"
P = 3


def fortran_program(library: str, binding: str, folder: Path) -> Path:
    """tests/programs/alltoall_check.f90 built by the library's mpif90, with `use mpi` or `use mpi_f08`."""
    program = folder / f"alltoall_check_{binding}"
    subprocess.run([debian_tool(library, "mpif90"), "-O2", "-cpp", *(["-DF08"] if binding == "mpi_f08" else []),
                    "-o", str(program), str(PROGRAM)], check=True, capture_output=True, cwd=folder)
    return program


def under(library: str, preload: Path, *program: str, **variables: str) -> subprocess.CompletedProcess:
    """The program on P ranks of Debian's `library`, liba2a preloaded in the ranks with these variables."""
    settings = [f"{k}={v}" for k, v in {"LD_PRELOAD": str(preload), **variables}.items()]
    return subprocess.run(debian_launch(library, P, "env", *settings, *program), env=clean_launcher_env(None),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.launches
@pytest.mark.parametrize("binding", ["mpi", "mpi_f08"])
@pytest.mark.parametrize("library", debian_libraries())
def test_a_fortran_programs_calls_are_recorded_and_served(tmp_path: Path, library: str, binding: str):
    """MPI_ALLTOALL at 2 and 1000 integers per peer (pairwise and bruck by the file), MPI_ALLTOALLV (linear) and an
    in-place MPI_ALLTOALL (passed through: Fortran's MPI_IN_PLACE told as C's): every call recorded, every one the
    file covers served, every element and error argument right, and the report says MPI_Init came through Fortran.
    Without liba2a's Fortran entry points, Open MPI's program is neither recorded nor reported."""
    made = deployment(decision([(0, "pairwise"), (100, "bruck")], "linear", [P]), [P], 0, library, ["tests"])
    (tmp_path / "deploy.a2a").write_text(made.text())
    program = fortran_program(library, binding, tmp_path)
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
def test_without_variables_a_fortran_program_runs_untouched(tmp_path: Path, library: str):
    """liba2a preloaded with nothing asked: the Fortran program's result right, nothing printed."""
    program = fortran_program(library, "mpi", tmp_path)
    done = under(library, preload_library(debian_tool(library, "mpicc")), str(program), "5")
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "ok", ""), done.stdout + done.stderr
