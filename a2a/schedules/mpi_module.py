"""`from mpi4py import MPI` answered by another module while a factory prepares a plan: the capture's stand-in MPI
(a2a.schedules.standin) and the progression engine's (a2a.execute.engine) both work this way. Factories import MPI
inside themselves, so what they bind at plan time is what the module in place then gives."""
from __future__ import annotations

import sys
import types
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def replaced_mpi(module: types.ModuleType) -> Iterator[None]:
    """Make `from mpi4py import MPI` return `module` inside the block."""
    import mpi4py

    saved_attr: types.ModuleType | None = getattr(mpi4py, "MPI", None)  # None: mpi4py.MPI was not there
    saved_module = sys.modules.get("mpi4py.MPI")
    mpi4py.MPI = module
    sys.modules["mpi4py.MPI"] = module
    try:
        yield
    finally:
        if saved_attr is None:
            del mpi4py.MPI
        else:
            mpi4py.MPI = saved_attr
        if saved_module is None:
            sys.modules.pop("mpi4py.MPI", None)
        else:
            sys.modules["mpi4py.MPI"] = saved_module
