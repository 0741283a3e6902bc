"""The simulator as a backend of the session: every point's schedule replayed on SimGrid.

Each variant is captured once per process count and layout (a2a.simulate.capture), or read
back from the schedule cache (a2a.simulate.schedule_cache), and its schedule scaled to every
size; replays run in the background, several at once, while the next point is captured and
written. The session (a2a.sweep.session) keeps the record, as for a measured
sweep; meta.json holds the machine below, so `--resume` simulates on the same one.
"""
from __future__ import annotations

import math
import os
import signal
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from a2a.errors import A2AError, BadConfig, CaptureError, CaptureOutgrew
from a2a.record.overlap import imb_overlap, osu_overlap
from a2a.record.results import NATIVE, Row
from a2a.record.stats import bandwidths
from a2a.schedules.events import Schedule
from a2a.schedules.program import ScheduleData
from a2a.schedules.world import available_bytes
from a2a.simulate import effort, platforms, replay, simgrid, traces, varied
from a2a.simulate.calibrate import calibrated
from a2a.simulate.capture import capture_unit
from a2a.simulate.machine import Machine, simulated_variants
from a2a.simulate.schedule_cache import OFF, ScheduleCache, default_directory
from a2a.sweep.config import OVERLAP
from a2a.sweep.grid import Point
from a2a.sweep.launch import fresh_sweep, refuse_with_resume
from a2a.sweep.mesh import group_comm
from a2a.sweep.session import STOP_SIGNALS, Backend, Output, Session, SweepState, resume_state
from a2a.sweep.workload import imbalance, parse_workload
from a2a.units import parse_size

ALLTOALLV = "alltoallv"
REPLAY_TIMEOUT = 3600.0  # seconds of wall time one replay may take, unless told
# `bench simulate` options that go with --resume (the rest come from the record)
RESUMABLE = ("resume", "force_resume", "quiet", "fmt", "keep_traces", "replay_timeout", "jobs", "memory",
             "schedule_cache")


def simulate(values: dict[str, Any], output: Output) -> int:
    """`bench simulate` as one call: every option checked before anything is captured, then the sweep simulated.
    The exit code."""
    problem = simgrid.missing() or simgrid.unsupported(simgrid.version())
    if problem:
        raise BadConfig(problem)
    if values.get("resume"):
        directory = Path(values["resume"])
        refuse_with_resume(directory, values, set(values) - set(RESUMABLE))
        state, machine = resume_simulation(directory, bool(values.get("force_resume")))
    else:
        directory, state = fresh_sweep(values, "simgrid", choose=simulated_variants, suffix="-sim")
        machine = Machine.from_options(values, state.config)
        if values.get("calibrate"):
            machine = calibrated(machine, Path(values["calibrate"]))
    memory = parse_size(values["memory"], "--memory") if values.get("memory") is not None else None
    if memory == 0:
        raise BadConfig("--memory '0': the replays need some; accepted: a byte count above 0, e.g. 4G")
    cache = values.get("schedule_cache")
    schedules = ScheduleCache(None if cache == OFF else Path(cache) if cache else default_directory())
    keep = Path(values["keep_traces"]) if values.get("keep_traces") else None
    return simulate_sweep(directory, state, machine, output, keep, values.get("replay_timeout") or REPLAY_TIMEOUT,
                          values.get("jobs") or len(os.sched_getaffinity(0)), schedules, memory)


def resume_simulation(directory: Path, force: bool = False) -> tuple[SweepState, Machine]:
    """The simulation recorded in DIR and the machine it runs on, refused under another SimGrid unless forced."""
    state = resume_state(directory, "simgrid")
    recorded, running = state.meta.get("simgrid"), simgrid.version()
    if recorded and recorded != running and not force:
        raise BadConfig(f"{directory} was simulated on SimGrid {recorded} ({state.meta.get('smpirun')}), but this "
                        f"smpirun ({simgrid.smpirun()}) is SimGrid {running}; resume under the same SimGrid "
                        f"({simgrid.SMPIRUN_VARIABLE}={state.meta.get('smpirun')}), or give --force-resume to add "
                        f"SimGrid {running}'s points to the record (meta.json lists each launch's SimGrid)")
    return state, Machine.of(state.meta)


def simulate_sweep(directory: Path, state: SweepState, machine: Machine, output: Output,
                   keep: Path | None = None, replay_timeout: float = REPLAY_TIMEOUT, jobs: int = 1,
                   cache: ScheduleCache | None = None, memory: int | None = None) -> int:
    """Simulate every point not yet recorded, up to `jobs` replays at a time that hold about `memory` bytes together
    (default: three quarters of the memory available; a given `memory` also bounds the captures that run beside
    replays); 0 when complete, 143 when interrupted (the record is kept)."""
    cost = machine.message_cost
    charged = f"; {cost.send * 1e6:.3g} us a send, {cost.recv * 1e6:.3g} us a receive" if cost.config() else ""
    charged += f"; bandwidth factor {machine.bandwidth.factor:.3g}" if machine.bandwidth.factor else ""
    charged += machine.memory.said()
    facts = machine.facts()
    backend = Backend("simgrid", facts, f"{machine.link.text}{charged}; times in microseconds",
                      where=lambda rows: f", simulated on {rows[0].platform}",
                      weight=lambda point: effort.expected(point, len(machine.node_ranks(point.nprocs))))
    session = Session(directory, state, backend, output)
    if simgrid.slow_version(session.meta["simgrid"]):
        session.say(f"note: SimGrid {session.meta['simgrid']} replays many small messages in flight slowly "
                    "(linear: O(p^4), hours at 1024 ranks); `make simgrid` builds SimGrid 4.1")
    cache = cache or ScheduleCache(None)
    bounded, memory = memory is not None, memory or (available_bytes() or 1 << 62) * 3 // 4
    replays = Replays(session, machine, keep, replay_timeout, (jobs, memory, bounded), cache, facts["s4u_replayer"])
    try:
        with _stop_signals_interrupt():
            replays.run(sorted(state.todo, key=lambda p: (p.nprocs, str(p.layout), p.variant.label)))
        status = "complete"
    except KeyboardInterrupt as stop:
        status = f"terminated by {stop.args[0] if stop.args else 'SIGINT'}"
    finally:
        replays.stop()
        session.add("schedules_captured", cache.captured)
        session.add("schedules_from_cache", cache.stored)
        if cache.replaced:
            session.add("schedules_replaced", cache.replaced)
        session.add("capture_seconds", cache.capture_seconds)
    return session.finish(status)


@contextmanager
def _stop_signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGUSR1 (Slurm's warning) stop a simulation as Ctrl-C does: its record is closed, resumable."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {signum: signal.signal(signum, interrupt) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@dataclass(frozen=True)
class Replayed:
    """A point whose traces, platform and configuration were replayed already, for another variant: that time."""

    earlier: replay.Replay

    def result(self) -> replay.Replay:
        return replay.Replay(self.earlier.seconds, 0.0, 0.0)  # no simulator ran for it

    def memory(self) -> int:
        return 0

    def stop(self) -> None:
        pass


Started = replay.ReplayJob | replay.OverlapReplay | Replayed  # a point's replay, once started


class Replays:
    """The points' replays in the background, each started once its traces are written, while fewer than `jobs`
    run and its memory fits beside theirs in `memory` bytes (or none runs): `room` is (jobs, memory, bounded).
    With `bounded`, a schedule captured by running the plans (whose memory is not known before) runs in what the
    replays leave of `memory`, and again once none runs if it outgrew that. Points are recorded in order. `s4u` is
    the S4U replayer program (None: smpirun replays every point)."""

    def __init__(self, session: Session, machine: Machine, keep: Path | None, replay_timeout: float,
                 room: tuple[int, int, bool], cache: ScheduleCache, s4u: str | None = None):
        self.session, self.machine, self.keep, self.replay_timeout = session, machine, keep, replay_timeout
        (self.jobs, self.memory, self.bounded), self.cache, self.s4u = room, cache, s4u
        self.schedules: dict[tuple, Schedule | ScheduleData | A2AError | None] = {}  # alltoallv: programs
        self.traces: dict[tuple, traces.Traces] = {}  # the unit schedule's, which the S4U replayer scales
        self.replayed: dict[str, tuple[str, replay.Replay]] = {}  # ReplayJob.identity -> (variant, its replay)
        # each point's row, its replay (None: none runs), and the full text behind a failure's one-line note
        self.running: deque[tuple[Row, Started | None, str]] = deque()
        self.nprocs: int | None = None
        self.todo: list[Point] = []

    def run(self, todo: list[Point]) -> None:
        """Replay each point; a variant's sizes come together (one capture serves them), process counts in order."""
        self.todo = todo
        for point in todo:
            row, job, detail = self._ready(point)
            if point.nprocs != self.nprocs:
                self._collect(0)
                self._end_nprocs()
                self.nprocs = point.nprocs
                self.session.start_nprocs(point.nprocs, {"nnodes": row.nnodes, "ppn": row.ppn,
                                                         "platform": row.platform})
            self._collect(self.jobs - 1)
            self.running.append((row, self._started(row, job, point) if job else None, detail))
        self._collect(0)
        self._end_nprocs()

    def stop(self) -> None:
        """Stop the replays still running (after an interrupt)."""
        for _, job, _ in self.running:
            if job:
                job.stop()

    def _collect(self, left: int, memory: int = 0) -> None:
        """Record points in order, waiting for their replays, until at most `left` replays run and `memory` more
        bytes fit beside theirs."""
        if self.running and self._held() + memory > self.memory:
            self.session.add("replays_waited_for_memory", 1)
        while self.running and (self.running[0][1] is None or sum(j is not None for _, j, _ in self.running) > left
                                or self._held() + memory > self.memory):
            row, job, detail = self.running[0]
            seconds, detail = self._simulated(row, job) if job else (None, detail)
            self.running.popleft()
            self.session.end_point(row, [seconds] if seconds is not None else [], detail)

    def _room(self) -> int | None:
        """What a capture may hold beside the replays running: what they leave of the memory bound (None: no
        bound)."""
        return max(self.memory - self._held(), 0) if self.bounded else None

    def _captured(self, capture: Callable[[int | None], Schedule]) -> Schedule:
        """`capture(room)` beside the replays running, in what they leave of the bound; once more after them, in
        the whole bound, if it outgrew that."""
        room = self._room()
        try:
            return capture(room)
        except CaptureOutgrew:
            if room is None or not any(job for _, job, _ in self.running):
                raise
        self.session.add("captures_waited_for_replays", 1)
        self._collect(0)
        return capture(self._room())

    def _held(self) -> int:
        """About the bytes the replays running hold."""
        return sum(job.memory() for _, job, _ in self.running if job)

    def _end_nprocs(self) -> None:
        if self.nprocs is not None:
            self.session.end_nprocs(self.nprocs, [r for r in self.session.rows if r.nprocs == self.nprocs])

    def _ready(self, point: Point) -> tuple[Row, replay.ReplayJob | replay.OverlapReplay | None, str]:
        """A point's row, its replay's files (None with a note when it cannot be simulated), and the full text
        behind that note."""
        shape, ppn = self.machine.placement(point.nprocs)
        row = point.row(math.ceil(point.nprocs / ppn), ppn, iterations=1, warmup=0, platform=shape.spec)
        key = (point.nprocs, point.variant.label, point.layout)
        if key not in self.schedules:
            self.schedules.clear()  # the points of a variant come together: the last one's capture is done with
            self.traces.clear()  # (replays still running hold theirs)
            self.schedules[key] = self._capture(point, ppn)
            self._reweigh(key, self.schedules[key])
        schedule = self.schedules[key]
        if isinstance(schedule, A2AError):
            return row, None, noted(row, "refused: ", schedule)
        link, copy_bandwidth = self.machine.link, self.machine.copy_bandwidth
        try:
            if point.collective == ALLTOALLV:
                assert not isinstance(schedule, Schedule)  # an alltoallv's capture is its program (None: native)
                scaled = self._filled(point, row, schedule)
            else:
                assert isinstance(schedule, Schedule)  # an alltoall's capture is its schedule at unit size
                factor = row.count // schedule.count
                scaled = schedule.scaled(factor) if factor != 1 else schedule
                if self.s4u and not self.keep and point.timing != OVERLAP:  # one trace for every size, unless each
                    if key not in self.traces:  # point's own are to be kept
                        self.traces[key] = traces.unit_traces(schedule, copy_bandwidth)
                    if not self.traces[key].collective:
                        return row, replay.ReplayJob(self.traces[key], shape, link, copy_bandwidth, None, self.s4u,
                                                      factor, memory=self.machine.memory), ""
            if point.timing == OVERLAP:
                return row, self._overlap(point, scaled, shape), ""
            keep = self.keep / f"{point.nprocs}-{point.variant.label}-{point.bytes_per_peer}" if self.keep else None
            return row, replay.ReplayJob(scaled, shape, link, copy_bandwidth, keep, self.s4u,
                                         memory=self.machine.memory), ""
        except CaptureError as failed:
            return row, None, noted(row, "not simulated: ", failed)

    def _reweigh(self, key: tuple, schedule: Any) -> None:
        """The points of a variant just captured weighed by its schedule's messages, for the ETA."""
        if isinstance(schedule, Schedule):
            self.session.reweigh({p.key: effort.captured(p, schedule) for p in self.todo
                                  if (p.nprocs, p.variant.label, p.layout) == key})

    def _filled(self, point: Point, row: Row, data: ScheduleData | None) -> Schedule:
        """An alltoallv point's schedule: the program (None: SMPI's own MPI_Alltoallv) at the point's matrix."""
        itemsize = np.dtype(point.dtype).itemsize
        counts = parse_workload(point.workload).counts(point.nprocs, point.bytes_per_peer, itemsize, point.config.seed)
        row.imbalance = imbalance(counts)
        return varied.native(counts, itemsize) if data is None else varied.filled(data, counts, itemsize)

    def _overlap(self, point: Point, scaled: Schedule, shape: Any) -> replay.OverlapReplay:
        """An overlap point's two replays: pure, then overall with the compute phase its pure time gives."""
        keep = self.keep / f"{point.nprocs}-{point.variant.label}-{point.bytes_per_peer}" if self.keep else None
        link, copy_bandwidth = self.machine.link, self.machine.copy_bandwidth
        job = partial(replay.ReplayJob, scaled, shape, link, copy_bandwidth, s4u=self.s4u, memory=self.machine.memory)
        return replay.OverlapReplay(job(keep), lambda compute: job(keep and keep.with_name(keep.name + "-overall"),
                                                                   compute=compute), point.config.compute_ratio)

    def _started(self, row: Row, job: replay.ReplayJob | replay.OverlapReplay, point: Point) -> Started:
        native = point.variant.name == NATIVE
        config = (platforms.native_config(point.variant.options.get("selector", "default"),
                                        point.variant.options.get("algorithm", "")) if native else [])
        if native and point.layout:
            row.note = "native in groups runs a linear point-to-point lowering, not SMPI's MPI_Alltoall"
        config = config + self.machine.config()
        if isinstance(job, replay.OverlapReplay):
            if native:
                row.note = "SMPI replays MPI_Alltoall only blocking: the compute phase runs before it"
            self._collect(self.jobs - 1, job.memory())
            return job.start(config, self.replay_timeout)
        twin = self.replayed.get(job.identity(config))
        if twin is not None:
            job.stop()
            row.note = f"replayed once with {twin[0]}: the same traces"
            self.session.add("replays_shared", 1)
            return Replayed(twin[1])
        self._collect(self.jobs - 1, job.memory())
        return job.start(config, self.replay_timeout)

    def _simulated(self, row: Row, job: Started) -> tuple[float | None, str]:
        """Fill the row from a finished replay; its simulated seconds, or None with the note why not and the full
        text behind it."""
        try:
            found = job.result()
        except CaptureError as failed:
            return None, noted(row, "not simulated: ", failed)
        # an overlap point's are its two replays and the computation between them
        result = found if isinstance(found, replay.Replay) else self._overlapped(row, *found)
        us = result.seconds * 1e6
        row.t_min_us = row.t_p50_us = row.t_p90_us = row.t_p95_us = row.t_p99_us = row.t_mean_us = row.t_max_us = us
        row.t_std_us = 0.0
        row.algbw_GBps, row.busbw_GBps = bandwidths(row.bytes_per_peer, row.group_size or row.nprocs, result.seconds)
        row.valid = True
        self.session.add("replay_wall_seconds", result.wall_seconds)
        self.session.add("replay_cpu_seconds", result.cpu_seconds)
        if not isinstance(job, (Replayed, replay.OverlapReplay)):
            self.replayed[job.identity(job.config)] = (row.algorithm + (f":{row.options}" if row.options else ""),
                                                       result)
        return result.seconds, ""

    def _overlapped(self, row: Row, pure: replay.Replay, overall: replay.Replay, compute: float) -> replay.Replay:
        """The overlap figures of a simulated point into its row (the job's times stand for every rank's); the
        overall replay, whose time is the row's."""
        us = 1e6
        row.t_pure_us, row.t_overall_us, row.t_compute_us = pure.seconds * us, overall.seconds * us, compute * us
        row.t_exposed_us, row.compute_phase_us = (overall.seconds - compute) * us, compute * us
        means = np.array([[pure.seconds, overall.seconds, compute, 0.0]])
        row.overlap_osu_pct, row.overlap_imb_pct = osu_overlap(means), imb_overlap(means)
        return replay.Replay(overall.seconds, pure.wall_seconds + overall.wall_seconds,
                             pure.cpu_seconds + overall.cpu_seconds)

    def _capture(self, point: Point, ppn: int) -> Schedule | ScheduleData | A2AError | None:
        """The schedule at unit size (scaled per size), or an alltoallv's program (a2a.simulate.varied), or why it is
        refused."""
        nodes = self.machine.node_ranks(point.nprocs)
        options = {} if point.variant.name == NATIVE else point.variant.options
        if point.collective == ALLTOALLV:
            try:
                if point.layout:
                    raise CaptureError("an alltoallv in replica groups is not simulated (the whole job's only)")
                return varied.schedule_of(point.variant.name, options, point.nprocs, nodes)
            except A2AError as refused:
                return refused
        group = (lambda world, layout=point.layout: group_comm(world, layout)) if point.layout else None
        key = {"algorithm": point.variant.name, "options": options, "nprocs": point.nprocs, "dtype": point.dtype,
               "ppn": ppn, "layout": [point.layout.mesh, point.layout.keep] if point.layout else None}
        try:
            return self.cache.schedule(key, lambda: self._captured(
                lambda room: capture_unit(point.variant.name, options, point.nprocs, point.dtype, room, nodes=nodes,
                                          group=group)))
        except A2AError as refused:
            return refused


def noted(row: Row, prefix: str, failure: Exception) -> str:
    """Put a failure's first line in the row's note after `prefix`; the whole text when it has more lines (a replay's
    output, a backtrace), for the record's errors log, else ''."""
    text = str(failure).strip()
    first = text.splitlines()[0] if text else type(failure).__name__
    row.note = prefix + first
    return text if text != first else ""
