"""Hockney (alpha-beta) cost model of each algorithm: formulas, least-squares fits, predictions.

Notation: p processes, m bytes per peer, N nodes, q = p/N ranks per node. Every formula is a
sum of terms `coefficient(p, m, nodes) * parameter`, linear in the parameters:

- alpha*: seconds per round of messages that are in flight together (start-up, latency);
  alpha_msg: seconds per message posted, for the start-up that does not overlap;
- beta*:  seconds per byte one rank sends (1/beta is that rank's bandwidth);
- gamma:  seconds per byte copied locally (memory).

Link classes: `_intra` parameters are for messages inside a node, `_inter` between nodes.
Every coefficient of a beta or gamma is proportional to m, so T(m) = L(p) + S(p) m, and the
crossover between the latency-bound and the bandwidth-bound regime is m* = L(p) / S(p).

This module reads results (numpy only) and never imports MPI.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import combinations
from statistics import median
from typing import Any

import numpy as np

from a2a.algos.registry import with_defaults
from a2a.analysis import contention
from a2a.errors import BadResults
from a2a.fabric import Fabric
from a2a.record import decision
from a2a.record.results import KEY_DEFAULTS, Row, label

BAD_FIT = 0.5  # a point whose relative error exceeds this is reported as badly modelled
MIN_SEPARATION = 0.05  # sine of the angle below which two terms cannot be told apart
LINK_PAIRS = (("alpha_intra", "alpha_inter"), ("beta_intra", "beta_inter"))
CONTEXT = tuple(c for c in decision.CONTEXT_COLUMNS if c != "nprocs")  # what makes a separate series
PLAIN = tuple(KEY_DEFAULTS.get(c, "") for c in CONTEXT)  # their values for a plain run: synchronised timing, no mesh


@dataclass(frozen=True)
class Placement:
    """Where a point runs: p ranks on N nodes (q = p/N ranks per node, maybe fractional)."""

    nprocs: int
    nnodes: int = 1

    @property
    def ppn(self) -> float:
        return self.nprocs / self.nnodes


Terms = Callable[[Placement, float, dict], "dict[str, float]"]


@dataclass(frozen=True)
class Formula:
    """One algorithm's cost: parameters (most essential first) and their coefficients."""

    name: str
    text: str
    params: tuple[str, ...]
    terms: Terms


def series_options(algorithm: str, text: str) -> dict[str, str]:
    """A series' options ('radix=4;...') with the algorithm's registered defaults for those left out."""
    return with_defaults(algorithm, decision.parse_options(text))


def option(options: dict, name: str) -> int:
    """An integer option of a series, e.g. radix=4 (series_options fills in the ones a record left out)."""
    value = options.get(name)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadResults(f"option {name}={value!r} is not an integer") from None


def node_placement(placement: Placement, options: dict) -> Placement:
    """The nodes a node-aware algorithm sees: virtual nodes of ppn=K ranks, else the real ones."""
    k = option(options, "ppn")
    return Placement(placement.nprocs, -(-placement.nprocs // k)) if k > 0 else placement


# pairwise: p-1 Sendrecv rounds, one message of m bytes each.
#   T = (p-1) (alpha + m beta)
def pairwise_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    return {"alpha": s.nprocs - 1, "beta": (s.nprocs - 1) * m}


# pairwise_inplace: copy the whole send buffer, then p-1 Sendrecv_replace rounds (even p; odd p
# has p rounds with one idle). T = R alpha + (p-1) m beta + p m gamma
def pairwise_inplace_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    p = s.nprocs
    rounds = p - 1 if p % 2 == 0 else p
    return {"alpha": rounds, "beta": (p - 1) * m, "gamma": p * m}


# linear / throttled(window w): batches of w peers posted at once. The latencies within a batch
# overlap (alpha per batch); the start-up of each message posted does not (alpha_msg, the CPU
# cost of posting and matching it); the bytes leave one after another through the rank's link.
#   T = ceil((p-1)/w) alpha + (p-1) (alpha_msg + m beta)        (linear: w = p-1, one batch)
# alpha_msg = 0 is the full-overlap bound, alpha = 0 its no-overlap bound (p-1)(alpha + m beta).
# At one process count the two alphas cannot be told apart; alpha_msg keeps their sum, so
# predictions for more processes take the pessimistic bound.
def throttled_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    p = s.nprocs
    window = option(options, "window")
    return {"alpha": math.ceil((p - 1) / max(window, 1)), "alpha_msg": p - 1, "beta": (p - 1) * m}


def linear_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    return throttled_terms(s, m, {"window": str(max(s.nprocs - 1, 1))})


def bruck_schedule(p: int, radix: int) -> tuple[int, int]:
    """Rounds and blocks sent by Bruck's algorithm (the totals of contention.bruck_steps)."""
    steps = contention.bruck_steps(p, radix)
    return len(steps), sum(blocks for _, blocks in steps)


# bruck(radix k): R rounds (about (k-1) log_k p), B blocks of m bytes sent in all (about
# p/k (k-1) log_k p; at k=2: ceil(lg p) rounds of p/2 blocks). Locally it rotates the buffer
# (p m), gathers and scatters the moved blocks around each round (2 B m) and unrotates (p m).
#   T = R alpha + B m beta + (2p + 2B) m gamma
def bruck_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    p = s.nprocs
    rounds, blocks = bruck_schedule(p, option(options, "radix"))
    return {"alpha": rounds, "beta": blocks * m, "gamma": (2 * p + 2 * blocks) * m}


# node_aware: step 0 exchanges with the q ranks of the own node, step i >= 1 with the q ranks
# of node n+i; the q messages of one step overlap.
#   T = alpha_intra + (q-1) m beta_intra + (N-1) (alpha_inter + q m beta_inter)
# beta_inter is per byte one rank sends; the q ranks of a node share its network link, so it
# includes that sharing at the measured q.
def node_aware_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    n = node_placement(s, options)
    q, others = n.ppn, n.nnodes - 1
    return {"alpha_intra": 1, "beta_intra": (q - 1) * m,
            "alpha_inter": others, "beta_inter": others * q * m}


# hierarchical: gather p m bytes from each of the q-1 other ranks on the node leader, leader
# packs (q p m copied), exchanges q*q*m bytes with each of the N-1 other leaders (Alltoallv),
# unpacks (q p m) and scatters p m to each of the q-1 others. The leader is the critical path:
#   T = 2 alpha_intra + 2 (q-1) p m beta_intra + (N-1) (alpha_inter + q^2 m beta_inter)
#       + 2 q p m gamma
def hierarchical_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    n = node_placement(s, options)
    p, q, others = n.nprocs, n.ppn, n.nnodes - 1
    return {"alpha_intra": 2, "beta_intra": 2 * (q - 1) * p * m,
            "alpha_inter": others, "beta_inter": others * q * q * m,
            "gamma": 2 * q * p * m}



# --- node-splitting and one-sided schedules: multileader, locality_aware, onesided, parallel_split

def leader_split(placement: Placement, options: dict, name: str) -> tuple[Placement, float, float]:
    """Nodes, parts per node (L, at most q) and ranks per part (c = q / L) of a node-splitting algorithm."""
    n = node_placement(placement, options)
    parts = min(max(option(options, name), 1), max(n.ppn, 1))
    return n, parts, n.ppn / parts


# multileader(L leaders per node, c = q/L ranks each): hierarchical with parts of c ranks as its
# groups. A leader gathers (c-1) p m, packs c p m, exchanges c^2 m with L-1 leaders on its node
# and L (N-1) on the others (Alltoallv), unpacks and scatters. L = 1 is hierarchical's formula.
#   T = 2 alpha_intra + 2 (c-1) p m beta_intra + (L-1) (alpha_intra + c^2 m beta_intra)
#       + (N-1) L (alpha_inter + c^2 m beta_inter) + 2 c p m gamma
def multileader_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    n, leaders, c = leader_split(s, options, "leaders")
    p, others = n.nprocs, n.nnodes - 1
    return {"alpha_intra": 2 + leaders - 1, "beta_intra": (2 * (c - 1) * p + (leaders - 1) * c * c) * m,
            "alpha_inter": others * leaders, "beta_inter": others * leaders * c * c * m,
            "gamma": 2 * c * p * m}


# locality_aware(G groups per node, c = q/G ranks each): phase 1 sends c m bytes to the rank of
# the same index in each of the G-1 other groups of the node and the G (N-1) groups elsewhere;
# phase 2 (Alltoallv in the group) sends (p/c) m to each of c-1 members; repack and reorder copy p m.
#   T = (N-1) G (alpha_inter + c m beta_inter) + (G-1) (alpha_intra + c m beta_intra)
#       + (c-1) (alpha_intra + (p/c) m beta_intra) + 2 p m gamma
def locality_aware_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    n, groups, c = leader_split(s, options, "groups")
    p, others = n.nprocs, n.nnodes - 1
    return {"alpha_intra": groups - 1 + c - 1, "beta_intra": ((groups - 1) * c + (c - 1) * p / c) * m,
            "alpha_inter": others * groups, "beta_inter": others * groups * c * m, "gamma": 2 * p * m}


# onesided: p-1 puts (or gets) of m bytes issued back to back inside one epoch, opened and closed
# by two collective synchronisations (fence: two fences; lock: two barriers around the flush),
# each ceil(lg p) rounds; pscw instead sends a post and a completion notice to each peer.
#   T = 2 ceil(lg p) alpha + (p-1) (alpha_msg + m beta)          (fence, lock)
#   T = 2 alpha + 3 (p-1) alpha_msg + (p-1) m beta               (pscw)
def onesided_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    p = s.nprocs
    if options.get("sync") == "pscw":
        return {"alpha": 2 if p > 1 else 0, "alpha_msg": 3 * (p - 1), "beta": (p - 1) * m}
    return {"alpha": 2 * math.ceil(math.log2(p)) if p > 1 else 0, "alpha_msg": p - 1, "beta": (p - 1) * m}


# parallel_split(f, as acoll lowers it; g = floor(p/f) groups): phase 1 posts g-1 messages of
# f m at once; phase 2 is f-1 Sendrecv of g m, each then copied into place. An odd p's last rank
# goes through a leader of s = min(8, p-1) ranks, which receives s m, relays s-1 blocks each way
# and sends s m back, after its own phases.
#   T = (f + [p odd] 2s) alpha + (g-1) alpha_msg + ((g-1) f + (f-1) g + [p odd] (4s-2)) m beta
#       + (f-1) g m gamma
def parallel_split_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    from a2a.algos.builtin.parallel_split import SUBGROUP, split_factor

    p = s.nprocs
    f = split_factor(p, option(options, "factor"))
    g = p // f
    relay = min(SUBGROUP, p - 1) if p % f else 0
    lanes = max(g - 1, 0)
    return {"alpha": (f if g else 0) + 2 * relay, "alpha_msg": lanes,
            "beta": (lanes * f + (f - 1) * g + max(4 * relay - 2, 0)) * m, "gamma": (f - 1) * g * m}

# native (and plug-ins): the library switches algorithms by size, so no one schedule applies.
# Generic form: the latency of a logarithmic algorithm (what libraries use for small
# messages) and the bandwidth of a direct exchange (what they use for large ones).
#   T = ceil(lg p) alpha + (p-1) m beta
def generic_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    return {"alpha": math.ceil(math.log2(max(s.nprocs, 2))), "beta": (s.nprocs - 1) * m}


# --- windowed, butterfly, dimension-wise and zero-copy schedules --------------------------------

# linear_sync(window w): a sliding window of w receives and w sends, each refilled when it
# completes. No batch ends in a Waitall, so the latencies pipeline: about (p-1)/w of them are
# exposed (one when w = 0 or w >= p-1, all posted at once); posting and matching each message
# costs alpha_msg and the bytes leave one after another.
#   T = (p-1)/w alpha + (p-1) (alpha_msg + m beta)
def linear_sync_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    p = s.nprocs
    window = option(options, "window")
    exposed = 1 if window <= 0 or window >= p - 1 else (p - 1) / window
    return {"alpha": exposed, "alpha_msg": p - 1, "beta": (p - 1) * m}


# bine: at a power of two, lg p Sendrecv steps of p/2 blocks each (the datatypes' gathering and
# scattering of those blocks is proportional to the same bytes, so it folds into beta); at any
# other p it runs pairwise.   T = lg p (alpha + (p/2) m beta), else (p-1) (alpha + m beta)
def bine_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    p = s.nprocs
    if p & (p - 1):
        return pairwise_terms(s, m, options)
    steps = p.bit_length() - 1
    return {"alpha": steps, "beta": steps * p / 2 * m}


# dimensional(dims n_1 x ... x n_d): phase k is an MPI_Alltoall among the n_k ranks of a line,
# p/n_k blocks per peer, taken as a direct exchange (n_k - 1 messages); the subarray datatypes
# read and write the whole buffer once per phase (MPI packs and unpacks them).
#   T = sum_k [(n_k - 1) alpha + (n_k - 1) (p/n_k) m beta] + 2 d p m gamma
def dimensional_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    from a2a.algos.builtin.dimensional import balanced, factors

    p = s.nprocs
    dims = options["dims"]
    fixed = dims != "auto" and math.prod(int(n) for n in dims.split("x")) == p
    extents = factors(dims, p) if fixed else balanced(p)  # a grid of another size: predict auto's
    return {"alpha": sum(n - 1 for n in extents), "beta": sum((n - 1) * p / n for n in extents) * m,
            "gamma": 2 * len(extents) * p * m}


# bruck_zero_copy(radix k): Bruck's R rounds and B blocks, with no rotation and no packing by
# us: MPI gathers each round's blocks through a datatype, bytes proportional to B, folded into beta.
#   T = R alpha + B m beta
def bruck_zero_copy_terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    rounds, blocks = bruck_schedule(s.nprocs, option(options, "radix"))
    return {"alpha": rounds, "beta": blocks * m}


PAIRWISE = Formula("pairwise", "(p-1) (alpha + m beta)", ("alpha", "beta"), pairwise_terms)
FORMULAS: dict[str, Formula] = {f.name: f for f in (
    PAIRWISE,
    Formula("pairwise_inplace", "R alpha + (p-1) m beta + p m gamma  (R = p-1, or p if p odd)",
            ("alpha", "beta", "gamma"), pairwise_inplace_terms),
    Formula("linear", "alpha + (p-1) (alpha_msg + m beta)", ("alpha_msg", "beta", "alpha"),
            linear_terms),
    Formula("throttled", "ceil((p-1)/w) alpha + (p-1) (alpha_msg + m beta)",
            ("alpha_msg", "beta", "alpha"), throttled_terms),
    Formula("bruck", "R alpha + B m beta + (2p + 2B) m gamma  (R rounds, B blocks sent)",
            ("alpha", "beta", "gamma"), bruck_terms),
    Formula("node_aware", "alpha_intra + (q-1) m beta_intra + (N-1) (alpha_inter + q m beta_inter)",
            ("alpha_inter", "beta_inter", "alpha_intra", "beta_intra"), node_aware_terms),
    Formula("hierarchical", "2 alpha_intra + 2 (q-1) p m beta_intra"
            " + (N-1) (alpha_inter + q^2 m beta_inter) + 2 q p m gamma",
            ("alpha_inter", "beta_inter", "alpha_intra", "beta_intra", "gamma"), hierarchical_terms),
    Formula("linear_sync", "(p-1)/w alpha + (p-1) (alpha_msg + m beta)  (w = p-1 when 0 or larger)",
            ("alpha_msg", "beta", "alpha"), linear_sync_terms),
    Formula("bine", "lg p (alpha + p/2 m beta) at powers of two, else pairwise's (p-1) (alpha + m beta)",
            ("alpha", "beta"), bine_terms),
    Formula("dimensional", "sum_k (n_k-1) (alpha + p/n_k m beta) + 2 d p m gamma  (grid n_1 x .. x n_d)",
            ("alpha", "beta", "gamma"), dimensional_terms),
    Formula("bruck_zero_copy", "R alpha + B m beta  (Bruck's R rounds, B blocks sent; no copies)",
            ("alpha", "beta"), bruck_zero_copy_terms),
    Formula("multileader", "2 alpha_intra + 2 (c-1) p m beta_intra + (L-1) (alpha_intra + c^2 m beta_intra)"
            " + (N-1) L (alpha_inter + c^2 m beta_inter) + 2 c p m gamma  (L leaders per node, c = q/L)",
            ("alpha_inter", "beta_inter", "alpha_intra", "beta_intra", "gamma"), multileader_terms),
    Formula("locality_aware", "(N-1) G (alpha_inter + c m beta_inter) + (G-1) (alpha_intra + c m beta_intra)"
            " + (c-1) (alpha_intra + (p/c) m beta_intra) + 2 p m gamma  (G groups per node, c = q/G)",
            ("alpha_inter", "beta_inter", "alpha_intra", "beta_intra", "gamma"), locality_aware_terms),
    Formula("onesided", "2 ceil(lg p) alpha + (p-1) (alpha_msg + m beta)  (pscw: 2 alpha + 3 (p-1) alpha_msg"
            " + (p-1) m beta)", ("alpha_msg", "beta", "alpha"), onesided_terms),
    Formula("parallel_split", "(f + 2s[p odd]) alpha + (g-1) alpha_msg + ((g-1) f + (f-1) g + (4s-2)[p odd]) m beta"
            " + (f-1) g m gamma  (f as acoll lowers it, g = p div f, s = min(8, p-1))",
            ("alpha", "beta", "alpha_msg", "gamma"), parallel_split_terms),
)}
GENERIC = Formula("generic", "ceil(lg p) alpha + (p-1) m beta", ("alpha", "beta"), generic_terms)


def formula_for(algorithm: str) -> Formula:
    """The formula of an algorithm; native and unknown (plug-in) algorithms get the generic one."""
    return FORMULAS.get(algorithm, GENERIC)


@dataclass(frozen=True)
class Residual:
    """One measured point beside the model's value for it."""

    nprocs: int
    nnodes: int
    bytes_per_peer: int
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """Relative error of the model, |predicted - measured| / measured."""
        return abs(self.predicted - self.measured) / self.measured


@dataclass
class Fit:
    """A formula fitted to one series (algorithm + options) of measured medians."""

    algorithm: str
    options: str
    formula: Formula
    params: dict[str, float]
    status: dict[str, str]  # per parameter: fitted, folded (into others), or assumed (from X)
    residuals: list[Residual]
    ppn: float  # ranks per node assumed when predicting other process counts
    nodes: dict[int, int] = field(default_factory=dict)  # measured process count -> nodes
    context: tuple[str, ...] = PLAIN  # timing, mesh, groups, collective, workload

    @property
    def nprocs(self) -> list[int]:
        """The measured process counts."""
        return sorted(self.nodes)

    @property
    def label(self) -> str:
        """Series name as plots and tables show it, e.g. 'bruck:radix=4 [mesh 2x4 groups z]'."""
        return label(self.algorithm, self.options) + context_text(self.context)

    @property
    def error(self) -> float:
        """Median relative error over the measured points."""
        return median(r.error for r in self.residuals)

    def placement(self, nprocs: int) -> Placement:
        """The placement assumed for a process count: the measured one, else the same ranks per node."""
        if nprocs in self.nodes:
            return Placement(nprocs, self.nodes[nprocs])
        return Placement(nprocs, max(1, math.ceil(nprocs / self.ppn)))

    def predict(self, nprocs: int, size: float) -> float:
        """Predicted seconds for one all-to-all of `size` bytes per peer on `nprocs` processes."""
        return self.predict_on(self.placement(nprocs), size)

    def predict_on(self, placement: Placement, size: float) -> float:
        """Predicted seconds on a given placement (process count and nodes)."""
        terms = self.formula.terms(placement, size, series_options(self.algorithm, self.options))
        return sum(c * self.params.get(k, 0.0) for k, c in terms.items())

    def predict_on_fabric(self, placement: Placement, size: float, net: Fabric) -> float:
        """Predicted seconds on a topology: the bandwidth terms scaled by its busiest-link load over a switch's."""
        options = series_options(self.algorithm, self.options)
        terms = self.formula.terms(placement, size, options)
        ratio = contention.against_switch(self.algorithm, placement.nprocs, net, options)
        scaled = {k: c * ratio if k in ("beta", "beta_inter") else c for k, c in terms.items()}
        return sum(c * self.params.get(k, 0.0) for k, c in scaled.items())

    def latency(self, nprocs: int) -> float:
        """The latency term L(p): the time at zero bytes."""
        return self.predict(nprocs, 0.0)

    def slope(self, nprocs: int) -> float:
        """The bandwidth term per byte per peer, S(p)."""
        return self.predict(nprocs, 1.0) - self.latency(nprocs)

    def crossover(self, nprocs: int) -> float:
        """Bytes per peer where the latency and the bandwidth terms are equal (inf if no slope)."""
        return crossover(self.latency(nprocs), self.slope(nprocs))

    def describe(self) -> list[str]:
        """Each parameter for reading: alpha in us, beta and gamma in ns/B and GB/s, or why not fitted."""
        return [describe_param(k, self.params[k], self.status[k]) for k in self.formula.params]

    def bad_points(self, limit: float = BAD_FIT) -> list[Residual]:
        """Measured points the model misses by more than `limit` (relative)."""
        return [r for r in self.residuals if r.error > limit]


def describe_param(name: str, value: float, status: str) -> str:
    """'alpha=5.2us', 'beta=0.4ns/B (2.5 GB/s)', 'gamma folded', 'alpha=0 (at its bound)'."""
    if status != "fitted":
        return f"{name} {status}"
    if value == 0:
        return f"{name}=0 (at its bound)"
    if name.startswith("alpha"):
        return f"{name}={value * 1e6:.3g}us"
    return f"{name}={value * 1e9:.3g}ns/B ({1e-9 / value:.3g} GB/s)"


def crossover(latency: float, slope: float) -> float:
    """m* with latency == slope * m*; inf when nothing depends on m."""
    return latency / slope if slope > 0 else math.inf


def fit(rows: Iterable[Row]) -> list[Fit]:
    """Fit every series (algorithm, options, context) of the valid rows with two or more points."""
    series: dict[tuple, list[Row]] = {}
    for row in rows:
        if row.valid and row_placement(row).nprocs >= 2 and row.t_p50_us > 0 and not math.isnan(row.t_p50_us):
            series.setdefault((row.algorithm, row.options, context_of(row)), []).append(row)
    if not series:
        raise BadResults("no valid measured points with 2 or more processes to fit")
    return [fit_series(alg, opts, points, context)
            for (alg, opts, context), points in sorted(series.items()) if len(points) >= 2]


def context_of(row: Row) -> tuple[str, ...]:
    """The row's timing mode, mesh, groups, collective and workload."""
    return tuple(str(getattr(row, column)) for column in CONTEXT)


def context_text(context: tuple[str, ...]) -> str:
    """'' for a plain run, else e.g. ' [mesh 2x4 groups z]', ' [pipelined timing]' or ' [alltoallv zipf:s=1.1]'."""
    where = dict(zip(CONTEXT, context))
    timing, mesh, groups = where.pop("timing"), where.pop("mesh"), where.pop("groups")
    collective, workload = where.pop("collective"), where.pop("workload")
    plain = (KEY_DEFAULTS["collective"], KEY_DEFAULTS["workload"])
    parts = ([f"mesh {mesh} groups {groups}"] if mesh or groups else []) + \
        ([f"{timing} timing"] if timing != KEY_DEFAULTS["timing"] else []) + \
        ([f"{collective} {workload}"] if (collective, workload) != plain else []) + \
        [f"{column} {value}" for column, value in where.items() if value != KEY_DEFAULTS.get(column, "")]
    return f" [{', '.join(parts)}]" if parts else ""


def row_placement(row: Row) -> Placement:
    """The communicator an all-to-all of the row ran on: the whole run, or one replica group.

    A group is assumed packed onto as few nodes as the run's ranks per node allow.
    """
    if row.group_size:
        nodes = 1 if row.nnodes <= 1 else math.ceil(row.group_size / max(row.ppn, 1))
        return Placement(row.group_size, nodes)
    return Placement(row.nprocs, max(row.nnodes, 1))


def fit_series(algorithm: str, options: str, rows: list[Row], context: tuple[str, ...] = PLAIN) -> Fit:
    """Least squares on relative error, parameters >= 0, over the terms the points can tell apart."""
    formula = formula_for(algorithm)
    opts = series_options(algorithm, options)
    placements = [row_placement(r) for r in rows]
    measured = np.array([r.t_p50_us * 1e-6 for r in rows])
    columns = [[formula.terms(placement, r.bytes_per_peer, opts).get(k, 0.0) for k in formula.params]
               for placement, r in zip(placements, rows)]
    design = np.array(columns, dtype=float) / measured[:, None]  # relative residuals
    kept, status = separable(design, formula.params)
    values = nonnegative_lstsq(design[:, kept], np.ones(len(rows)))
    params = dict.fromkeys(formula.params, 0.0)
    params.update({formula.params[j]: float(v) for j, v in zip(kept, values)})
    assume_missing_links(params, status)
    largest = max(placements, key=lambda placement: placement.nprocs)
    result = Fit(algorithm, options, formula, params, status, [], largest.ppn,
                 {placement.nprocs: placement.nnodes for placement in placements}, context)
    result.residuals = [Residual(placement.nprocs, placement.nnodes, r.bytes_per_peer, t,
                                 result.predict_on(placement, r.bytes_per_peer))
                        for placement, r, t in zip(placements, rows, measured)]
    return result


def separable(design: np.ndarray, names: tuple[str, ...]) -> tuple[list[int], dict[str, str]]:
    """Columns to fit, in priority order, skipping those the points cannot tell apart.

    A column of zeros was not measured at all (e.g. no inter-node points). A column almost in
    the span of the columns kept before it (e.g. gamma vs beta at one process count) is folded:
    held at 0, its cost absorbed by the others.
    """
    kept: list[int] = []
    status: dict[str, str] = {}
    for j, name in enumerate(names):
        column = design[:, j]
        norm = np.linalg.norm(column)
        if norm == 0:
            status[name] = "unmeasured"
            continue
        unit = column / norm
        if kept:
            basis, _ = np.linalg.qr(design[:, kept])
            unit = unit - basis @ (basis.T @ unit)
        if np.linalg.norm(unit) < MIN_SEPARATION:
            status[name] = "folded"
        else:
            status[name] = "fitted"
            kept.append(j)
    return kept, status


def nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min |a x - b| with x >= 0, exactly, by trying every support (a has at most 5 columns).

    The optimum is the unconstrained solution on its own support, so the best feasible one wins.
    """
    n = a.shape[1]
    best, best_x = math.inf, np.zeros(n)
    for size in range(1, n + 1):
        for support in combinations(range(n), size):
            x_sub, *_ = np.linalg.lstsq(a[:, support], b, rcond=None)
            if (x_sub < 0).any():
                continue
            x = np.zeros(n)
            x[list(support)] = x_sub
            residual = float(np.linalg.norm(a @ x - b))
            if residual < best:
                best, best_x = residual, x
    return best_x


def assume_missing_links(params: dict[str, float], status: dict[str, str]) -> None:
    """A link class never measured takes the other class's value (uniform links assumed)."""
    for intra, inter in LINK_PAIRS:
        for missing, known in ((intra, inter), (inter, intra)):
            if status.get(missing) == "unmeasured" and status.get(known) == "fitted":
                params[missing] = params[known]
                status[missing] = f"assumed = {known}"


def predictable(fits: list[Fit]) -> dict[tuple[str, ...], list[Fit]]:
    """Fits by context, for those that can be predicted at other process counts (no mesh groups)."""
    by_context: dict[tuple[str, ...], list[Fit]] = {}
    for f in fits:
        where = dict(zip(CONTEXT, f.context))
        if not (where["mesh"] or where["groups"]):
            by_context.setdefault(f.context, []).append(f)
    return by_context


def predicted_times(fits: list[Fit], nprocs: int, sizes: list[int]) -> dict[str, list[float]]:
    """Predicted seconds per series label, one per size, at `nprocs`."""
    return {f.label: [f.predict(nprocs, m) for m in sizes] for f in fits}


# --- the predicted decision table (a2a.record.decision, marked as predicted) --------

def predicted_cell(fits: list[Fit], nprocs: int, size: int) -> dict[str, Any]:
    """The predicted winner at one size, with every series' predicted time as candidates."""
    ranked = sorted(((f.predict(nprocs, size) * 1e6, f) for f in fits), key=lambda c: c[0])
    return {**decision.decision_cell(size, [(f.algorithm, f.options, us) for us, f in ranked]), "predicted": True}


def predicted_decision(fits: list[Fit], nprocs: list[int], sizes: list[int],
                       sources: list[dict[str, Any]], dtype: str) -> dict[str, Any]:
    """A decision document (schema a2a-decision/1) from the model, marked as predicted."""
    libraries = sorted({s["mpi_library"] for s in sources if s.get("mpi_library")})
    tables = []
    for context, group in sorted(predictable(fits).items()):
        for p in nprocs:
            tables.append({"nprocs": p, **dict(zip(CONTEXT, context)), "predicted": True,
                           "ranges": decision.ranges([predicted_cell(group, p, m) for m in sizes])})
    return {
        "schema": decision.SCHEMA, "predicted": True, "metric": "median", "alpha": None,
        "dtype": dtype, "context_columns": list(decision.CONTEXT_COLUMNS),
        "mpi_library": libraries[0] if len(libraries) == 1 else libraries or None,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "sources": sources, "model": [fit_summary(f) for f in fits], "tables": tables,
    }


def fit_summary(f: Fit) -> dict[str, Any]:
    """A fit as plain JSON: formula, parameters (seconds, seconds per byte) and their status."""
    return {"algorithm": f.algorithm, "options": f.options, **dict(zip(CONTEXT, f.context)),
            "formula": f.formula.text,
            "params": {k: decision.rounded(v) for k, v in f.params.items()}, "status": f.status,
            "median_relative_error": decision.rounded(f.error), "points": len(f.residuals),
            "measured_nprocs": f.nprocs, "ppn_assumed": decision.rounded(f.ppn)}


def measured_sizes(rows: Iterable[Row]) -> list[int]:
    """The distinct sizes of the valid points, ascending."""
    return sorted({r.bytes_per_peer for r in rows if r.valid})
