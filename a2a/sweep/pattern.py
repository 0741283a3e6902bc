"""Data whose every element names its source, destination and position, to check an all-to-all."""
from __future__ import annotations

import numpy as np


def _exact_limit(dtype: np.dtype) -> int:
    """Largest modulus whose residues the dtype holds exactly."""
    if dtype.kind in "fc":
        return 2 ** (np.finfo(dtype).nmant + 1)
    if dtype.kind in "iu":
        return int(np.iinfo(dtype).max) + 1
    raise ValueError(f"dtype {dtype} cannot carry check data; use an integer, float or complex dtype")


def _values(dtype: np.dtype, sources: np.ndarray, dests: np.ndarray, count: int) -> np.ndarray:
    # the values are computed in int64: a larger modulus (int64, uint64, longdouble) would overflow it
    limit, steps = min(_exact_limit(dtype), 1 << 62), np.arange(count, dtype=np.int64) * 31
    out = np.empty((len(sources), count), dtype=dtype)
    bases = np.asarray(sources, np.int64) * 7919 + np.asarray(dests, np.int64) * 104729
    rows = max(1, (1 << 16) // max(count, 1))  # about 64K values at a time: bounded memory
    for at in range(0, len(bases), rows):
        out[at: at + rows] = (steps[None, :] + bases[at: at + rows, None]) % limit
    return out.reshape(-1)


def send_pattern(dtype: np.dtype, nprocs: int, rank: int, count: int) -> np.ndarray:
    """What `rank` sends: block j is addressed to rank j."""
    return _values(np.dtype(dtype), np.full(nprocs, rank), np.arange(nprocs), count)


def expected_pattern(dtype: np.dtype, nprocs: int, rank: int, count: int) -> np.ndarray:
    """What `rank` must receive: block j came from rank j."""
    return _values(np.dtype(dtype), np.arange(nprocs), np.full(nprocs, rank), count)


def _values_v(dtype: np.dtype, sources: np.ndarray, dests: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The blocks of `_values` of several lengths, end to end (one block per source, destination and length)."""
    lengths = np.asarray(lengths, np.int64)
    limit, total = min(_exact_limit(dtype), 1 << 62), int(lengths.sum())
    bases = np.asarray(sources, np.int64) * 7919 + np.asarray(dests, np.int64) * 104729
    steps = (np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)) * 31
    return ((steps + np.repeat(bases, lengths)) % limit).astype(dtype)


def send_pattern_v(dtype: np.dtype, counts: np.ndarray, rank: int) -> np.ndarray:
    """What `rank` sends in an alltoallv with the p x p `counts`: block j (counts[rank, j] long) for rank j."""
    p = len(counts)
    return _values_v(np.dtype(dtype), np.full(p, rank), np.arange(p), counts[rank])


def expected_pattern_v(dtype: np.dtype, counts: np.ndarray, rank: int) -> np.ndarray:
    """What `rank` must receive: block j (counts[j, rank] long) came from rank j."""
    p = len(counts)
    return _values_v(np.dtype(dtype), np.arange(p), np.full(p, rank), counts[:, rank])
