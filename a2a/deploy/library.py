"""liba2a.so: the PMPI library that runs a deploy file's schedules inside any MPI program (c/liba2a_*.c, one job
each behind c/liba2a_internal.h, over the executor of a2a.execute), compiled for the MPI library whose mpicc is given
(default: this Python's) once per source and library, and kept.

It calls the MPI library of the program it is preloaded into. Where that library's handles are numbers (MPICH and
its kin) it links none, so a program built with another MPICH loads no second one beside its own (a second one's
own libraries can stop the program at load); liba2a then checks at MPI_Init that the library is the one it was built
for, and otherwise refuses in one line. Open MPI's handles are its library's symbols, so there it links the library
(whose name is the same for every version of it: the program's own is the one that is used).
"""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from a2a.errors import HarnessError
from a2a.execute.executor import FLAGS, SOURCES
from a2a.kept import compiled
from a2a.mpi import mpi_tool

C = Path(__file__).parent / "c"
# its parts, one job each (every source counts for the kept library's key; the .c files are compiled)
PARTS = ["parser", "state", "serve", "nonblocking", "requests", "learn", "learnv", "store", "record", "report", "init",
         "fortran"]
LEARN_SOURCES = [C / "learn.c", C / "learn.h"]  # the learners of `learn` lines, which hold no MPI
SOURCES_OF_LIBA2A = [*(C / f"liba2a_{part}.c" for part in PARTS), C / "liba2a_internal.h", *LEARN_SOURCES]
NAME = "liba2a.so"
# the program it is preloaded into sees only the MPI functions it intercepts; dl: it looks up optional entry points
PRELOAD_SOURCES, PRELOAD_FLAGS = [*SOURCES_OF_LIBA2A, *SOURCES], [*FLAGS, "-fvisibility=hidden", "-ldl", "-lm"]


def preload_library(mpicc: str | None = None) -> Path:
    """liba2a.so for the MPI library of `mpicc` (default: this Python's), the PMPI library that runs deploy files'
    schedules (docs/deploy.md), compiled unless kept; HarnessError naming the compiler where it cannot be built."""
    mpicc = mpicc or mpi_tool("mpicc")
    compiler, includes = wrapped(mpicc)
    header = next((Path(d) / "mpi.h" for d in includes if (Path(d) / "mpi.h").exists()), None)
    if header is None or "#define OPEN_MPI " in header.read_text(errors="replace"):
        return compiled(PRELOAD_SOURCES, NAME, PRELOAD_FLAGS, shared=True, mpicc=mpicc)
    # mpi.h is a source, so the library is kept per MPI version; the compiler the wrapper stands for links no MPI
    flags = [*PRELOAD_FLAGS, *(f"-I{d}" for d in includes if Path(d) != header.parent)]
    return compiled([*PRELOAD_SOURCES, header], NAME, flags, shared=True, mpicc=compiler)


def wrapped(mpicc: str) -> tuple[str, list[str]]:
    """The compiler an MPI compiler wrapper stands for, and its include folders (`mpicc -show`)."""
    try:
        shown = subprocess.run([mpicc, "-show"], capture_output=True, text=True, check=False, timeout=60)
    except OSError as failed:
        raise HarnessError(f"--mpicc {mpicc}: {failed.strerror}; accepted: an MPI compiler wrapper such as mpicc, "
                           "mpicc.mpich or mpicc.openmpi") from None
    words = shlex.split(shown.stdout)
    if shown.returncode or not words:
        raise HarnessError(f"--mpicc {mpicc}: `{mpicc} -show` did not say what it compiles with "
                           f"({shown.stderr.strip()[-300:] or 'it printed nothing'}); accepted: an MPI compiler "
                           "wrapper such as mpicc, mpicc.mpich or mpicc.openmpi")
    return words[0], [w[2:] for w in words[1:] if w.startswith("-I") and len(w) > 2]
