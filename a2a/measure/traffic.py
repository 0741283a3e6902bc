"""One point's traffic: what each rank sends, its buffers, the check data, the plan and the bandwidths.

An alltoall sends the same count to every peer (UniformTraffic); an alltoallv sends what its
workload's count matrix says (Traffic). The driver treats both alike.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from a2a.record.stats import bandwidths
from a2a.sweep.pattern import expected_pattern, expected_pattern_v, send_pattern, send_pattern_v
from a2a.sweep.workload import imbalance, parse_workload


@dataclass(frozen=True)
class Traffic:
    """counts[i, j]: elements rank i sends rank j (the same matrix on every rank)."""

    counts: np.ndarray
    dtype: np.dtype

    @classmethod
    def of(cls, workload: str, nprocs: int, bytes_per_peer: int, dtype: str, seed: int) -> "Traffic":
        """The workload's matrix for `nprocs` ranks at a mean of `bytes_per_peer` (BadConfig if it cannot be made)."""
        kind = np.dtype(dtype)
        return cls(parse_workload(workload).counts(nprocs, bytes_per_peer, kind.itemsize, seed), kind)

    @property
    def imbalance(self) -> float:
        """Largest block over the mean block."""
        return imbalance(self.counts)

    @property
    def most_bytes(self) -> int:
        """The largest send plus receive buffer of any rank, in bytes."""
        return int((self.counts.sum(axis=1) + self.counts.sum(axis=0)).max()) * self.dtype.itemsize

    def buffers(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """(sendbuf carrying the check pattern, zeroed recvbuf) of `rank`."""
        return send_pattern_v(self.dtype, self.counts, rank), np.zeros(int(self.counts[:, rank].sum()), self.dtype)

    def expected(self, rank: int) -> np.ndarray:
        """What `rank` must receive."""
        return expected_pattern_v(self.dtype, self.counts, rank)

    def plan(self, algorithm, comm, sendbuf: np.ndarray, recvbuf: np.ndarray, options: dict, nonblocking: bool = False):
        """The algorithm's alltoallv plan for this rank's row and column of the matrix (`nonblocking`: its init)."""
        r = comm.rank
        prepare = algorithm.init_v if nonblocking else algorithm.plan_v
        return prepare(comm, sendbuf, self.counts[r], recvbuf, self.counts[:, r], **options)

    def bandwidths(self, seconds: float) -> tuple[float, float]:
        """(algbw, busbw) in GB/s from the bytes moved: mean bytes a rank sends (self included, then not) / t."""
        if not seconds > 0:
            return float("nan"), float("nan")
        p, total = len(self.counts), self.counts.sum() * self.dtype.itemsize
        own = np.trace(self.counts) * self.dtype.itemsize
        return total / p / seconds / 1e9, (total - own) / p / seconds / 1e9


@dataclass(frozen=True)
class UniformTraffic:
    """An alltoall's traffic: `count` elements from every rank to every rank."""

    nprocs: int
    count: int
    dtype: np.dtype

    @property
    def imbalance(self) -> float:
        """1, or nan when nothing moves."""
        return 1.0 if self.count else float("nan")

    @property
    def most_bytes(self) -> int:
        """A rank's send plus receive buffer, in bytes."""
        return 2 * self.nprocs * self.count * self.dtype.itemsize

    def buffers(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """(sendbuf carrying the check pattern, zeroed recvbuf) of `rank`."""
        sendbuf = send_pattern(self.dtype, self.nprocs, rank, self.count)
        return sendbuf, np.zeros_like(sendbuf)

    def expected(self, rank: int) -> np.ndarray:
        """What `rank` must receive."""
        return expected_pattern(self.dtype, self.nprocs, rank, self.count)

    def plan(self, algorithm, comm, sendbuf: np.ndarray, recvbuf: np.ndarray, options: dict, nonblocking: bool = False):
        """The algorithm's alltoall plan (`nonblocking`: its init, for start, test and wait)."""
        return (algorithm.init if nonblocking else algorithm.plan)(comm, sendbuf, recvbuf, **options)

    def bandwidths(self, seconds: float) -> tuple[float, float]:
        """(algbw, busbw) in GB/s as nccl-tests computes them."""
        return bandwidths(self.count * self.dtype.itemsize, self.nprocs, seconds)


def traffic_of(collective: str, workload: str, nprocs: int, bytes_per_peer: int, dtype: str,
               seed: int) -> Traffic | UniformTraffic:
    """A point's traffic on `nprocs` ranks (BadConfig if an alltoallv workload cannot be made)."""
    if collective == "alltoallv":
        return Traffic.of(workload, nprocs, bytes_per_peer, dtype, seed)
    kind = np.dtype(dtype)
    return UniformTraffic(nprocs, bytes_per_peer // kind.itemsize, kind)
