"""a2a: pluggable MPI all-to-all algorithms; importing it starts no MPI work.

The public names are loaded when first used (PEP 562), so that the ground (a2a.mpi, a2a.errors) imports with the
standard library alone: `python -m bench` run by a Python without the testbed's packages can say so in one line.
"""
from importlib import import_module
from typing import Any

from a2a.errors import A2AError, BadInput, BadOption, BadResults, PluginError, UnknownAlgorithm
from a2a.record.meta import version

# public name -> the module that defines it
PUBLIC = {
    **dict.fromkeys(("alltoall", "alltoallv", "ialltoall", "ialltoallv"), "a2a.execute.calls"),
    **dict.fromkeys(("Handle", "free_cache"), "a2a.execute.oneshot"),
    **dict.fromkeys(("Plan", "Prepared"), "a2a.algos.plan"),
    "load_plugin": "a2a.algos.plugins",
    **dict.fromkeys(("Algorithm", "algorithms", "get", "register"), "a2a.algos.registry"),
}
__version__ = version()
__all__ = ["A2AError", "BadInput", "BadOption", "BadResults", "PluginError", "UnknownAlgorithm", *sorted(PUBLIC)]


def __getattr__(name: str) -> Any:
    if name not in PUBLIC:
        raise AttributeError(f"module 'a2a' has no attribute {name!r}")
    return getattr(import_module(PUBLIC[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *PUBLIC])
