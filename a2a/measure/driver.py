"""The MPI driver: every point of the grid planned, timed and checked on sub-communicators of the world."""
from __future__ import annotations

from dataclasses import dataclass
from math import nan
from typing import Any, Callable

import numpy as np

from a2a.algos.nodes import node_groups
from a2a.algos.registry import get
from a2a.errors import A2AError
from a2a.measure.cache import buffer_sets, cycling, evict
from a2a.measure.clock import GlobalClock, synchronise
from a2a.measure.environment import (
    by_machine,
    cores_of_this_rank,
    describe_oversubscription,
    emulated_topology,
    machine_of_this_rank,
    oversubscription,
)
from a2a.measure.grid import Point, SweepConfig, points
from a2a.measure.mesh import Layout, group_comm
from a2a.measure.timing import harness_cost, time_global, time_pipelined, time_sync
from a2a.measure.traffic import traffic_of
from a2a.mpi import idle_barrier
from a2a.netstat import stall_counters
from a2a.record.results import Row
from a2a.record.stats import Stats


@dataclass(frozen=True)
class Context:
    """What holds for every point of a process count: nodes, crowding, the harness's own cost, the clock."""

    nnodes: int
    ppn: int
    host_leader: bool
    crowded: dict[str, dict[str, int]]
    harness: dict[str, float]
    clock: GlobalClock | None = None

    @classmethod
    def of(cls, comm: Any, ppn: int, timing: str = "sync") -> "Context":
        """Find the nodes, who shares cores, what timing costs, and for global timing the clocks (collective)."""
        from mpi4py import MPI

        hosts = node_groups(comm)
        nodes = node_groups(comm, ppn) if ppn else hosts
        placement = (machine_of_this_rank(), MPI.Get_processor_name(), cores_of_this_rank())
        crowded = oversubscription(by_machine(comm.allgather(placement)))
        return cls(len(nodes), max(map(len, nodes)), any(h[0] == comm.rank for h in hosts), crowded,
                   harness_cost(comm), synchronise(comm) if timing == "global" else None)


class Observer:
    """What rank 0 hears during a sweep; the default hears nothing."""

    def start_nprocs(self, nprocs: int, context: Context, layouts: list[Layout]) -> None:
        """A process count begins."""

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
        todo = [p for p in points(config, nprocs) if p.key not in done]
        member = world.rank < nprocs and bool(todo)
        sub = world.Split(0 if member else MPI.UNDEFINED, world.rank)
        stopped, rows = False, []
        if member:
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
    context = Context.of(sub, config.ppn, config.timing)
    if sub.rank == 0:
        observer.start_nprocs(sub.size, context, [m for m in config.layouts if m.nprocs == sub.size])
    rows = []
    for point in todo:
        if sub.rank == 0:
            observer.start_point(point)
        measured = measure(sub, point, config, context, stop_requested)
        if measured is None:
            return True, rows
        row, samples = measured
        rows.append(row)
        if sub.rank == 0:
            observer.end_point(row, samples)
    return False, rows


def measure(comm: Any, point: Point, config: SweepConfig, context: Context,
            stop_requested: Callable[[], bool]) -> tuple[Row, np.ndarray] | None:
    """Plan, warm up, time and check one point (collective); None if a stop was requested.

    With a mesh layout the algorithm runs in every replica group at once; timing and checks
    still span all of `comm`, so a sample is the max over every rank of every group.
    """
    row = _blank_row(point, config, context)
    group = group_comm(comm, point.layout) if point.layout else comm
    try:
        return _time_and_check(comm, group, point, config, context, row, stop_requested)
    finally:
        if group is not comm:
            group.Free()


def _time_and_check(comm: Any, group: Any, point: Point, config: SweepConfig, context: Context, row: Row,
                    stop_requested: Callable[[], bool]) -> tuple[Row, np.ndarray] | None:
    try:
        traffic = traffic_of(point.collective, point.workload, group.size, point.bytes_per_peer, point.dtype,
                             config.seed)
    except A2AError as refused:  # the matrix is the same on every rank, so is the refusal
        return _noted(row, f"refused: {refused}")
    row.imbalance = traffic.imbalance
    if traffic.most_bytes > config.max_memory:
        return _noted(row, f"skipped: buffers need {traffic.most_bytes} B per rank, above --max-memory "
                           f"{config.max_memory}")
    sets, short = buffer_sets(group, point.cache, traffic.buffers(group.rank),
                              config.warmup + 2 * config.iterations + 10, config.max_memory)
    tcp_before = _sum_over_hosts(comm, context)
    algorithm, plans = get(point.variant.name), []
    try:
        try:
            for sendbuf, recvbuf in sets:
                plans.append(traffic.plan(algorithm, group, sendbuf, recvbuf, point.variant.options))
        except A2AError as refused:  # raised alike on every rank (the checks are collective)
            return _noted(row, f"refused: {refused}")
        row.note = "; ".join(n for n in (row.note, plans[0].note) if n)  # e.g. bine's fallback to pairwise
        if point.cache == "cold":
            evict()
        samples, stopped, starts = _samples(comm, cycling([plan.run for plan in plans]), point, config, context,
                                            stop_requested)
        if stopped:
            return None
        wrong = _check(comm, plans[0], sets[0][1], traffic.expected(group.rank)) if config.check else []
    finally:
        for plan in plans:
            plan.free()
    tcp_after = _sum_over_hosts(comm, context)
    stats = Stats.of(samples, config.stall_threshold)
    _fill(row, stats, config, point.timing)
    row.algbw_GBps, row.busbw_GBps = traffic.bandwidths(stats.p50)  # from the bytes the traffic moves
    row.valid = not wrong
    for note in (short, starts):
        if note:
            _noted(row, note)
    if wrong:
        _noted(row, f"WRONG RESULT on ranks {_ranges(wrong)}")
    if tcp_before is not None and tcp_after is not None:
        row.tcp_timeouts, row.tcp_loss_probes = (after - before for after, before in zip(tcp_after, tcp_before))
    return row, samples


def _samples(comm: Any, run: Callable[[], Any], point: Point, config: SweepConfig, context: Context,
             stop_requested: Callable[[], bool]) -> tuple[np.ndarray, bool, str]:
    """The point's samples under its timing, whether a stop cut them short, and what the timing noted."""
    if point.timing == "pipelined":
        return (*time_pipelined(comm, run, config.warmup, config.iterations, stop_requested), "")
    if point.timing == "global":
        timed = time_global(comm, run, config.warmup, config.iterations, config.max_time_per_point,
                            stop_requested, context.clock)
        return timed.samples, timed.stopped, timed.note
    return (*time_sync(comm, run, config.warmup, config.iterations, config.max_time_per_point, stop_requested), "")


def _blank_row(point: Point, config: SweepConfig, context: Context) -> Row:
    layout = point.layout
    return Row(point.nprocs, context.nnodes, context.ppn, point.algorithm, point.options, point.dtype,
               point.bytes_per_peer // np.dtype(point.dtype).itemsize, point.bytes_per_peer, warmup=config.warmup,
               timing=point.timing, note=describe_oversubscription(context.crowded), topology=emulated_topology(),
               collective=point.collective, workload=point.workload, imbalance=1.0 if point.bytes_per_peer else nan,
               cache=point.cache, mesh=point.mesh, groups=point.groups,
               group_size=layout.group_size if layout else None, ngroups=layout.ngroups if layout else None)


def _noted(row: Row, note: str) -> tuple[Row, np.ndarray]:
    """Put `note` first in the row's note (skip and refusal notes are read by their prefix)."""
    row.note = "; ".join(n for n in (note, row.note) if n)
    return row, np.zeros(0)


def _check(comm: Any, plan: Any, recvbuf: np.ndarray, expected: np.ndarray) -> list[int]:
    """Run once more into a cleared buffer; return the ranks (of comm) whose result is wrong."""
    recvbuf[...] = 0
    plan()
    right = np.array_equal(recvbuf, expected)
    return [rank for rank, ok in enumerate(comm.allgather(right)) if not ok]


def _fill(row: Row, stats: Stats, config: SweepConfig, timing: str) -> None:
    us = 1e6
    row.iterations = config.iterations if timing == "pipelined" else stats.n
    row.t_min_us, row.t_p50_us, row.t_p90_us = stats.min * us, stats.p50 * us, stats.p90 * us
    row.t_p95_us, row.t_p99_us, row.t_mean_us = stats.p95 * us, stats.p99 * us, stats.mean * us
    row.t_max_us, row.t_std_us = stats.max * us, stats.std * us
    row.stalls, row.outliers = stats.stalls, stats.outliers
    if timing != "pipelined" and stats.n < config.iterations:
        _noted(row, f"stopped after {stats.n} iterations (--max-time-per-point {config.max_time_per_point:g} s)")


def _sum_over_hosts(comm: Any, context: Context) -> list[int] | None:
    """TCP timeouts and loss probes summed over hosts (one reader per host), or None if any host cannot tell."""
    mine = stall_counters() if context.host_leader else [0, 0]
    local = np.array([*(mine or [0, 0]), mine is None], dtype=np.int64)
    total = np.empty_like(local)
    comm.Allreduce(local, total)  # sums: the counts, and how many hosts could not tell
    return None if total[2] else [int(total[0]), int(total[1])]


def _ranges(ranks: list[int]) -> str:
    """[0,1,2,5] -> '0-2,5'."""
    spans: list[list[int]] = []
    for r in ranks:
        if spans and spans[-1][1] == r - 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)
