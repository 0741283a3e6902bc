"""The built-in algorithms, one module each: importing this package registers them.

Named `builtin`, not `algorithms`, so that `a2a.algorithms()` stays the function the API promises.
"""
from . import (  # noqa: F401
    auto,
    bine,
    bruck,
    bruck_zero_copy,
    bruckv,
    dimensional,
    hierarchical,
    linear,
    linear_sync,
    locality_aware,
    multileader,
    native,
    node_aware,
    onesided,
    pairwise,
    pairwise_inplace,
    parallel_split,
    throttled,
)

