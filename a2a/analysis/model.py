"""The Hockney (alpha-beta) cost model: least-squares fits of each algorithm's formula, predictions.

Each algorithm states its formula in its own file (a2a.algos.cost has the notation); this
module fits the parameters to measured medians, reports the fit, and predicts other process
counts and topologies. Every coefficient of a beta or gamma is proportional to m, so
T(m) = L(p) + S(p) m, and the crossover between the latency-bound and the bandwidth-bound
regime is m* = L(p) / S(p). It reads results (numpy only) and never imports MPI.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from itertools import combinations
from statistics import median
from typing import Any

import numpy as np

from a2a.algos.cost import Formula, Placement
from a2a.algos.facts import formula, matrix_cost
from a2a.algos.options import schedule_options
from a2a.algos.registry import algorithms, with_defaults
from a2a.analysis import contention
from a2a.analysis.decide import decision_cell
from a2a.errors import BadInput, BadResults
from a2a.fabric import Fabric
from a2a.record import decision
from a2a.record.results import KEY_DEFAULTS, Row, label

BAD_FIT = 0.5  # a point whose relative error exceeds this is reported as badly modelled
MIN_SEPARATION = 0.05  # sine of the angle below which two terms cannot be told apart
LINK_PAIRS = (("alpha_intra", "alpha_inter"), ("beta_intra", "beta_inter"))
CONTEXT = tuple(c for c in decision.CONTEXT_COLUMNS if c != "nprocs")  # what makes a separate series
PLAIN = tuple(KEY_DEFAULTS.get(c, "") for c in CONTEXT)  # their values for a plain run: synchronised timing, no mesh


def series_options(algorithm: str, text: str) -> dict[str, str]:
    """A series' schedule options ('radix=4;...') with the algorithm's registered defaults for those left out."""
    return schedule_options(with_defaults(algorithm, decision.parse_options(text)))


def formula_for(algorithm: str) -> Formula:
    """The cost formula an algorithm registered; native and plug-ins without one get the generic one."""
    return formula(algorithm)


def matrix_terms(algorithm: str, counts: np.ndarray, itemsize: int, **options: str) -> dict[str, float]:
    """An alltoallv's {"rounds", "bytes"} on a count matrix, from the cost its algorithm registered."""
    cost = matrix_cost(algorithm)
    if cost is None:
        raise BadInput(f"{algorithm} has no alltoallv cost on a count matrix; algorithms with one: "
                       f"{', '.join(n for n in algorithms('alltoallv') if matrix_cost(n))}")
    return cost.terms(counts, itemsize, with_defaults(algorithm, {k: str(v) for k, v in options.items()}))


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

def predicted_cell(fits: list[Fit], nprocs: int, size: int) -> decision.Cell:
    """The predicted winner at one size, with every series' predicted time as candidates."""
    ranked = sorted(((f.predict(nprocs, size) * 1e6, f) for f in fits), key=lambda c: c[0])
    return replace(decision_cell(size, [(f.algorithm, f.options, us) for us, f in ranked]), predicted=True)


def predicted_decision(fits: list[Fit], nprocs: list[int], sizes: list[int],
                       sources: list[dict[str, Any]], dtype: str) -> decision.Decision:
    """A decision document (a2a.record.decision's schema) from the model, marked as predicted."""
    libraries = sorted({s["mpi_library"] for s in sources if s.get("mpi_library")})
    tables = []
    for context, group in sorted(predictable(fits).items()):
        for p in nprocs:
            tables.append(decision.Table({"nprocs": p, **dict(zip(CONTEXT, context))},
                                         decision.ranges([predicted_cell(group, p, m) for m in sizes]), predicted=True))
    return decision.Decision(
        decision.SCHEMA, "median", None, tuple(tables), dtype, context_columns=decision.CONTEXT_COLUMNS,
        mpi_library=libraries[0] if len(libraries) == 1 else libraries or None,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), sources=tuple(sources), predicted=True,
        model=tuple(fit_summary(f) for f in fits))


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
