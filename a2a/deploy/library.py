"""liba2a.so: the PMPI library that runs a deploy file's schedules inside any MPI program (c/liba2a.c, over the
executor of a2a.execute), compiled with the MPI library's own mpicc once per source and library, and kept."""
from __future__ import annotations

from pathlib import Path

from a2a.execute.executor import FLAGS, SOURCES
from a2a.kept import compiled

SOURCE = Path(__file__).parent / "c" / "liba2a.c"
# the program it is preloaded into sees only the MPI functions it intercepts
PRELOAD_SOURCES, PRELOAD_FLAGS = [SOURCE, *SOURCES], [*FLAGS, "-fvisibility=hidden"]


def preload_library(mpicc: str | None = None) -> Path:
    """liba2a.so, the PMPI library that runs deploy files' schedules (docs/deploy.md), compiled unless kept."""
    return compiled(PRELOAD_SOURCES, "liba2a.so", PRELOAD_FLAGS, shared=True, mpicc=mpicc)
