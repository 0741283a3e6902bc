"""tests/programs/alltoall_check.f90 builds without a word from the compiler, by each Debian library's mpif90 and
through both bindings: MPICH's `use mpi` declares no interface for a buffer, so gfortran compares the calls' arguments
itself and warns where one call of a routine passes an array and another a scalar."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import ROOT, debian_libraries, debian_tool

PROGRAM = ROOT / "tests" / "programs" / "alltoall_check.f90"


@pytest.mark.parametrize("binding", ["mpi", "mpi_f08"])
@pytest.mark.parametrize("library", debian_libraries())
def test_the_fortran_program_builds_without_a_warning(tmp_path: Path, library: str, binding: str) -> None:
    done = subprocess.run([debian_tool(library, "mpif90"), "-O2", "-cpp", *(["-DF08"] if binding == "mpi_f08" else []),
                           "-o", str(tmp_path / "alltoall_check"), str(PROGRAM)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), done.stdout + done.stderr
