"""`bench tune --deploy --mpicc PATH`: a deploy file verified for a program built with another MPI library than this
Python's (liba2a and the loop built with that mpicc, launched by the launcher beside it, the file made for the
library they run); an mpicc it cannot use refused in one line before any launch."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import bench_here, is_mpich
from test_deploy_verify import TESTED_PAIRS

from a2a.deploy.file import Deployment
from a2a.mpi import clean_launcher_env

MPICH = Path("/usr/bin/mpicc.mpich")  # Debian's MPICH 4.0.2; its launcher is /usr/bin/mpiexec.mpich
ACCEPTED = ("accepted: an MPI compiler wrapper with its library's launcher beside it (mpicc and mpiexec, mpicc.mpich "
            "and mpiexec.mpich, mpicc.openmpi and mpiexec.openmpi)")


def lonely_mpicc(directory: Path) -> Path:
    """An executable named mpicc with no mpiexec or mpirun beside it."""
    mpicc = directory / "bin" / "mpicc"
    mpicc.parent.mkdir()
    mpicc.write_text("#!/bin/sh\nexec cc \"$@\"\n")
    mpicc.chmod(0o755)
    return mpicc


@pytest.mark.parametrize("given, message", [
    ("missing", "--mpicc {}: not an executable program; " + ACCEPTED),
    ("lonely", "--mpicc {}: no launcher beside it (none of {}, {} is an executable); " + ACCEPTED),
    ("no deploy", "--mpicc {} builds liba2a for the program a deploy file is verified with: add --deploy"),
])
def test_an_mpicc_it_cannot_use_is_refused_in_one_line_before_any_launch(tmp_path: Path, capsys, given: str,
                                                                          message: str):
    """A missing mpicc, one with no launcher beside it, or --mpicc without --deploy: exit 2, one line that says what is
    accepted, and nothing launched (this test may start no process: the suite's guard fails it if one is) and no
    tune directory made."""
    mpicc = tmp_path / "no-such-mpicc" if given == "missing" else lonely_mpicc(tmp_path)
    if given == "no deploy":
        mpicc = MPICH if MPICH.exists() else Path(sys.executable).parent / "mpicc"
    expected = message.format(mpicc, mpicc.parent / "mpiexec", mpicc.parent / "mpirun")
    deploy = [] if given == "no deploy" else ["--deploy"]
    code, out, err = bench_here(capsys, "tune", *deploy, "--nprocs", "2", "--sizes", "8,64K", "--mpicc", str(mpicc),
                                "--output", str(tmp_path / "tune"))
    assert code == 2 and err == f"error: {expected}\n" and out == "", err
    assert not (tmp_path / "tune").exists()


@pytest.mark.debian
@pytest.mark.launches
@pytest.mark.skipif(not MPICH.exists() or not Path("/usr/bin/mpiexec.mpich").exists(),
                    reason="needs Debian's MPICH (/usr/bin/mpicc.mpich, /usr/bin/mpiexec.mpich missing: `bash "
                           ".ci/setup.d/debian-mpi.sh` installs it)")
def test_tune_deploy_verifies_under_the_library_of_the_mpicc_given(tmp_path: Path, capsys):
    """bench tune --deploy --mpicc /usr/bin/mpicc.mpich at 2 ranks: the sweeps time this Python's library (the tune says
    so in one line), the verification launches run Debian's MPICH 4.0.2 under its mpiexec.mpich with a liba2a built
    for it (none refused: a refused file is an error of the launch), and the file is made for that library and says
    it verified there. linear and pairwise alone are swept, so the file serves a size and the loop verifies it; ties
    are kept, so that it is verified again only where a size read slower (what is checked here is where it ran)."""
    directory = tmp_path / "tune"
    done = subprocess.run([sys.executable, "-m", "bench", "tune", "--deploy", "--nprocs", "2", "--launches", "1",
                           "--iterations", "15", *TESTED_PAIRS, "--keep-ties", "--sizes", "8,64K", "--algorithms",
                           "linear,pairwise", "--mpicc", str(MPICH), "--output", str(directory)],
                          env=clean_launcher_env(None), capture_output=True, text=True, timeout=600)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "refused" not in said, said[-3000:]
    notes = [line for line in done.stdout.splitlines() if line.startswith(f"--mpicc {MPICH}: ")]
    assert notes == [f"--mpicc {MPICH}: liba2a, the verification loop and its launches (/usr/bin/mpiexec.mpich) run "
                     "MPICH Version: 4.0.2; the sweeps time this Python's MPI library, not that one"], said[-3000:]
    assert "verify-1: alltoall on 2 ranks at 3 sizes, 4 launches a side" in done.stdout, said[-3000:]
    name = "deploy.a2a" if (directory / "deploy.a2a").exists() else "not-applied.a2a"
    made = Deployment.read(directory / name)
    how = made.verification[0]
    timed = "MPICH" if is_mpich() else "Open MPI"  # the sweeps' library: this Python's
    assert made.library == "MPICH" and "), MPICH Version: 4.0.2 (liba2a and the loop built with /usr/bin/mpicc.mpich; "\
        f"the sweeps timed {timed}" in how, how
    code, shown, _ = bench_here(capsys, "deploy", "--show", str(directory / name))
    assert code == 0 and how in shown, shown
    if name == "deploy.a2a":
        assert "  /usr/bin/mpiexec.mpich -n 2 env LD_PRELOAD=" in done.stdout, done.stdout[-2000:]
