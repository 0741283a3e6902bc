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

from a2a.algos.builtin.control import stand_in
from a2a.algos.nodes import node_groups
from a2a.algos.registry import get
from a2a.errors import A2AError, BadConfig, PlanFailed
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
from a2a.measure.overlap import Work, pure_seconds
from a2a.measure.protocols import Visit, protocol
from a2a.measure.timing import MIN_ITERATIONS, first_starts, harness_cost
from a2a.measure.traffic import traffic_of
from a2a.mpi import abort_job, abort_on_error, idle_barrier, library_version, ranks_on_this_node
from a2a.netstat import stall_counters
from a2a.record.overlap import overlap_figures
from a2a.record.results import FAILED, KEY_DEFAULTS, NATIVE, OVERLAP_QUANTITIES, Row
from a2a.record.stats import Stats
from a2a.sweep.config import OVERLAP, SweepConfig
from a2a.sweep.grid import Point, calls_in_round, cells, round_order
from a2a.sweep.mesh import Layout, group_comm
from a2a.sweep.session import (
    EXIT_TERMINATED,
    STOP_GRACE_SECONDS,
    Backend,
    Observer,
    Output,
    Session,
    StopRequest,
    SweepState,
    longer_timeout,
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

    state = resume_state(directory, "mpi")
    config = state.config
    if max(config.nprocs) > comm.size:
        raise BadConfig(f"{directory} sweeps up to {max(config.nprocs)} ranks; this job has {comm.size}; resume it "
                        f"with {resume_command('mpi', directory, max(config.nprocs))}")
    library, recorded = library_version(), library_version(state.meta.get("mpi_library") or "")
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
    job with its message. A stop signal the ranks do not honour within its grace (stuck in a collective) ends the
    job too, rank 0 closing the record first (_stuck).
    """
    with abort_on_error(comm):
        facts = {**describe_run(comm), "progress": state.progress_mode or None}
        if longer_timeout(state.meta, timeout):
            state.ended = {}  # it ran past a shorter --timeout: measured again
        state.config = replace(state.config, timeout=timeout)  # the record's, for the next resume
        session = None  # rank 0's
        if comm.rank == 0:
            backend = Backend("mpi", facts, table_details(state.config, facts["executor"]), timeout=timeout,
                              abort=partial(_end_job, comm))
            session = Session(directory, state, backend, output)
        stop.stuck = partial(_stuck, comm, session)
        finished = run_sweep(comm, state, Observer() if session is None else session, stop)
        code = None
        if session is not None:
            code = session.finish("complete", state.later) if finished else session.finish(f"terminated by "
                                                                                            f"{stop.name}")
        if not finished:
            stop.settled.set()  # honoured: the record is closed
        return comm.bcast(code, root=0)


def _end_job(comm: Any, message: str, code: int, prefix_rank: bool = False) -> None:
    """abort_job from the watchdog's thread, at one rank too (there its sys.exit would end only that thread)."""
    try:
        abort_job(comm, message, code, prefix_rank=prefix_rank)
    finally:
        os._exit(code)


def _stuck(comm: Any, session: Session | None, name: str) -> None:
    """End the job whose ranks did not reach a synchronisation within the grace after the stop signal `name`
    (stuck inside a collective), from the thread that heard it: rank 0 closes the record first; another rank leaves
    the end to rank 0 for as long again (the signal may not have reached it), then ends the job itself."""
    if session is not None:
        session.abandoned(name)
        _end_job(comm, "", EXIT_TERMINATED)
    time.sleep(STOP_GRACE_SECONDS)
    _end_job(comm, f"{name}: this rank did not reach a synchronisation within {2 * STOP_GRACE_SECONDS:g} s, and "
                   "rank 0 did not end the job; ending it here (the record is left as a job that died)",
             EXIT_TERMINATED, prefix_rank=True)


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
        stopped = False
        rows: list[Row] = []
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
    rows: list[Row] = []
    try:
        for cell in cells(todo):
            skipped = [_skipped(p, context, ended[p.key]) for p in cell if p.key in ended]
            live = [p for p in cell if p.key not in ended]
            if sub.rank == 0:
                observer.start_cell(live or cell)
            measured = measure_cell(sub, judge, live, config, context, stop_requested, observer) if live else []
            if measured is None:
                return True, rows
            for row, samples, detail, rounds in [(*m, None) for m in skipped] + measured:
                rows.append(row)
                if sub.rank == 0:
                    observer.end_point(row, samples, detail, rounds)
    finally:
        judge.Free()
    return False, rows


Measured = tuple[Row, Any, str]  # the row, its samples (by quantity where there are several), a failure's full text
Timed = tuple[Row, Any, str, "list[int] | None"]  # a measured point with the round of each sample


def _skipped(point: Point, context: Context, why: str) -> Measured:
    """The row of a point not run again: it ended an earlier launch."""
    row = point.row(context.nnodes, context.ppn)
    if why:
        _noted(row, f"skipped: {why}; resume does not run it again")
    return row, np.zeros(0), ""


@dataclass
class Contestant:
    """One point of a cell as its rounds go: its row, traffic, buffers and plans, and its samples so far."""

    point: Point
    row: Row
    traffic: Any = None
    kept: tuple[list[Any], list[Any]] | None = None  # (buffer sets, plans) made once, where memory allows
    samples: dict[str, list[float]] = field(default_factory=dict)  # by quantity ('' the calls' times)
    rounds: list[int] = field(default_factory=list)  # the round of each sample
    ended: Measured | None = None  # refused, skipped or failed: its row, no more visits
    starts: Any = None  # global timing's verdicts on its starts
    units: int = 0  # the overlap protocol's compute phase
    notes: list[str] = field(default_factory=list)  # what making its buffers and plans noted
    wrong: list[int] = field(default_factory=list)  # ranks whose result was wrong


def measure_cell(comm: Any, judge: Any, points: list[Point], config: SweepConfig, context: Context,
                 stop_requested: Callable[[], bool], observer: Observer) -> list[Timed] | None:
    """Plan, warm up, time and check a cell's points in interleaved rounds (collective); None if a stop came.

    Each round visits every live point once, in a fresh seeded order the same on every rank, with its warm-up
    and its share of the iterations: slow drift of the machine falls on every point of a round alike, and the
    samples keep their round (a2a.record.verdict pairs the points within rounds). Buffers and plans are made
    once per cell, or per visit where the cell's together would pass --max-memory (plan time is never timed).
    An exception on any rank fails that point on every rank, agreed on `judge` (agreed_failures), and the cell
    goes on without it; with a mesh layout the points run in every replica group at once.
    """
    group = group_comm(comm, points[0].layout) if points[0].layout else comm
    contestants = [Contestant(p, p.row(context.nnodes, context.ppn, warmup=config.warmup,
                                       note=describe_oversubscription(context.crowded), topology=emulated_topology(),
                                       imbalance=1.0 if p.bytes_per_peer else nan)) for p in points]
    try:
        _prepare_all(comm, judge, group, contestants, config, context, observer)
        before = _sum_over_hosts(comm, context)
        for round_ in range(config.rounds):
            for c in round_order([c for c in contestants if c.ended is None], points[0].cell, config.seed, round_):
                if comm.rank == 0:
                    observer.visit(c.point)
                if _attempt(judge, c, partial(_visit, comm, group, c, config, context, round_, stop_requested)):
                    return None  # a stop request
        stalls = _stalls_between(before, _sum_over_hosts(comm, context))
        return [c.ended + (None,) if c.ended else _finished(c, config, stalls) for c in contestants]
    finally:
        for c in contestants:  # after every agreement: freeing may be collective (RMA windows)
            for plan in (c.kept or ((), ()))[1]:
                plan.free()
        if group is not comm:
            group.Free()


def _prepare_all(comm: Any, judge: Any, group: Any, contestants: list[Contestant], config: SweepConfig,
                 context: Context, observer: Observer) -> None:
    """Every contestant's traffic, then, where the cell's buffers fit --max-memory together (and caches are warm:
    cold ones fill it with one point's buffer sets), its buffers and plans, kept for every round."""
    for c in contestants:
        if comm.rank == 0:
            observer.visit(c.point)  # the watchdog's: a plan that never comes ends the job too
        _attempt(judge, c, partial(_prepare, comm, group, c, config, context))
    live = [c for c in contestants if c.ended is None]
    if contestants[0].point.cache != "warm" or sum(c.traffic.most_bytes for c in live) > config.max_memory:
        return
    for c in live:
        if comm.rank == 0:
            observer.visit(c.point)
        _attempt(judge, c, partial(_keep, group, c, config))


def _keep(group: Any, c: Contestant, config: SweepConfig) -> None:
    """Make the contestant's buffer sets and plans once, kept for every round."""
    c.kept = _made(group, c, config, config.iterations)


def _attempt(judge: Any, contestant: Contestant, step: Callable[[], Any]) -> Any:
    """Run one step of a contestant on every rank; a refusal (raised alike on every rank) or any rank's exception
    ends it with its note, agreed on `judge`. What the step returned, or None once it ended."""
    problem: BaseException | None = None
    try:
        result = step()
    except PlanFailed as failed:  # a failure, raised alike on every rank: noted by the ranks that failed to plan
        result, problem = None, failed
    except A2AError as refused:  # the checks are collective: raised alike on every rank
        if contestant.ended is None:
            contestant.ended = _noted(contestant.row, f"refused: {refused}")
        result, problem = None, None
    except Exception as error:  # any rank's error is every rank's failed point, agreed below
        result, problem = None, error
    failures = agreed_failures(judge, problem, contestant.point)
    if failures:
        row, samples, _ = _noted(contestant.row, _failure_note(failures, problem))
        contestant.ended = (row, samples, "\n".join(f"rank {r}:\n{trace}" for r, _, _, trace in failures))
        return None
    return result


def _failure_note(failures: list[tuple[int, str, str, str]], problem: BaseException | None) -> str:
    """'failed on ranks 0-1: ValueError: ...': the ranks that raised and the first one's error; for a plan that
    failed (PlanFailed, the same on every rank), the ranks that failed to plan and the first one's cause."""
    if isinstance(problem, PlanFailed) and problem.failed:
        ranks, cause = [rank for rank, _ in problem.failed], _first_line(problem.failed[0][1])
    else:
        ranks, cause = [f[0] for f in failures], f"{failures[0][1]}: {failures[0][2]}"
    return f"{FAILED}{'rank' if len(ranks) == 1 else 'ranks'} {_ranges(ranks)}: {cause}"


def _prepare(comm: Any, group: Any, c: Contestant, config: SweepConfig, context: Context) -> None:
    """The contestant's traffic, refused or skipped where it cannot run, and its overlap compute phase."""
    point = c.point
    c.traffic = traffic_of(point.collective, point.workload, group.size, point.bytes_per_peer, point.dtype,
                           config.seed)
    c.row.imbalance = c.traffic.imbalance
    if c.traffic.most_bytes > config.max_memory:
        c.ended = _noted(c.row, f"skipped: buffers need {c.traffic.most_bytes} B per rank, above --max-memory "
                                f"{config.max_memory}")
        return
    if point.timing == "global":
        assert context.clock is not None  # Context.of synchronised the clocks for global timing
        c.starts = first_starts(context.clock)
    if point.timing == OVERLAP:
        assert context.work is not None  # Context.of measured the arithmetic for the overlap protocol
        sets, _ = buffer_sets(group, point.cache, c.traffic.buffers(group.rank), 1, config.max_memory)
        c.units, c.row.compute_phase_us = _phase(comm, group, point, config, context, c.traffic, sets[0])
        c.notes.append(f"compute phase {c.units} units of {context.work.unit * 1e6:.2f} us")


def _made(group: Any, c: Contestant, config: SweepConfig, calls: int) -> tuple[list[Any], list[Any]]:
    """Buffer sets and their plans for `calls` timed calls of the contestant (cold caches cycle through sets)."""
    point = c.point
    sets, short = buffer_sets(group, point.cache, c.traffic.buffers(group.rank), config.warmup + 2 * calls + 10,
                              config.max_memory)
    name, options = stand_in(point.variant.name, point.variant.options)
    algorithm, plans = get(name), []
    try:
        for sendbuf, recvbuf in sets:
            plans.append(c.traffic.plan(algorithm, group, sendbuf, recvbuf, options,
                                        nonblocking=point.timing == OVERLAP))
    except BaseException:
        for plan in plans:
            plan.free()
        raise
    c.notes = list(dict.fromkeys([*c.notes, *(n for n in (short, plans[0].note) if n)]))  # e.g. bine's fallback
    return sets, plans


def _visit(comm: Any, group: Any, c: Contestant, config: SweepConfig, context: Context, round_: int,
           stop_requested: Callable[[], bool]) -> bool:
    """One visit of a round: warm-up and timed calls, the samples kept with their round; in the last round the
    result checked. Whether a stop came."""
    calls = calls_in_round(config.iterations, config.rounds, round_)
    sets, plans = c.kept or _made(group, c, config, calls)
    try:
        if c.point.cache == "cold":
            evict()
        timing = protocol(c.point.timing)
        sampled = timing.time(Visit(comm, cycling([plan.run for plan in plans]), plans[0], config.warmup, calls,
                                    config.max_time_per_point / config.rounds, stop_requested, context.clock,
                                    context.work, c.units, int(c.point.tests or 0), c.starts))
        if sampled.stopped:
            return True
        by_quantity = sampled.samples if isinstance(sampled.samples, dict) else {"": sampled.samples}
        for quantity, series in by_quantity.items():
            c.samples.setdefault(quantity, []).extend(float(v) for v in series)
        c.rounds += [round_] * sampled.count
        if config.check and round_ == config.rounds - 1:
            c.wrong = _check(comm, plans[0], sets[0][1], c.traffic.expected(group.rank))
    finally:
        if c.kept is None:
            for plan in plans:
                plan.free()
    return False


def _finished(c: Contestant, config: SweepConfig, stalls: list[int] | None) -> Timed:
    """The contestant's row from all its rounds' samples, with the samples and their rounds; `stalls`: the TCP
    timeouts and loss probes counted while its cell ran (its visits interleave with the others', so a count
    cannot be told apart by algorithm)."""
    row, timing = c.row, protocol(c.point.timing)
    calls = np.asarray(c.samples.get("", []), dtype=float)
    stats = Stats.of(calls, config.stall_threshold)
    _fill(row, stats, config, timing.per_rank_means)
    row.algbw_GBps, row.busbw_GBps = c.traffic.bandwidths(stats.p50)  # from the bytes the traffic moves
    enough = len(calls) >= min(MIN_ITERATIONS, config.iterations) or timing.per_rank_means
    row.valid = not c.wrong and enough
    notes = list(c.notes)
    if c.point.timing == OVERLAP:
        _overlap_figures(row, {q: np.asarray(v) for q, v in c.samples.items()})
    if c.starts is not None and c.starts.excluded:
        notes.append(c.starts.note)
    if not enough:
        notes.append(f"{len(calls)} of {config.iterations} iterations valid within the time budget: too few to "
                     f"summarise (fewer than {MIN_ITERATIONS})")
    for note in notes:
        _noted(row, note)
    if c.wrong:
        _noted(row, f"WRONG RESULT on ranks {_ranges(c.wrong)}")
    if stalls is not None:
        row.tcp_timeouts, row.tcp_loss_probes = stalls
    samples = {q: np.asarray(v) for q, v in c.samples.items()} if c.point.timing == OVERLAP else calls
    return row, samples, "", c.rounds


def _overlap_figures(row: Row, samples: dict[str, np.ndarray]) -> None:
    """The overlap protocol's medians and published figures into `row`, from every round's samples."""
    us = 1e6
    figures = {"overall": samples[""], **{q: samples[q] for q in OVERLAP_QUANTITIES}}
    row.t_pure_us, row.t_overall_us, row.t_compute_us = (float(np.median(figures[q])) * us
                                                         for q in ("pure", "overall", "compute"))
    row.t_exposed_us = float(np.median(figures["overall"] - figures["compute"])) * us
    row.overlap_osu_pct, row.overlap_imb_pct = overlap_figures(figures)


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


def _phase(comm: Any, group: Any, point: Point, config: SweepConfig, context: Context, traffic: Any,
           buffers: tuple[Any, Any]) -> tuple[int, float]:
    """The compute phase every contestant gets at this point, sized at the first one measured there: this rank's
    Work units, and the microseconds they took then (the largest rank's), which t_compute times again; sized to
    --compute-us, else compute_ratio x the library's own non-blocking pure time (MPI_Ialltoall(v) on the point's
    buffers)."""
    at = point.cell
    if at not in context.phases:
        if config.compute_us:
            seconds = config.compute_us * 1e-6
        else:
            library = traffic.plan(get(NATIVE), group, *buffers, {"form": "nonblocking"}, nonblocking=True)
            try:
                seconds = config.compute_ratio * pure_seconds(comm, library, config.warmup)
            finally:
                library.free()
        work = context.work
        assert work is not None  # Context.of measured the arithmetic for the overlap protocol
        units = work.units(seconds)
        took = work.seconds(units) if units else 0.0
        context.phases[at] = (units, comm.allreduce(took * 1e6, op=_max()))
    return context.phases[at]


def _max() -> Any:
    from mpi4py import MPI

    return MPI.MAX


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


def _fill(row: Row, stats: Stats, config: SweepConfig, per_rank_means: bool) -> None:
    us = 1e6
    row.iterations = config.iterations if per_rank_means else stats.n
    row.t_min_us, row.t_p50_us, row.t_p90_us = stats.min * us, stats.p50 * us, stats.p90 * us
    row.t_p95_us, row.t_p99_us, row.t_mean_us = stats.p95 * us, stats.p99 * us, stats.mean * us
    row.t_max_us, row.t_std_us = stats.max * us, stats.std * us
    row.stalls, row.outliers = stats.stalls, stats.outliers
    if row.timing == "sync" and stats.n < config.iterations:  # global timing's note says it with its reasons
        _noted(row, f"stopped after {stats.n} iterations (--max-time-per-point {config.max_time_per_point:g} s)")


def _stalls_between(before: list[int] | None, after: list[int] | None) -> list[int] | None:
    """TCP timeouts and loss probes counted between two readings (None where a host could not tell)."""
    return None if before is None or after is None else [a - b for a, b in zip(after, before)]


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
