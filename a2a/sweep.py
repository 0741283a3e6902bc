"""The grid: process counts x sizes x algorithms, measured on sub-communicators of the world."""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from .errors import A2AError
from .mpi import idle_barrier
from .netstat import tcp_timeouts
from .registry import get
from .results import Row, point_key
from .stats import Stats, bandwidths
from .timing import time_sync
from .topology import node_groups
from .verify import expected_pattern, send_pattern


@dataclass(frozen=True)
class Variant:
    """An algorithm with its resolved options."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def options_text(self) -> str:
        """Options as results.csv stores them: key=value pairs joined by ';', sorted by key."""
        return ";".join(f"{k}={v}" for k, v in sorted(self.options.items()))

    @property
    def label(self) -> str:
        """Name, with options when it has any: bruck:radix=4."""
        return ":".join([self.name, *(f"{k}={v}" for k, v in sorted(self.options.items()))])


@dataclass(frozen=True)
class SweepConfig:
    """Everything a sweep needs; stored in meta.json so that --resume can rebuild it."""

    sizes: list[int]
    dtype: str
    variants: list[Variant]
    nprocs: list[int]
    warmup: int = 1
    iterations: int = 25
    max_time_per_point: float = 10.0
    stall_threshold: float = 0.1
    check: bool = True
    timeout: float = 300.0
    max_memory: int = 1 << 30
    ppn: int = 0
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SweepConfig":
        """Rebuild from as_dict() output."""
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["variants"] = [Variant(v["name"], dict(v["options"])) for v in data["variants"]]
        return cls(**values)


@dataclass(frozen=True)
class Point:
    """One measurement: a variant at a size on the first `nprocs` ranks."""

    nprocs: int
    bytes_per_peer: int
    variant: Variant
    dtype: str

    @property
    def key(self) -> tuple:
        """The results key of this point."""
        return point_key({"nprocs": self.nprocs, "algorithm": self.variant.name,
                          "options": self.variant.options_text, "dtype": self.dtype,
                          "bytes_per_peer": self.bytes_per_peer})

    def __str__(self) -> str:
        return f"{self.variant.label} at {self.bytes_per_peer} B per peer on {self.nprocs} ranks"


def points(config: SweepConfig, nprocs: int) -> list[Point]:
    """A process count's points: sizes ascending, algorithms in a seeded shuffle per size.

    The shuffle keeps any algorithm from always running first (cold) or last (after the
    others warmed caches and links); the seed makes the order the same on every rank.
    """
    order: list[Point] = []
    for size in config.sizes:
        variants = list(config.variants)
        random.Random(f"{config.seed}:{nprocs}:{size}").shuffle(variants)
        order += [Point(nprocs, size, v, config.dtype) for v in variants]
    return order


class Observer:
    """What rank 0 hears during a sweep; the default hears nothing."""

    def start_point(self, point: Point) -> None:
        """A point is about to be measured."""

    def end_point(self, row: Row, samples: np.ndarray) -> None:
        """A point is measured (or skipped): its row and samples."""

    def end_nprocs(self, nprocs: int, rows: list[Row]) -> None:
        """Every point of a process count is done."""


def run_sweep(world: Any, config: SweepConfig, done: set[tuple], observer: Observer,
              stop_requested: Callable[[], bool]) -> bool:
    """Measure every point not in `done`; return False if a stop request cut the sweep short."""
    from mpi4py import MPI

    for nprocs in config.nprocs:
        member = world.rank < nprocs
        sub = world.Split(0 if member else MPI.UNDEFINED, world.rank)
        stopped, rows = False, []
        if member:
            todo = [p for p in points(config, nprocs) if p.key not in done]
            stopped, rows = _measure_all(sub, config, todo, observer, stop_requested)
            sub.Free()
        idle_barrier(world)  # ranks outside this count sleep here instead of spinning
        if world.allreduce(stopped or stop_requested(), op=MPI.LOR):
            return False
        if world.rank == 0:
            observer.end_nprocs(nprocs, rows)
    return True


def _measure_all(sub: Any, config: SweepConfig, todo: list[Point], observer: Observer,
                 stop_requested: Callable[[], bool]) -> tuple[bool, list[Row]]:
    shape = Shape.of(sub, config.ppn)
    rows = []
    for point in todo:
        if sub.rank == 0:
            observer.start_point(point)
        measured = measure(sub, point, config, shape, stop_requested)
        if measured is None:
            return True, rows
        row, samples = measured
        rows.append(row)
        if sub.rank == 0:
            observer.end_point(row, samples)
    return False, rows


@dataclass(frozen=True)
class Shape:
    """Nodes of a communicator: as algorithms see them (maybe virtual) and as hosts really are."""

    nnodes: int
    ppn: int
    host_leader: bool

    @classmethod
    def of(cls, comm: Any, ppn: int) -> "Shape":
        """Find the nodes (collective)."""
        hosts = node_groups(comm)
        nodes = node_groups(comm, ppn) if ppn else hosts
        return cls(len(nodes), max(map(len, nodes)), any(h[0] == comm.rank for h in hosts))


def measure(comm: Any, point: Point, config: SweepConfig, shape: Shape,
            stop_requested: Callable[[], bool]) -> tuple[Row, np.ndarray] | None:
    """Plan, warm up, time and check one point (collective); None if a stop was requested."""
    dtype = np.dtype(point.dtype)
    count = point.bytes_per_peer // dtype.itemsize
    row = Row(point.nprocs, shape.nnodes, shape.ppn, point.variant.name, point.variant.options_text,
              dtype.name, count, point.bytes_per_peer, iterations=0, warmup=config.warmup)
    need = 2 * point.nprocs * point.bytes_per_peer
    if need > config.max_memory:
        row.note = f"skipped: buffers need {need} B per rank, above --max-memory {config.max_memory}"
        return row, np.zeros(0)
    sendbuf = send_pattern(dtype, comm.size, comm.rank, count)
    recvbuf = np.zeros_like(sendbuf)
    timeouts_before = _sum_over_hosts(comm, shape)
    try:
        plan = get(point.variant.name).plan(comm, sendbuf, recvbuf, **point.variant.options)
    except A2AError as refused:  # raised alike on every rank (the checks are collective)
        row.note = f"refused: {refused}"
        return row, np.zeros(0)
    try:
        samples, stopped = time_sync(comm, plan.run, config.warmup, config.iterations,
                                     config.max_time_per_point, stop_requested)
        if stopped:
            return None
        wrong = _check(comm, plan, recvbuf, dtype, count) if config.check else []
    finally:
        plan.free()
    timeouts_after = _sum_over_hosts(comm, shape)
    _fill(row, Stats.of(samples, config.stall_threshold), config)
    row.valid = not wrong
    if wrong:
        row.note = f"WRONG RESULT on ranks {_ranges(wrong)}"
    if timeouts_before is not None and timeouts_after is not None:
        row.tcp_timeouts = timeouts_after - timeouts_before
    return row, samples


def _check(comm: Any, plan: Any, recvbuf: np.ndarray, dtype: np.dtype, count: int) -> list[int]:
    """Run once more into a cleared buffer; return the ranks whose result is wrong."""
    recvbuf[...] = 0
    plan()
    right = np.array_equal(recvbuf, expected_pattern(dtype, comm.size, comm.rank, count))
    return [rank for rank, ok in enumerate(comm.allgather(right)) if not ok]


def _fill(row: Row, stats: Stats, config: SweepConfig) -> None:
    us = 1e6
    row.iterations = stats.n
    row.t_min_us, row.t_p50_us, row.t_p90_us = stats.min * us, stats.p50 * us, stats.p90 * us
    row.t_p95_us, row.t_p99_us, row.t_mean_us = stats.p95 * us, stats.p99 * us, stats.mean * us
    row.t_max_us, row.t_std_us = stats.max * us, stats.std * us
    row.stalls, row.outliers = stats.stalls, stats.outliers
    row.algbw_GBps, row.busbw_GBps = bandwidths(row.bytes_per_peer, row.nprocs, stats.p50)
    if stats.n < config.iterations:
        row.note = f"stopped after {stats.n} iterations (--max-time-per-point {config.max_time_per_point:g} s)"


def _sum_over_hosts(comm: Any, shape: Shape) -> int | None:
    """TCP timeouts summed over hosts (one reader per host), or None if any host cannot tell."""
    mine = tcp_timeouts() if shape.host_leader else 0
    local = np.array([mine or 0, mine is None], dtype=np.int64)
    total = np.empty_like(local)
    comm.Allreduce(local, total)  # sums: the count, and how many hosts could not tell
    return None if total[1] else int(total[0])


def _ranges(ranks: list[int]) -> str:
    """[0,1,2,5] -> '0-2,5'."""
    spans: list[list[int]] = []
    for r in ranks:
        if spans and spans[-1][1] == r - 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)
