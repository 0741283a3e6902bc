"""One launch of a sweep: the record on disk, stop signals, the watchdog, progress and tables."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from a2a.algos.registry import get, load_plugin
from a2a.errors import BadConfig
from a2a.measure.driver import Context, Observer, run_sweep
from a2a.measure.environment import cores_of_this_rank, describe_run
from a2a.measure.grid import Point, SweepConfig, points
from a2a.measure.mesh import Layout
from a2a.mpi import abort_job, abort_on_error, ranks_on_this_node
from a2a.record import report
from a2a.record.results import Recorder, Row, read_meta, read_rows, write_meta
from a2a.units import human_bytes

EXIT_TERMINATED = 143
EXIT_TIMEOUT = 124


def set_thread_level() -> None:
    """Ask for MPI_THREAD_SERIALIZED when every rank has a core, unless the user chose a level.

    At mpi4py's default MULTIPLE, MPICH takes a lock on every call: about 0.5 us more at 8 B
    per peer than C benchmarks (OSU, IMB) measure (docs/harness.md). But when ranks outnumber
    cores, that lock's yielding keeps spinning ranks off the CPU: 128 ranks on 2 cores took
    2 min 17 s at MULTIPLE against 8 min 17 s at FUNNELED here. So crowded nodes keep MULTIPLE.
    SERIALIZED, not FUNNELED, because the watchdog calls MPI_Abort from its timer thread.
    """
    import mpi4py

    if "MPI4PY_RC_THREAD_LEVEL" in os.environ:
        return
    if ranks_on_this_node() <= len(cores_of_this_rank()):
        mpi4py.rc.thread_level = "serialized"


@dataclass
class SweepState:
    """A sweep to run: its config, plug-ins, the points already done, and the record of earlier launches."""

    config: SweepConfig
    plugins: list[str]
    done: set[tuple]
    meta: dict[str, Any]


def resume(comm: Any, directory: Path, dtype: str | None = None, force: bool = False) -> SweepState:
    """The sweep of DIR/meta.json, refused under another MPI library or dtype unless forced."""
    from mpi4py import MPI

    meta = read_meta(directory)
    if "config" not in meta:
        raise BadConfig(f"{directory} has no meta.json with a sweep config; it is not a run to resume")
    for plugin in meta.get("plugins", []):
        load_plugin(plugin)
    config = SweepConfig.from_dict(meta["config"])
    if max(config.nprocs) > comm.size:
        raise BadConfig(f"{directory} sweeps up to {max(config.nprocs)} ranks; this job has {comm.size}")
    library, recorded = MPI.Get_library_version().strip(), meta.get("mpi_library") or ""
    if recorded and library != recorded and not force:
        raise BadConfig(f"{directory} was measured with {_first_line(recorded)}, but this job runs "
                        f"{_first_line(library)}; resume under the same library, or give --force-resume "
                        "to add this library's points to the record (meta.json lists each launch's library)")
    if dtype and dtype != config.dtype:
        if not force:
            raise BadConfig(f"{directory} was measured in {config.dtype}, not {dtype}; drop --dtype, or give "
                            f"--force-resume to add {dtype} points to the record")
        config = replace(config, dtype=dtype)
    done = {row.key for row in read_rows(directory)} if (directory / "results.csv").exists() else set()
    return SweepState(config, meta.get("plugins", []), done, meta)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "an unknown MPI library"


# SIGUSR1 too: Open MPI's mpirun and srun kill on SIGTERM instead of passing it on, while all
# launchers pass SIGUSR1 through, so batch scripts forward Slurm's warning as SIGUSR1.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


@dataclass
class StopRequest:
    """Set by a stop signal; the sweep reads it at every synchronisation, so all ranks agree."""

    event: threading.Event = field(default_factory=threading.Event)
    name: str = "a signal on another rank"

    def install(self) -> None:
        """Catch the stop signals in this process."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)

    def __call__(self) -> bool:
        return self.event.is_set()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.name = signal.Signals(signum).name
        self.event.set()


@dataclass
class Session:
    """One launch of the sweep: the record on disk, signals, the watchdog and the output."""

    comm: Any
    directory: Path
    config: SweepConfig
    plugins: list[str]
    quiet: bool
    fmt: str
    timeout: float
    allow_oversubscribed: bool
    stop: StopRequest
    earlier: dict[str, Any] = field(default_factory=dict)  # meta.json of the launches before this one

    def sweep(self, done: set[tuple]) -> int:
        """Run every missing point; return the exit code."""
        with abort_on_error(self.comm):  # a failure on any rank, rank 0's files included, ends the job
            launch = {**describe_run(self.comm, self.config, self.plugins),
                      "option_defaults": option_defaults(self.config)}
            observer = Output(self, launch, len(done)) if self.comm.rank == 0 else Observer()
            finished = run_sweep(self.comm, self.config, done, observer, self.stop)
            if self.comm.rank == 0:
                observer.finish("complete" if finished else f"terminated by {self.stop.name}")
        return 0 if finished else EXIT_TERMINATED


def option_defaults(config: SweepConfig) -> dict[str, dict[str, str]]:
    """Each swept algorithm's option defaults, so that tables of the record need no registry to read."""
    return {v.name: {k: str(o.default) for k, o in get(v.name).options.items()} for v in config.variants}


def _say(text: str, err: bool = True, nl: bool = True) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + ("\n" if nl else ""))
    stream.flush()


class Output(Observer):
    """Rank 0's side of a sweep: record, meta.json, progress, tables, and the per-point watchdog."""

    def __init__(self, session: Session, launch: dict[str, Any], already: int):
        self.session = session
        self.recorder = Recorder(session.directory)
        self.total = sum(len(points(session.config, n)) for n in session.config.nprocs) - already
        self.measured, self.rows, self.began = 0, [], time.monotonic()
        self.last_progress, self.watchdog, self.crowded = 0.0, None, {}
        self.meta, self.launch = record_launch(session.earlier, launch, already, self.recorder.dropped)
        write_meta(session.directory, self.meta)
        if not session.quiet:
            _say(f"a2a sweep: {self.total} points -> {session.directory}")

    def start_nprocs(self, nprocs: int, context: Context, layouts: list[Layout]) -> None:
        facts = {
            "nnodes": context.nnodes, "ppn": context.ppn, "oversubscribed": context.crowded,
            "harness": context.harness,
            **({"clock": context.clock.report} if context.clock else {}),
            "replica_groups": [{"mesh": m.mesh_text, "groups": m.strategy, "members": m.groups()} for m in layouts],
        }
        self.meta["by_nprocs"][str(nprocs)] = self.launch["by_nprocs"][str(nprocs)] = facts
        self.meta["oversubscribed"] = self.meta["oversubscribed"] or bool(context.crowded)
        write_meta(self.session.directory, self.meta)
        self.crowded = context.crowded

    def start_point(self, point: Point) -> None:
        self.watchdog = threading.Timer(self.session.timeout, self._timed_out, (point,))
        self.watchdog.daemon = True
        self.watchdog.start()

    def end_point(self, row: Row, samples: Any) -> None:
        self.watchdog.cancel()
        self.recorder.add(row, samples)
        self.rows.append(row)
        self.measured += 1
        self.launch["points"] = self.measured
        if not row.valid and not row.note.startswith(("skipped", "refused")):
            _say(f"WARNING: {row.algorithm} gave a WRONG RESULT at {row.bytes_per_peer} B per peer "
                 f"on {row.nprocs} ranks ({row.note}); the point is marked invalid")
        self._progress(row)

    def end_nprocs(self, nprocs: int, rows: list[Row]) -> None:
        tables = self.session.fmt in ("table", "tpu") and not self.session.quiet and rows
        if self.crowded and not self.session.allow_oversubscribed:
            _say(f"\nWARNING: {nprocs} ranks, {report.oversubscription_warning(self.crowded)}", err=not tables)
        if tables and self.session.fmt == "tpu":
            _say(f"\n{nprocs} ranks\n" + report.tpu_table(rows, self.meta["option_defaults"]), err=False)
        elif tables:
            config = self.session.config
            what = f"{config.collective}, workload {config.workload}; " if config.collective != "alltoall" else ""
            cold = ", cold caches" if config.cache == "cold" else ""
            _say(f"\n{nprocs} ranks ({what}{config.timing} timing{cold}; times in microseconds; "
                 f"! = stalled, a sample >= fastest + {config.stall_threshold:g} s)", err=False)
            _say(report.explained_table(rows, self.meta["option_defaults"]), err=False)
        self.crowded = {}

    def finish(self, status: str) -> None:
        """Close the record, stamp meta.json, print machine-readable output if asked."""
        self.recorder.close()
        self._stamp(status)
        write_meta(self.session.directory, self.meta)
        if self.session.fmt == "csv":
            _say(report.as_csv(self.rows), err=False, nl=False)
        elif self.session.fmt == "json":
            _say(report.as_json(self.rows), err=False)
        if status != "complete":
            _say(f"sweep {status} after {self.measured} of {self.total} points; the record is in "
                 f"{self.session.directory}; finish it with: "
                 f"python -m bench run --resume {self.session.directory}")
        elif not self.session.quiet:
            _say(f"results: {self.session.directory}")

    def _progress(self, row: Row) -> None:
        if self.session.quiet:
            return
        now = time.monotonic()
        tty = sys.stderr.isatty()
        if not tty and now - self.last_progress < 15 and self.measured < self.total:
            return
        self.last_progress = now
        text = progress_text(self.measured, self.total, now - self.began,
                             f"{row.nprocs} ranks {human_bytes(row.bytes_per_peer)} {row.algorithm}")
        _say(("\r" + text.ljust(100)) if tty else text, nl=not tty or self.measured == self.total)

    def _stamp(self, status: str) -> None:
        end = _now()
        self.meta.update(status=status, end=end)
        self.launch.update(status=status, end=end)

    def _timed_out(self, point: Point) -> None:
        message = (f"error: {point} did not finish within --timeout {self.session.timeout:g} s; "
                   f"{self.measured} points are in {self.session.directory}; resume with "
                   f"python -m bench run --resume {self.session.directory}")
        self._stamp(f"timeout at {point}")
        write_meta(self.session.directory, self.meta)
        abort_job(self.session.comm, message, EXIT_TIMEOUT, prefix_rank=False)


# What each launch records of itself in meta.json's `launches`, besides its status and points
LAUNCH_FACTS = ("command", "start", "git_commit", "mpi_library", "mpi_thread_level", "world_size", "hosts",
                "slurm_job_id")


def record_launch(earlier: dict[str, Any], launch: dict[str, Any], already: int, dropped: int
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """meta.json for this launch after the earlier ones, and this launch's entry in its `launches`.

    The top level describes the latest launch (its library, hosts, config) but keeps the first
    start; `by_nprocs` merges every launch's, the latest winning for a process count measured twice.
    """
    entry = {**{k: launch.get(k) for k in LAUNCH_FACTS}, "dtype": launch["config"]["dtype"], "status": "running",
             "end": None, "points_before": already, "orphan_samples_dropped": dropped, "points": 0, "by_nprocs": {}}
    launches = earlier.get("launches") or ([_legacy_launch(earlier)] if earlier else [])
    if launches and launches[-1]["status"] == "running":  # killed: what it measured is what is recorded now
        launches[-1].update(status="ended without closing the record (killed?)",
                            points=already - launches[-1].get("points_before", 0))
    meta = {**launch, "start": earlier.get("start", launch["start"]), "status": "running",
            "oversubscribed": bool(earlier.get("oversubscribed")), "by_nprocs": dict(earlier.get("by_nprocs", {})),
            "launches": [*launches, entry]}
    return meta, entry


def _legacy_launch(meta: dict[str, Any]) -> dict[str, Any]:
    """A launch entry for a record written before meta.json kept `launches`."""
    return {**{k: meta.get(k) for k in LAUNCH_FACTS}, "dtype": meta.get("config", {}).get("dtype"),
            "status": meta.get("status"), "end": meta.get("end"), "by_nprocs": meta.get("by_nprocs", {})}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def progress_text(done: int, total: int, elapsed: float, what: str, width: int = 30) -> str:
    """'[####......] 12/40 ETA 1m05s  WHAT': the progress line of a sweep or a simulation."""
    eta = elapsed / done * (total - done) if done else 0.0
    filled = int(width * done / max(total, 1))
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} ETA {_duration(eta)}  {what}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
