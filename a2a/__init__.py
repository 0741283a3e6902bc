"""a2a: pluggable MPI all-to-all algorithms; importing it starts no MPI work."""
from .errors import A2AError, BadInput, BadOption, BadResults, PluginError, UnknownAlgorithm
from .registry import Algorithm, Plan, Prepared, algorithms, alltoall, alltoallv, get, load_plugin, register

__version__ = "0.1.0"
__all__ = [
    "A2AError", "Algorithm", "BadInput", "BadOption", "BadResults", "Plan", "PluginError", "Prepared",
    "UnknownAlgorithm", "algorithms", "alltoall", "alltoallv", "get", "load_plugin", "register",
]
