"""a2a: pluggable MPI all-to-all algorithms; importing it starts no MPI work."""
from a2a.algos.plan import Plan, Prepared
from a2a.algos.plugins import load_plugin
from a2a.algos.registry import Algorithm, algorithms, get, register
from a2a.errors import A2AError, BadInput, BadOption, BadResults, PluginError, UnknownAlgorithm
from a2a.execute.calls import alltoall, alltoallv, ialltoall, ialltoallv
from a2a.execute.oneshot import Handle, free_cache
from a2a.record.meta import version

__version__ = version()
__all__ = [
    "A2AError", "Algorithm", "BadInput", "BadOption", "BadResults", "Handle", "Plan", "PluginError", "Prepared",
    "UnknownAlgorithm", "algorithms", "alltoall", "alltoallv", "free_cache", "get", "ialltoall", "ialltoallv",
    "load_plugin", "register",
]
