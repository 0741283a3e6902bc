"""The words an algorithm's file uses to state its costs: Hockney formulas, link traffic, count-matrix costs.

Notation: p processes, m bytes per peer, N nodes, q = p/N ranks per node. A formula is a sum
of terms `coefficient(placement, m, options) * parameter`, linear in the parameters:

- alpha*: seconds per round of messages that are in flight together (start-up, latency);
  alpha_msg: seconds per message posted, for the start-up that does not overlap;
- beta*:  seconds per byte one rank sends (1/beta is that rank's bandwidth);
- gamma:  seconds per byte copied locally (memory).

Link classes: `_intra` parameters are for messages inside a node, `_inter` between nodes.
Every coefficient of a beta or gamma is proportional to m, so T(m) = L(p) + S(p) m.
a2a.analysis.model fits the parameters; a2a.analysis.contention routes the traffic rounds.
Options reach these functions as text with every default filled in (registry.with_defaults).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from a2a.errors import BadResults


@dataclass(frozen=True)
class Placement:
    """Where a call runs: p ranks on N nodes (q = p/N ranks per node, maybe fractional)."""

    nprocs: int
    nnodes: int = 1

    @property
    def ppn(self) -> float:
        return self.nprocs / self.nnodes


Terms = Callable[[Placement, float, dict], "dict[str, float]"]


@dataclass(frozen=True)
class Formula:
    """An alltoall's Hockney cost: its text, its parameters (most essential first), their coefficients."""

    text: str
    params: tuple[str, ...]
    terms: Terms


Message = tuple[int, int, float]  # (source rank, destination rank, bytes)
Round = list[Message]  # messages in flight together
Traffic = Callable[[int, float, dict], "list[Round]"]  # (p, m, options) -> rounds


@dataclass(frozen=True)
class MatrixCost:
    """An alltoallv's cost on a count matrix: {"rounds": latencies in series, "bytes": bytes in series}.

    `terms(counts, itemsize, options)`: counts[i, j] elements from rank i to rank j.
    """

    text: str
    terms: Callable[[np.ndarray, int, dict], "dict[str, float]"]


def option(options: dict, name: str) -> int:
    """An integer option, e.g. radix=4."""
    value = options.get(name)
    if value is not None:
        try:
            return int(value)
        except (TypeError, ValueError):
            pass
    raise BadResults(f"option {name}={value!r} is not an integer")


def node_placement(placement: Placement, options: dict) -> Placement:
    """The nodes a node-aware algorithm sees: virtual nodes of ppn=K ranks, else the real ones."""
    k = option(options, "ppn")
    return Placement(placement.nprocs, -(-placement.nprocs // k)) if k > 0 else placement


def leader_split(placement: Placement, options: dict, name: str) -> tuple[Placement, float, float]:
    """Nodes, parts per node (L, at most q) and ranks per part (c = q / L) of a node-splitting algorithm."""
    n = node_placement(placement, options)
    parts = min(max(option(options, name), 1), max(n.ppn, 1))
    return n, parts, n.ppn / parts


def everything(p: int, m: float, options: dict | None = None) -> list[Round]:
    """One round: every rank sends m bytes to every other rank at once (a direct exchange)."""
    return [[(r, d, m) for r in range(p) for d in range(p) if d != r]]


def busiest(counts: np.ndarray, itemsize: int, options: dict | None = None) -> dict[str, float]:
    """All peers at once: one latency, and the busiest rank's bytes sent or received."""
    off = off_diagonal(counts, itemsize)
    return {"rounds": 1.0 if len(counts) > 1 else 0.0,
            "bytes": float(max(off.sum(axis=1).max(initial=0), off.sum(axis=0).max(initial=0)))}


def off_diagonal(counts: np.ndarray, itemsize: int) -> np.ndarray:
    """Bytes between distinct ranks: counts x itemsize with the diagonal (own blocks) zeroed."""
    sizes = counts * itemsize
    return sizes - np.diag(np.diag(sizes))


# The library's own (native) and plug-ins without a formula: a library switches algorithms by
# size, so no one schedule applies. The latency of a logarithmic algorithm (what libraries use
# for small messages) and the bandwidth of a direct exchange (what they use for large ones).
GENERIC = Formula("ceil(lg p) alpha + (p-1) m beta", ("alpha", "beta"),
                  lambda s, m, options: {"alpha": math.ceil(math.log2(max(s.nprocs, 2))),
                                         "beta": (s.nprocs - 1) * m})
DIRECT = MatrixCost("one round; the busiest rank's bytes", busiest)

