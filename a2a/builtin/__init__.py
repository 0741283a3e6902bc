"""The built-in algorithms, one module each: importing this package registers them.

Named `builtin`, not `algorithms`, so that `a2a.algorithms()` stays the function the API promises.
"""
from . import auto, bruck, bruckv, hierarchical, linear, native, node_aware, pairwise, pairwise_inplace, throttled  # noqa: F401
