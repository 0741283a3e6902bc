"""The MPI driver: every point of the grid planned, timed and checked on sub-communicators of the world."""
from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field, replace
from functools import partial
from math import nan
from pathlib import Path
from typing import Any, Callable

import numpy as np

from a2a.algos.nodes import node_groups
from a2a.algos.registry import get
from a2a.errors import A2AError, BadConfig
from a2a.measure.cache import buffer_sets, cycling, evict
from a2a.measure.clock import GlobalClock, synchronise
from a2a.measure.environment import (
    by_machine,
    cores_of_this_rank,
    describe_oversubscription,
    describe_run,
    emulated_topology,
    machine_of_this_rank,
    oversubscription,
)
from a2a.measure.overlap import Work, pure_seconds, time_overlap
from a2a.measure.timing import harness_cost, time_global, time_imb, time_pipelined, time_sync
from a2a.measure.traffic import traffic_of
from a2a.mpi import abort_job, abort_on_error, idle_barrier, ranks_on_this_node
from a2a.netstat import stall_counters
from a2a.record.overlap import overlap_figures
from a2a.record.results import FAILED, KEY_COLUMNS, KEY_DEFAULTS, NATIVE, OVERLAP_QUANTITIES, Row
from a2a.record.stats import Stats
from a2a.sweep.config import OVERLAP, PER_RANK_MEANS, SweepConfig
from a2a.sweep.grid import Point
from a2a.sweep.mesh import Layout, group_comm
from a2a.sweep.session import (
    Backend,
    Observer,
    Output,
    Session,
    StopRequest,
    SweepState,
    resume_command,
    resume_state,
)


def set_thread_level() -> None:
    """Ask for MPI_THREAD_SERIALIZED when every rank has a core, unless the user chose a level.

    At mpi4py's default MULTIPLE, MPICH takes a lock on every call: about 0.5 us more at 8 B
    per peer than C benchmarks (OSU, IMB) measure (docs/harness.md). But when ranks outnumber
    cores, that lock's yielding keeps spinning ranks off the CPU (docs/harness.md has the
    numbers), so crowded nodes keep MULTIPLE. SERIALIZED, not FUNNELED, because the watchdog
    calls MPI_Abort from its timer thread.
    """
    import mpi4py

    if "MPI4PY_RC_THREAD_LEVEL" in os.environ:
        return
    if ranks_on_this_node() <= len(cores_of_this_rank()):
        mpi4py.rc.thread_level = "serialized"


def resume_measured(comm: Any, directory: Path, dtype: str | None = None, force: bool = False) -> SweepState:
    """The sweep of DIR/meta.json, refused under another MPI library or dtype unless forced."""
    from mpi4py import MPI

    state = resume_state(directory, "mpi")
    config = state.config
    if max(config.nprocs) > comm.size:
        raise BadConfig(f"{directory} sweeps up to {max(config.nprocs)} ranks; this job has {comm.size}; resume it "
                        f"with {resume_command('mpi', directory, max(config.nprocs))}")
    library, recorded = MPI.Get_library_version().strip(), state.meta.get("mpi_library") or ""
    if recorded and library != recorded and not force:
        raise BadConfig(f"{directory} was measured with {_library_name(recorded)}, but this job runs "
                        f"{_library_name(library)}; resume under the same library, or give --force-resume "
                        "to add this library's points to the record (meta.json lists each launch's library)")
    if dtype and dtype != config.dtype:
        if not force:
            raise BadConfig(f"{directory} was measured in {config.dtype}, not {dtype}; drop --dtype, or give "
                            f"--force-resume to add {dtype} points to the record")
        state.config = replace(config, dtype=dtype)
    return state


def _library_name(text: str) -> str:
    return _first_line(text) or "an unknown MPI library"


def measure_sweep(comm: Any, directory: Path, state: SweepState, output: Output, stop: StopRequest,
                  timeout: float) -> int:
    """Measure every point of the sweep not yet recorded; rank 0 keeps the record. The exit code, the same on
    every rank.

    A point's error fails that point (measure); any other error on any rank (rank 0's files, say) ends the whole
    job with its message.
    """
    with abort_on_error(comm):
        facts = {**describe_run(comm), "progress": state.progress_mode or None}
        if comm.rank == 0:
            backend = Backend("mpi", facts, table_details(state.config, facts["executor"]), timeout=timeout,
                              abort=partial(abort_job, comm, prefix_rank=False))
            observer: Observer = Session(directory, state, backend, output)
        else:
            observer = Observer()
        finished = run_sweep(comm, state, observer, stop)
        if comm.rank == 0:
            code = observer.finish("complete", state.later) if finished else observer.finish(f"terminated by "
                                                                                              f"{stop.name}")
        return comm.bcast(code if comm.rank == 0 else None, root=0)


def table_details(config: SweepConfig, executor: dict[str, Any]) -> str:
    """What a measured table's title says in parentheses: collective, timing (and under overlap timing, what posts
    executor=c's rounds), caches, units, stalls."""
    plain = (config.collective, config.workload) == (KEY_DEFAULTS["collective"], KEY_DEFAULTS["workload"])
    what = "" if plain else f"{config.collective}, workload {config.workload}; "
    cold = ", cold caches" if config.cache == "cold" else ""
    posted = executor.get("progress") if config.timing == OVERLAP else None
    rounds = f", executor=c progress: {posted}" if posted else ""
    return (f"{what}{config.timing} timing{rounds}{cold}; times in microseconds; "
            f"! = stalled, a sample >= fastest + {config.stall_threshold:g} s")


@dataclass(frozen=True)
class Context:
    """What holds for every point of a process count: nodes, crowding, the harness's own cost, the clock."""

    nnodes: int
    ppn: int
    host_leader: bool
    crowded: dict[str, dict[str, int]]
    harness: dict[str, float]
    clock: GlobalClock | None = None
    work: Work | None = None  # the overlap protocol's arithmetic, measured here
    phases: dict[tuple, tuple[int, float]] = field(default_factory=dict)  # the overlap protocol's, per point: _phase

    @classmethod
    def of(cls, comm: Any, ppn: int, timing: str = "sync") -> "Context":
        """Find the nodes, who shares cores, what timing costs, and for global timing the clocks (collective)."""
        from mpi4py import MPI

        hosts = node_groups(comm)
        nodes = node_groups(comm, ppn) if ppn else hosts
        placement = (machine_of_this_rank(), MPI.Get_processor_name(), cores_of_this_rank())
        crowded = oversubscription(by_machine(comm.allgather(placement)))
        return cls(len(nodes), max(map(len, nodes)), any(h[0] == comm.rank for h in hosts), crowded,
                   harness_cost(comm), synchronise(comm) if timing == "global" else None,
                   Work() if timing == OVERLAP else None)

    def facts(self, layouts: list[Layout]) -> dict[str, Any]:
        """What meta.json's by_nprocs keeps of it, with the replica groups of the process count's layouts."""
        return {"nnodes": self.nnodes, "ppn": self.ppn, "oversubscribed": self.crowded, "harness": self.harness,
                **({"clock": self.clock.report} if self.clock else {}),
                "replica_groups": [{"mesh": m.mesh_text, "groups": m.strategy, "members": m.groups()}
                                   for m in layouts]}


def run_sweep(world: Any, state: SweepState, observer: Observer, stop_requested: Callable[[], bool]) -> bool:
    """Measure every point not yet recorded; return False if a stop request cut the sweep short."""
    from mpi4py import MPI

    config = state.config
    for nprocs in config.nprocs:
        todo = [p for p in state.todo if p.nprocs == nprocs]
        member = world.rank < nprocs and bool(todo)
        sub = world.Split(0 if member else MPI.UNDEFINED, world.rank)
        stopped, rows = False, []
        if member:
            stopped, rows = _measure_all(sub, config, todo, state.ended, observer, stop_requested)
            sub.Free()
        idle_barrier(world)  # ranks outside this count sleep here instead of spinning
        if world.allreduce(stopped or stop_requested(), op=MPI.LOR):
            return False
        if world.rank == 0:
            observer.end_nprocs(nprocs, rows)
    return True


def _measure_all(sub: Any, config: SweepConfig, todo: list[Point], ended: dict[tuple, str], observer: Observer,
                 stop_requested: Callable[[], bool]) -> tuple[bool, list[Row]]:
    context = Context.of(sub, config.ppn, config.timing)
    if sub.rank == 0:
        observer.start_nprocs(sub.size, context.facts([m for m in config.layouts if m.nprocs == sub.size]))
    judge = sub.Dup()  # where the ranks agree on a point's failure, apart from every message of the point
    rows = []
    try:
        for point in todo:
            if sub.rank == 0:
                observer.start_point(point)
            measured = _skipped(point, context, ended[point.key]) if point.key in ended else \
                measure(sub, judge, point, config, context, stop_requested)
            if measured is None:
                return True, rows
            row, samples, detail = measured
            rows.append(row)
            if sub.rank == 0:
                observer.end_point(row, samples, detail)
    finally:
        judge.Free()
    return False, rows


Measured = tuple[Row, np.ndarray, str]  # the row, its samples, and the full text behind a failure's note


def _skipped(point: Point, context: Context, why: str) -> Measured:
    """The row of a point not run again: it ended an earlier launch."""
    row = point.row(context.nnodes, context.ppn)
    if why:
        _noted(row, f"skipped: {why}; resume does not run it again")
    return row, np.zeros(0), ""


def measure(comm: Any, judge: Any, point: Point, config: SweepConfig, context: Context,
            stop_requested: Callable[[], bool]) -> Measured | None:
    """Plan, warm up, time and check one point (collective); None if a stop was requested.

    An exception on any rank (a plug-in's, the library's, a refused argument) makes the point failed on every
    rank, with its one-line cause, and the sweep goes on, once every rank has come to agree on it (`judge`);
    ranks that do not come within AGREEMENT_SECONDS are still inside the exchange, and the job ends. With a mesh
    layout the algorithm runs in every replica group at once; timing and checks still span all of `comm`, so a
    sample is the max over every rank of every group.
    """
    row = point.row(context.nnodes, context.ppn, warmup=config.warmup, note=describe_oversubscription(context.crowded),
                    topology=emulated_topology(), imbalance=1.0 if point.bytes_per_peer else nan)
    group = group_comm(comm, point.layout) if point.layout else comm
    plans: list[Any] = []
    try:
        measured, problem = _time_and_check(comm, group, point, config, context, row, stop_requested, plans), None
    except Exception as error:  # any rank's error is every rank's failed point, agreed below
        measured, problem = None, error
    failures = agreed_failures(judge, problem, point)
    for plan in plans:  # after the agreement: freeing may be collective (RMA windows)
        plan.free()
    if group is not comm:
        group.Free()
    if failures:
        rank, kind, message, _ = failures[0]
        note = f"{FAILED}{'rank' if len(failures) == 1 else 'ranks'} {_ranges([f[0] for f in failures])}: " \
               f"{kind}: {message}"
        row, samples, _ = _noted(row, note)
        return row, samples, "\n".join(f"rank {r}:\n{trace}" for r, _, _, trace in failures)
    return measured


# How long a rank whose call failed waits for the others to agree before the job ends: ranks that raise at the same
# check arrive within a scheduler slice of each other, even oversubscribed; one stuck in the exchange never does.
AGREEMENT_SECONDS = 10.0


def agreed_failures(judge: Any, problem: BaseException | None, point: Point,
                    seconds: float = AGREEMENT_SECONDS) -> list[tuple[int, str, str, str]]:
    """Every rank's (rank, exception type, first line of its message, traceback) of this point, on every rank (none
    when all succeeded). A rank that failed waits `seconds` for the others; if they do not come, they are stuck
    in the exchange it left, and the job ends with its error."""
    from mpi4py import MPI

    mine, anyone = np.array([problem is not None], np.int32), np.zeros(1, np.int32)
    request = judge.Iallreduce(mine, anyone, MPI.MAX)
    if problem is None:
        request.Wait()
    elif not _within(request, seconds):
        abort_job(judge, f"{point} failed on this rank, and the other ranks did not come to agree on it within "
                         f"{seconds:g} s: they are still inside the exchange, so the job ends here; --resume skips "
                         f"this point.\n{_traceback(problem)}", 1)
    if not anyone[0]:
        return []
    said = None if problem is None else (type(problem).__name__, _first_line(str(problem)), _traceback(problem))
    return [(rank, *found) for rank, found in enumerate(judge.allgather(said)) if found]


def _within(request: Any, seconds: float) -> bool:
    """Whether `request` completes within `seconds` (tested every millisecond, sleeping between)."""
    deadline = time.monotonic() + seconds
    while not request.Test():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _traceback(problem: BaseException) -> str:
    return "".join(traceback.format_exception(problem)).rstrip()


def _time_and_check(comm: Any, group: Any, point: Point, config: SweepConfig, context: Context, row: Row,
                    stop_requested: Callable[[], bool], plans: list[Any]) -> Measured | None:
    """The point measured into `row`, its plans left in `plans` for the caller to free."""
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
    algorithm = get(point.variant.name)
    try:
        for sendbuf, recvbuf in sets:
            plans.append(traffic.plan(algorithm, group, sendbuf, recvbuf, point.variant.options,
                                      nonblocking=point.timing == OVERLAP))
    except A2AError as refused:  # raised alike on every rank (the checks are collective)
        return _noted(row, f"refused: {refused}")
    row.note = "; ".join(n for n in (row.note, plans[0].note) if n)  # e.g. bine's fallback to pairwise
    if point.cache == "cold":
        evict()
    if point.timing == OVERLAP:
        units, row.compute_phase_us = _phase(comm, group, point, config, context, traffic, sets[0])
        samples, stopped, timing_note, enough = _overlapped(comm, plans[0], point, config, context, row,
                                                            stop_requested, units)
    else:
        samples, stopped, timing_note, enough = _samples(comm, cycling([plan.run for plan in plans]), point, config,
                                                         context, stop_requested)
    if stopped:
        return None
    wrong = _check(comm, plans[0], sets[0][1], traffic.expected(group.rank)) if config.check else []
    tcp_after = _sum_over_hosts(comm, context)
    stats = Stats.of(samples[""] if isinstance(samples, dict) else samples, config.stall_threshold)
    _fill(row, stats, config, point.timing)
    row.algbw_GBps, row.busbw_GBps = traffic.bandwidths(stats.p50)  # from the bytes the traffic moves
    row.valid = not wrong and enough  # too few valid iterations (global timing) is no measurement
    for note in (short, timing_note):
        if note:
            _noted(row, note)
    if wrong:
        _noted(row, f"WRONG RESULT on ranks {_ranges(wrong)}")
    if tcp_before is not None and tcp_after is not None:
        row.tcp_timeouts, row.tcp_loss_probes = (after - before for after, before in zip(tcp_after, tcp_before))
    return row, samples, ""


def _samples(comm: Any, run: Callable[[], Any], point: Point, config: SweepConfig, context: Context,
             stop_requested: Callable[[], bool]) -> tuple[np.ndarray, bool, str, bool]:
    """The point's samples under its timing, whether a stop cut them short, what the timing noted, and whether
    they are enough to summarise."""
    if point.timing in PER_RANK_MEANS:
        timer = time_pipelined if point.timing == "pipelined" else time_imb
        return (*timer(comm, run, config.warmup, config.iterations, stop_requested), "", True)
    if point.timing == "global":
        timed = time_global(comm, run, config.warmup, config.iterations, config.max_time_per_point,
                            stop_requested, context.clock)
        return timed.samples, timed.stopped, timed.note, timed.enough
    timed = time_sync(comm, run, config.warmup, config.iterations, config.max_time_per_point, stop_requested)
    return (*timed, "", True)


def _phase(comm: Any, group: Any, point: Point, config: SweepConfig, context: Context, traffic: Any,
           buffers: tuple[Any, Any]) -> tuple[int, float]:
    """The compute phase every contestant gets at this point, sized at the first one measured there: this rank's
    Work units, and its microseconds (the largest rank's); --compute-us, else compute_ratio x the library's own
    non-blocking pure time (MPI_Ialltoall(v) on the point's buffers)."""
    at = tuple(v for k, v in zip(KEY_COLUMNS, point.key) if k not in ("algorithm", "options"))
    if at not in context.phases:
        if config.compute_us:
            seconds = config.compute_us * 1e-6
        else:
            library = traffic.plan(get(NATIVE), group, *buffers, {"form": "nonblocking"}, nonblocking=True)
            try:
                seconds = config.compute_ratio * pure_seconds(comm, library, config.warmup)
            finally:
                library.free()
        context.phases[at] = (context.work.units(seconds), comm.allreduce(seconds * 1e6, op=_max()))
    return context.phases[at]


def _max() -> Any:
    from mpi4py import MPI

    return MPI.MAX


def _overlapped(comm: Any, plan: Any, point: Point, config: SweepConfig, context: Context, row: Row,
                stop_requested: Callable[[], bool], units: int) -> tuple[dict[str, np.ndarray], bool, str, bool]:
    """The overlap protocol's samples (the calls' times: the overall ones), its figures into `row`."""
    timed = time_overlap(comm, plan, context.work, config.warmup, config.iterations, config.max_time_per_point,
                         stop_requested, units, int(point.tests))
    if timed.stopped:
        return {}, True, "", False
    us = 1e6
    row.t_pure_us, row.t_overall_us, row.t_compute_us = (float(np.median(timed.samples[q])) * us
                                                         for q in ("pure", "overall", "compute"))
    row.t_exposed_us = float(np.median(timed.samples["overall"] - timed.samples["compute"])) * us
    row.overlap_osu_pct, row.overlap_imb_pct = overlap_figures(timed.samples)
    samples = {"": timed.samples["overall"], **{q: timed.samples[q] for q in OVERLAP_QUANTITIES}}
    return samples, False, f"compute phase {timed.units} units of {context.work.unit * 1e6:.2f} us", True


def _noted(row: Row, note: str) -> Measured:
    """Put `note` first in the row's note (skip and refusal notes are read by their prefix)."""
    row.note = "; ".join(n for n in (note, row.note) if n)
    return row, np.zeros(0), ""


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _check(comm: Any, plan: Any, recvbuf: np.ndarray, expected: np.ndarray) -> list[int]:
    """Run once more into a cleared buffer; return the ranks (of comm) whose result is wrong."""
    recvbuf[...] = 0
    plan()
    right = np.array_equal(recvbuf, expected)
    return [rank for rank, ok in enumerate(comm.allgather(right)) if not ok]


def _fill(row: Row, stats: Stats, config: SweepConfig, timing: str) -> None:
    us = 1e6
    row.iterations = config.iterations if timing in PER_RANK_MEANS else stats.n
    row.t_min_us, row.t_p50_us, row.t_p90_us = stats.min * us, stats.p50 * us, stats.p90 * us
    row.t_p95_us, row.t_p99_us, row.t_mean_us = stats.p95 * us, stats.p99 * us, stats.mean * us
    row.t_max_us, row.t_std_us = stats.max * us, stats.std * us
    row.stalls, row.outliers = stats.stalls, stats.outliers
    if timing == "sync" and stats.n < config.iterations:  # global timing's note says it with its reasons
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
