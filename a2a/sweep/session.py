"""One launch of a sweep, measured or simulated: the record on disk, the status line, the tables, resuming.

A backend walks the grid's points and hands each point's row and samples to the Session (on
rank 0 when measuring); the session owns everything else: results.csv, samples.csv and
meta.json (a2a.record.meta's schema), the status line, the per-process-count tables, the
closing output and the hint to resume. `bench run` drives it through the MPI driver
(a2a.measure.driver), `bench simulate` through the simulator (a2a.simulate.driver).
"""
from __future__ import annotations

import os
import re
import signal
import socket
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from a2a.algos.facts import shown
from a2a.algos.plugins import load_plugin
from a2a.algos.registry import get
from a2a.errors import BadConfig
from a2a.mpi import launch_command
from a2a.record import report
from a2a.record.meta import BACKENDS, RUNNING, backend_of, launch_meta, now
from a2a.record.results import (
    Recorder,
    Row,
    drop_orphan_samples,
    read_meta,
    read_rounds,
    read_rows,
    read_samples,
    write_meta,
)
from a2a.sweep.config import DEFAULTS, SweepConfig
from a2a.sweep.grid import Point, points
from a2a.sweep.workload import parse_workload
from a2a.units import counted, human_bytes

EXIT_TERMINATED = 143
EXIT_TIMEOUT = 124
EXIT_NOTHING = 1  # the launch ran, and not one of its points succeeded
NOTHING = "no point was {}"  # how a launch that measured (or simulated) no valid point begins to say so
ERRORS_LOG = "errors.log"  # in the record: the full text (backtraces included) behind each failed point's note
FORMATS = ("table", "tpu", "csv", "json")
STATUS_EVERY = 15.0  # seconds between status lines when stderr is not a terminal


@dataclass
class SweepState:
    """A sweep to run: its config, plug-ins, the points already done, and the record of earlier launches."""

    config: SweepConfig
    plugins: list[str]
    done: set[tuple] = field(default_factory=set)
    meta: dict[str, Any] = field(default_factory=dict)
    ended: dict[tuple, str] = field(default_factory=dict)  # points that ended an earlier launch, and how
    progress_mode: str = ""  # the overlap protocol's progress mode this launch measures ('' for every point)

    @property
    def missing(self) -> list[Point]:
        """Every point not yet recorded, in the grid's order."""
        return [p for n in self.config.nprocs for p in points(self.config, n) if p.key not in self.done]

    @property
    def todo(self) -> list[Point]:
        """What this launch measures of the missing points: those of its progress mode (each needs a launch of its
        own: the library's progress thread is chosen before MPI starts)."""
        mode = self.progress_mode
        return [p for p in self.missing if not (mode and p.progress and p.progress != mode)]

    @property
    def later(self) -> list[str]:
        """The progress modes whose missing points need another launch."""
        mode = self.progress_mode
        return list(dict.fromkeys(p.progress for p in self.missing if p.progress and p.progress != mode))


def resume_command(backend: str, directory: Path, nprocs: int) -> str:
    """The line that resumes the record in `directory`: a measured one needs its largest process count launched."""
    return launch_command(nprocs if backend == "mpi" else 1, [*BACKENDS[backend].split()[1:], "--resume",
                                                               str(directory)])


def resume_state(directory: Path, backend: str) -> SweepState:
    """The sweep recorded in DIR/meta.json (its plug-ins loaded), refused if another backend made it."""
    meta = read_meta(directory)
    if "config" not in meta:
        raise BadConfig(f"{directory} has no meta.json with a sweep config; it is not a run to resume")
    made_by = backend_of(meta)
    if made_by != backend:
        raise BadConfig(f"{directory} was made by `{BACKENDS[made_by]}`, not `{BACKENDS[backend]}`; resume it with "
                        + resume_command(made_by, directory, max(meta["config"]["nprocs"])))
    for plugin in meta.get("plugins", []):
        load_plugin(plugin)
    done = {row.key for row in read_rows(directory)} if (directory / "results.csv").exists() else set()
    ended = ended_by(meta)
    if ended and set(ended) & set(read_samples(directory)):  # it was measured: the end came while it was recorded
        ended = {}
    return SweepState(SweepConfig.from_dict(meta["config"]), meta.get("plugins", []), done, meta, ended)


def ended_by(meta: dict[str, Any]) -> dict[tuple, str]:
    """The points a launch was inside when it died (its cell's, since a death does not say which visit) or timed out
    (the point whose visit ran past --timeout), and how; none when it was stopped by a signal."""
    running = meta.get("point_in_progress")
    last = (meta.get("launches") or [{}])[-1]
    status = str(last.get("status") or meta.get("status"))
    if not running or not (status == RUNNING or status.startswith("timeout")):
        return {}
    died = status == RUNNING
    how = f"{'the job died during it' if died else 'it ran past --timeout'} in the launch of {last.get('start', '?')}"
    return {tuple(key): how for key in (running.get("cell", [running["key"]]) if died else [running["key"]])}


def option_defaults(config: SweepConfig) -> dict[str, dict[str, str]]:
    """Each swept algorithm's option defaults, so that tables of the record need no registry to read."""
    return {v.name: {k: str(o.default) for k, o in get(v.name).options.items()} for v in config.variants}


# SIGUSR1 too: Open MPI's mpirun and srun kill on SIGTERM instead of passing it on, while all
# launchers pass SIGUSR1 through, so batch scripts forward Slurm's warning as SIGUSR1.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
# How long after a stop signal the ranks have to reach the sweep's next synchronisation (a timed call takes
# milliseconds; the slowest point's one call may take longer, and is lost either way): past it they are taken to be
# stuck inside a collective, and the job ends with the record closed
STOP_GRACE_SECONDS = 2.0


@dataclass
class StopRequest:
    """Set by a stop signal; a sweep reads it at every synchronisation, so all ranks agree.

    A rank stuck inside MPI never runs Python's handler (it runs between bytecodes, in the main thread), so a
    thread also hears the signal, through the wakeup file descriptor Python's C handler writes to: unless the
    stop is honoured (`settled`) within STOP_GRACE_SECONDS, it runs `stuck(signal name)` (the sweep's: close the
    record, end the job), or ends the process where no sweep runs.
    """

    event: threading.Event = field(default_factory=threading.Event)
    name: str = "a signal on another rank"
    stuck: Callable[[str], None] | None = None
    settled: threading.Event = field(default_factory=threading.Event)

    @contextmanager
    def installed(self) -> Iterator["StopRequest"]:
        """Catch the stop signals in this process and hear them in a thread; the handlers given back on leaving."""
        handlers = {signum: signal.signal(signum, self._on_signal) for signum in STOP_SIGNALS}
        heard, told = socket.socketpair()
        told.setblocking(False)  # as set_wakeup_fd requires
        previous = signal.set_wakeup_fd(told.fileno(), warn_on_full_buffer=False)
        listener = threading.Thread(target=self._listen, args=(heard,), name="a2a stop signal", daemon=True)
        listener.start()
        try:
            yield self
        finally:
            signal.set_wakeup_fd(previous)
            for signum, handler in handlers.items():
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)
            self.settled.set()
            told.send(b"\0")  # not a signal's number: the listener returns
            listener.join()
            heard.close()
            told.close()

    def __call__(self) -> bool:
        return self.event.is_set()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.name = signal.Signals(signum).name
        self.event.set()

    def _listen(self, heard: socket.socket) -> None:
        """Wait for a stop signal's number on `heard`; then, unless the stop is honoured within the grace, `stuck`."""
        stops = {int(signum) for signum in STOP_SIGNALS}
        while True:
            number = heard.recv(1)
            if not number or number[0] == 0:
                return
            if number[0] in stops:
                break
        self.name = signal.Signals(number[0]).name
        self.event.set()
        if not self.settled.wait(STOP_GRACE_SECONDS):
            (self.stuck or _ended)(self.name)


def _ended(name: str) -> None:
    """End this process: a stop signal it did not honour within the grace, outside a sweep."""
    os._exit(EXIT_TERMINATED)


@dataclass(frozen=True)
class Output:
    """How a session speaks: quiet or not, the stdout format, whether to warn about oversubscription."""

    quiet: bool = False
    fmt: str = "table"
    allow_oversubscribed: bool = False


@dataclass(frozen=True)
class Backend:
    """What a session needs to know of the backend that feeds it.

    `name`: `mpi` or `simgrid` (a2a.record.meta.BACKENDS); `facts`: its part of meta.json;
    `where`: what a table's title says after "N ranks" (", simulated on torus:4x4x4");
    `details`: what the title's parentheses say (timing, units); `abort(message, code)` ends
    the job when a point overruns `timeout` seconds (None: no watchdog); `weight(point)`: what
    the point is expected to cost beside the others, which the status line's ETA weighs by.
    """

    name: str
    facts: dict[str, Any]
    details: str
    where: Callable[[list[Row]], str] = lambda rows: ""
    timeout: float | None = None
    abort: Callable[[str, int], None] | None = None
    weight: Callable[[Point], float] = lambda point: 1.0


class Observer:
    """What a backend tells the session as it walks the grid; the default hears nothing (other ranks)."""

    def start_nprocs(self, nprocs: int, facts: dict[str, Any]) -> None:
        """A process count begins; `facts` go to meta.json's by_nprocs."""

    def start_point(self, point: Point) -> None:
        """A point is about to be measured (a simulated one: a measured cell's points say start_cell and visit)."""

    def start_cell(self, points: list[Point]) -> None:
        """A cell's points are about to be measured together, in interleaved rounds."""

    def visit(self, point: Point) -> None:
        """One of the cell's points is about to be timed once (a round's visit): cheap, for the watchdog."""

    def end_point(self, row: Row, samples: Any, detail: str = "", rounds: list[int] | None = None) -> None:
        """A point is measured (or skipped, or failed): its row and samples (with the round of each, where it was
        measured in rounds), and for a failure the full text behind its one-line note."""

    def end_nprocs(self, nprocs: int, rows: list[Row]) -> None:
        """Every point of a process count is done."""


class Session(Observer):
    """One launch's record owner: rows and samples on disk, meta.json, the status line, tables, the watchdog."""

    def __init__(self, directory: Path, state: SweepState, backend: Backend, output: Output):
        self.directory, self.config, self.backend, self.output = Path(directory), state.config, backend, output
        self.progress_mode = state.progress_mode
        self.meta, self.launch = launch_meta(state.meta, backend.name, state.config.as_dict(), state.plugins,
                                             option_defaults(state.config), backend.facts, len(state.done),
                                             drop_orphan_samples(self.directory))
        self.recorder = Recorder(self.directory, self.launch["start"])
        self.total, self.began = len(state.todo), time.monotonic()
        self.rows: list[Row] = []
        self.weights = {p.key: backend.weight(p) for p in state.todo}  # the ETA's: each point's expected cost
        self.weighed = 0.0  # the weight of the points recorded
        self.last_status = 0.0
        self.watchdog: threading.Thread | None = None
        self.crowded: dict[str, dict[str, int]] = {}  # this process count's oversubscribed hosts
        self.visiting: tuple[Point, float] | None = None  # the visit in progress and when it began (the watchdog's)
        self.cell: list[Point] = []  # the cell in progress
        self.closed = threading.Lock()  # held by the watchdog from its verdict on: nothing more reaches the record
        self.finished = False  # the record is closed
        self.write()
        what = "sweep" if backend.name == "mpi" else "simulation"
        self.say(f"a2a {what}: {counted(self.total, 'point')} -> {directory}")
        workload = parse_workload(self.config.workload) if not state.done else None
        left = workload.record().left_out(self.config.collective) if workload and workload.kind == "recorded" else ""
        if left and workload is not None:
            self.say(f"note: {workload.text} replays its {self.config.collective} calls, not {left}")
        if state.ended:
            running = state.meta["point_in_progress"]["point"]
            what = running if len(state.ended) == 1 else f"the {len(state.ended)} points of the cell of {running}"
            _say(f"note: skipping {what}: {next(iter(state.ended.values()))}; recorded as skipped")

    def write(self) -> None:
        """meta.json as it stands."""
        write_meta(self.directory, self.meta)

    def say(self, text: str) -> None:
        """A line on stderr, unless quiet."""
        if not self.output.quiet:
            _say(text)

    def start_nprocs(self, nprocs: int, facts: dict[str, Any]) -> None:
        with self.closed:
            self.meta["by_nprocs"][str(nprocs)] = self.launch["by_nprocs"][str(nprocs)] = facts
            self.crowded = facts.get("oversubscribed") or {}
            self.meta["oversubscribed"] = self.meta["oversubscribed"] or bool(self.crowded)
            self.write()

    def start_point(self, point: Point) -> None:
        self.start_cell([point])
        self.visit(point)

    def start_cell(self, points: list[Point]) -> None:
        self.cell = points
        with self.closed:
            self.meta["point_in_progress"] = {"key": list(points[0].key), "point": str(points[0]),
                                              "cell": [list(p.key) for p in points]}
            self.write()
        if self.backend.timeout is not None and self.watchdog is None:
            self.watchdog = threading.Thread(target=self._watch, args=(self.backend.timeout,), daemon=True)
            self.watchdog.start()

    def visit(self, point: Point) -> None:
        self.visiting = (point, time.monotonic())

    def _watch(self, timeout: float) -> None:
        """End the job when one visit (or a simulated point) runs past `timeout` seconds."""
        while True:
            time.sleep(min(1.0, timeout / 10))
            visiting = self.visiting
            if visiting is not None and time.monotonic() - visiting[1] > timeout:
                self._timed_out(visiting[0])
                return

    def end_point(self, row: Row, samples: Any, detail: str = "", rounds: list[int] | None = None) -> None:
        with self.closed:
            self._record(row, samples, detail, rounds)

    def _record(self, row: Row, samples: Any, detail: str, rounds: list[int] | None) -> None:
        self.visiting = None
        if detail:
            self._log_error(row, detail)
        self.recorder.add(row, samples, rounds)
        self.meta.pop("point_in_progress", None)
        self.rows.append(row)
        self.weighed += self.weights.get(row.key, 0.0)
        self.launch["points"] = len(self.rows)
        if not row.valid and "WRONG RESULT" in row.note:
            _say(f"WARNING: {row.algorithm} gave a WRONG RESULT at {row.bytes_per_peer} B per peer "
                 f"on {row.nprocs} ranks ({row.note}); the point is marked invalid")
        self._status_line(row)

    def reweigh(self, weights: dict[tuple, float]) -> None:
        """Points' expected costs better known (a simulated variant's, once captured)."""
        self.weights.update(weights)

    def end_nprocs(self, nprocs: int, rows: list[Row]) -> None:
        tables = self.output.fmt in ("table", "tpu") and not self.output.quiet and rows
        if self.crowded and not self.output.allow_oversubscribed:
            _say(f"\nWARNING: {nprocs} ranks, {report.oversubscription_warning(self.crowded)}", err=not tables)
        if tables:
            title = f"\n{nprocs} ranks{self.backend.where(rows)}"
            defaults = self.meta["option_defaults"]
            if self.output.fmt == "tpu":
                _say(f"{title}\n" + report.tpu_table(rows, defaults), err=False)
            else:
                floor = report.noise_floor(rows, read_rounds(self.directory)) if self.backend.name == "mpi" else ""
                _say(f"{title} ({self.backend.details})\n" + report.explained_table(rows, defaults, self.errors_log)
                     + (f"\n{floor}" if floor else ""), err=False)
        self.crowded = {}

    def add(self, key: str, amount: float) -> None:
        """Add to a running total of meta.json (the replays' seconds, say)."""
        self.meta[key] = self.meta.get(key, 0.0) + amount

    def finish(self, status: str, later: list[str] | None = None) -> int:
        """Close the record, stamp meta.json, print what the format asks; the exit code. `later`: the overlap
        protocol's progress modes whose points need a launch of their own."""
        with self.closed:
            return self._finish(status, later)

    def _finish(self, status: str, later: list[str] | None) -> int:
        if status == "complete" and later:
            status = f"complete for progress {self.progress_mode}"
            _say(f"the points with progress {', '.join(later)} need a launch each (the library's progress thread is "
                 f"set up before MPI starts): {self.resume_command}")
        self.recorder.close()
        self.finished = True
        self._stamp(status)
        self.write()
        if self.output.fmt == "csv":
            _say(report.as_csv(self.rows), err=False, nl=False)
        elif self.output.fmt == "json":
            _say(report.as_json(self.rows), err=False)
        if not status.startswith("complete"):
            what = "sweep" if self.backend.name == "mpi" else "simulation"
            _say(f"{what} {status} after {len(self.rows)} of {counted(self.total, 'point')}; the record is in "
                 f"{self.directory}; finish it with: {self.resume_command}")
            return EXIT_TERMINATED
        if self.rows and not any(row.valid for row in self.rows):
            _say(f"error: {nothing_succeeded(self.rows, self.backend.name)}; the record is in {self.directory}"
                 + (f", the full text in {self.errors_log}" if self.errors_log else ""))
            return EXIT_NOTHING
        _say(f"results: {self.directory}")  # even quiet: where the record is, the one line a script needs
        return 0

    @property
    def errors_log(self) -> Path | None:
        """The record's log of failed points' full text, once a point failed."""
        return self.directory / ERRORS_LOG if self.meta.get("errors_log") else None

    @property
    def resume_command(self) -> str:
        return resume_command(self.backend.name, self.directory, max(self.config.nprocs))

    def _status_line(self, row: Row) -> None:
        if self.output.quiet:
            return
        now_ = time.monotonic()
        tty = sys.stderr.isatty()
        if not tty and now_ - self.last_status < STATUS_EVERY and len(self.rows) < self.total:
            return
        self.last_status = now_
        point = f"{row.nprocs} ranks {human_bytes(row.bytes_per_peer)} {shown(row.algorithm, row.options)}"
        share = self.weighed / (sum(self.weights.values()) or 1.0)
        text = status_line(len(self.rows), self.total, now_ - self.began, point, share)
        _say(("\r" + text.ljust(100)) if tty else text, nl=not tty or len(self.rows) == self.total)

    def _log_error(self, row: Row, detail: str) -> None:
        """Append a failed point's full text to the record's errors log, and name the log in meta.json."""
        with open(self.directory / ERRORS_LOG, "a") as log:
            log.write(f"== {shown(row.algorithm, row.options)} at {row.bytes_per_peer} B per peer on {row.nprocs} "
                      f"ranks: {row.note}\n"
                      f"{detail.rstrip()}\n\n")
        if self.meta.get("errors_log") != ERRORS_LOG:
            self.meta["errors_log"] = ERRORS_LOG
            self.write()

    def _stamp(self, status: str) -> None:
        end = now()
        self.meta.update(status=status, end=end)
        self.launch.update(status=status, end=end)

    def _timed_out(self, point: Point) -> None:
        """Close the record as it stands (the cell in progress is left out: its rounds did not end), then end the
        job with one line: which visit, what the record keeps, and a resume line that does not time out alike."""
        self.closed.acquire()  # never released: the job ends under it, and the main thread records nothing more
        timeout = float(self.backend.timeout or 0)
        self.meta["point_in_progress"] = {"key": list(point.key), "point": str(point), "timeout": timeout}
        self._stamp(f"timeout at {point}")
        self.write()
        others = len(self.cell) - 1
        cell = f" (its cell's {counted(others, 'other point')} left unrecorded too)" if others > 0 else ""
        abort = self.backend.abort
        assert abort is not None  # a backend that sets a timeout ends the job with its abort
        abort(f"error: a visit of {point} did not finish within --timeout {timeout:g} s{cell}; "
                           f"{self.directory} keeps the {counted(len(self.rows), 'point')} finished before it; "
                           f"{retry_hint(self.resume_command, timeout)}", EXIT_TIMEOUT)


    def abandoned(self, name: str) -> None:
        """Close the record as it stands when the ranks did not reach a synchronisation within the grace after the
        stop signal `name` (stuck inside a collective): the cell in progress is left out, and a resume measures it
        again, as after any stop. The job is ended next (by the caller), under the lock this keeps."""
        self.closed.acquire()  # never released: the main thread records nothing more
        if self.finished:
            return
        visiting = self.visiting
        inside = f" (inside a visit of {visiting[0]})" if visiting else ""
        _say(f"the ranks did not reach a synchronisation within {STOP_GRACE_SECONDS:g} s of {name}{inside}: stuck "
             "inside a collective, so the job ends here")
        self._finish(f"terminated by {name}", None)


def retry_hint(command: str, timeout: float) -> str:
    """How to resume after a visit ran past `timeout`: a timeout below the default was too short for this machine, so
    the line raises it (and measures that point again); a longer one caught a hang, which the resume skips."""
    if timeout < DEFAULTS["timeout"]:
        return (f"one visit takes longer than that here; resume with a longer one, which measures it again: "
                f"{command} --timeout {DEFAULTS['timeout']:g}")
    return f"resume with {command} (it records that point as skipped; a longer --timeout measures it again)"


def longer_timeout(meta: dict[str, Any], timeout: float) -> bool:
    """Whether `timeout` is longer than the --timeout a visit of the record's last launch ran past (so that point is
    measured again, not skipped)."""
    return timeout > float((meta.get("point_in_progress") or {}).get("timeout") or "inf")


def nothing_succeeded(rows: list[Row], backend: str) -> str:
    """Why no point of a launch succeeded, once: its most common note, and how many points it covers."""
    first = [row.note.split("; ")[0] or "no valid sample" for row in rows]
    notes = Counter(re.sub(r"\d+", "N", note) for note in first)  # one reason at every size is one reason
    kind, count = notes.most_common(1)[0]
    note = next(n for n in first if re.sub(r"\d+", "N", n) == kind)
    what = "measured" if backend == "mpi" else "simulated"
    others = f"{count} of {counted(len(rows), 'point')}, the others for {counted(len(notes) - 1, 'other reason')}" \
        if len(notes) > 1 else "the only point" if len(rows) == 1 else f"all {len(rows)} points"
    return f"{NOTHING.format(what)}: {note} ({others})"


def _say(text: str, err: bool = True, nl: bool = True) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + ("\n" if nl else ""))
    stream.flush()


def status_line(done: int, total: int, elapsed: float, what: str, share: float | None = None, width: int = 30) -> str:
    """'[####......] 12/40 ETA 1m05s  WHAT': the status line of a sweep or a simulation (how far it is); the ETA
    from the time so far and `share`, the part of the expected cost done (default: the part of the points)."""
    share = done / max(total, 1) if share is None else min(share, 1.0)
    eta = elapsed * (1 - share) / share if share > 0 else 0.0
    filled = int(width * done / max(total, 1))
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} ETA {_duration(eta)}  {what}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
