"""Which MPI library a deploy file and liba2a are for: one liba2a per library whatever the folder that asks, a file
labelled with its decisions' own library (refused where they are two), the learn hint run as printed, and
docs/deploy.md's block for a program of another MPI library run as written."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from support import ROOT, bench_here, needs_debian_mpi
from test_deploy import decision, report_lines

from a2a.deploy.file import Deployment, deployment, this_library
from a2a.kept import compiled_path
from a2a.mpi import clean_launcher_env, mpi_tool
from a2a.record.decision import write_decision

OPEN_MPI_TEXT = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"
MPICH_TEXT = "MPICH Version:      4.0.2\nMPICH Release date: Thu May 26 15:51:45 CDT 2022"
Captured = pytest.CaptureFixture[str]
OPEN_MPI_RANKS = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",  # root; beyond the cores:
                  "OMPI_MCA_rmaps_base_oversubscribe": "1",  # Open MPI 4.1
                  "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"}  # Open MPI 5


def recorded_under(library_text: str, path: Path, collective: str = "alltoall") -> Path:
    """A decision of one table whose record was measured with the library `library_text` names, written to `path`."""
    document = decision([(0, "pairwise")], "pairwise", [2])
    document["tables"] = [t for t in document["tables"] if t["collective"] == collective]
    document["sources"] = [{"directory": f"/records/{path.stem}", "mpi_library": library_text, "git_commit": "abc"}]
    document["mpi_library"] = library_text
    write_decision(document, path)
    return path


def page_block(after: str) -> str:
    """The first shell block of docs/deploy.md after the text `after`, as a newcomer pastes it."""
    text = (ROOT / "docs" / "deploy.md").read_text().split(after, 1)[1]
    return text.split("```sh\n", 1)[1].split("```", 1)[0]


def test_a_compiler_named_bare_is_kept_under_one_path_from_any_folder(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`cc`, as `mpicc -show` names the compiler behind MPICH's wrapper: the same kept path from two folders (it was
    keyed on ./cc of the working directory)."""
    source = ROOT / "tests" / "programs" / "alltoall_check.c"
    paths = []
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        paths.append(compiled_path([source], "check", ["-O2"], mpicc="cc"))
    assert paths[0] == paths[1], paths


@pytest.mark.launches
def test_bench_deploy_library_prints_one_path_from_two_folders(tmp_path: Path) -> None:
    """`python -m bench deploy --library` run in two folders: one liba2a, built once."""
    printed = []
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        done = subprocess.run([mpi_tool("python"), "-m", "bench", "deploy", "--library"], cwd=tmp_path / folder,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        printed.append(done.stdout.strip())
    assert printed[0] == printed[1] and Path(printed[0]).name == "liba2a.so", printed


@pytest.mark.parametrize("text, library", [(OPEN_MPI_TEXT, "Open MPI"), (MPICH_TEXT, "MPICH")],
                         ids=["open-mpi", "mpich"])
def test_a_file_is_for_the_library_its_decision_was_measured_with(tmp_path: Path, capsys: Captured, text: str,
                                                                library: str) -> None:
    """A decision recorded under Open MPI makes a file for Open MPI, and one under MPICH a file for MPICH, whichever
    library this Python runs (before: this Python's, which liba2a then refused in the other's programs); where it is
    not this Python's, a line says how to build liba2a for it."""
    out = tmp_path / "d.a2a"
    code, said, _ = bench_here(capsys, "deploy", str(recorded_under(text, tmp_path / "decision.json")), "-o", str(out))
    assert code == 0 and said.splitlines()[-1].endswith(f", for {library})"), said
    assert Deployment.read(out).library == library
    hint = [line for line in said.splitlines() if "--library --mpicc PATH" in line]
    assert hint == ([] if library == this_library() else [
        f"the file is for {library}, whose programs need liba2a built by its compiler wrapper (python -m bench deploy "
        f"--library --mpicc PATH); this Python runs {this_library()}"]), said


def test_decisions_of_two_libraries_are_refused_in_one_line(tmp_path: Path, capsys: Captured) -> None:
    """An alltoall decision of Open MPI beside an alltoallv one of MPICH: one line naming both, exit 2, no file."""
    first = recorded_under(OPEN_MPI_TEXT, tmp_path / "ompi.json")
    second = recorded_under(MPICH_TEXT, tmp_path / "mpich.json", "alltoallv")
    out = tmp_path / "d.a2a"
    code, said, err = bench_here(capsys, "deploy", str(first), str(second), "-o", str(out))
    assert code == 2 and err.count("\n") == 1 and not out.exists(), said + err
    assert f"{second} was measured with MPICH, but {first} with Open MPI" in err, err


def test_a_decision_naming_no_library_gets_this_pythons_and_says_so(tmp_path: Path, capsys: Captured) -> None:
    """A decision written by hand (no record, no library): the file is for this Python's library, said in a line."""
    table = tmp_path / "decision.json"
    write_decision(decision([(0, "pairwise")], "pairwise", [2]), table)
    code, said, _ = bench_here(capsys, "deploy", str(table), "-o", str(tmp_path / "d.a2a"))
    assert code == 0 and said.splitlines()[0] == (
        f"the decisions name no MPI library: the file is for this Python's, {this_library()}"), said
    assert Deployment.read(tmp_path / "d.a2a").library == this_library()


@pytest.mark.launches
def test_the_learn_hint_runs_as_printed(tmp_path: Path, capsys: Captured, check_program: Path) -> None:
    """The line `bench deploy --learn --nprocs 2,3` ends with, run in a shell where ./program is a C program: the
    variables set on the ranks (env after the launcher, as docs/deploy.md says) and -n 3, the largest count given
    (before: `mpirun -n P`, which no shell runs); the program learns on 3 ranks and leaves its learned file."""
    code, said, _ = bench_here(capsys, "deploy", "--learn", "--nprocs", "2,3", "--sizes", "1:", "-o",
                               str(tmp_path / "learn.a2a"))
    hint = said.splitlines()[-1]
    assert code == 0, said
    assert re.fullmatch(r"run: mpiexec -n 3 env LD_PRELOAD=\$\(.*\) A2A_DEPLOY=\S+ .*\./program", hint), said
    (tmp_path / "program").write_text(f"#!/bin/sh\nexec {check_program} 4 64 1024\n")
    (tmp_path / "program").chmod(0o700)
    done = subprocess.run(["bash", "-e", "-c", hint.removeprefix("run: ")], cwd=tmp_path, capture_output=True,
                          text=True, env={**clean_launcher_env(None), **OPEN_MPI_RANKS}, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    assert "learn alltoall on 3 ranks" in done.stderr, done.stderr
    assert Deployment.read(tmp_path / "learned.a2a").learned, done.stderr


@pytest.mark.launches
@needs_debian_mpi("MPICH")
def test_the_pages_block_for_another_library_runs_as_written(tmp_path: Path) -> None:
    """docs/deploy.md's --mpicc block, at a checkout's root where the loop by hand left its deploy.a2a (for MPICH):
    the project's program built with Debian's MPICH (the block named a program.c that does not exist) runs under
    the liba2a built for that library, every call served, its checks right."""
    (tmp_path / "a2a").symlink_to(ROOT / "a2a")
    (tmp_path / ".venv").symlink_to(Path(mpi_tool("python")).parent.parent)
    loop = tmp_path / "results" / "loop"
    loop.mkdir(parents=True)
    made = deployment(decision([(0, "pairwise"), (100, "bruck")], "linear", [4]), [4], 0, "MPICH", ["tests"])
    (loop / "deploy.a2a").write_text(made.text())
    block = page_block("### liba2a for another MPI library")
    done = subprocess.run(["bash", "-e", "-c", ". .venv/bin/activate\n" + block], cwd=tmp_path, capture_output=True,
                          text=True, env=clean_launcher_env(None), timeout=600)
    said = done.stdout + done.stderr
    assert done.returncode == 0 and said.count("check ok") == 2, said[-3000:]
    found = report_lines(done.stderr)
    assert all(sum(by_schedule.values()) == seen and not passed for seen, by_schedule, passed in found.values())
    assert set(found["alltoall"][1]) == {"pairwise", "bruck"} and set(found["alltoallv"][1]) == {"linear"}, found
