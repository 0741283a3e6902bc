"""`bench run`: sweep sizes x process counts x algorithms and keep a complete record."""
from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

import a2a
from a2a import report
from a2a.environment import cores_of_this_rank, describe_run, node_memory_share
from a2a.errors import BadOption
from a2a.mesh import Layout, layouts
from a2a.mpi import abort_job, abort_on_error, world
from a2a.registry import COLLECTIVES
from a2a.results import Recorder, Row, read_meta, read_rows, write_meta
from a2a.sweep import TIMINGS, Context, Observer, Point, SweepConfig, Variant, points, run_sweep
from a2a.workload import parse_workload

from .cli import main
from .options import (
    BadConfig,
    load_config,
    parse_algorithm_spec,
    parse_assignments,
    parse_count,
    parse_dtype,
    parse_list,
    parse_size,
)

DEFAULT_SIZES = "4:128K:x2"
EXIT_TERMINATED = 143
SWEEP_OPTIONS = ("config", "sizes", "dtype", "algorithms", "plugin", "option", "nprocs", "warmup",
                 "iterations", "max_time_per_point", "stall_threshold", "check", "max_memory", "ppn", "seed",
                 "timing", "mesh", "groups", "collective", "workload")


@main.command("run")
@click.option("--config", "config", type=click.Path(dir_okay=False), help="YAML sweep file; options given here win.")
@click.option("--sizes", help=f"Bytes per peer: list (8,1K,64KiB,1M) or START:STOP:xF. [default: {DEFAULT_SIZES}]")
@click.option("--dtype", help="NumPy element type. [default: float32]")
@click.option("--collective", type=click.Choice(COLLECTIVES), default=None,
              help="alltoall, or alltoallv with counts from --workload. [default: alltoall]")
@click.option("--workload", help="alltoallv count matrix: uniform, random:spread=S, zipf:s=S, sparse:density=D, "
                                 "moe:experts=E,topk=K,..., matrix:FILE.csv (docs/alltoallv.md). [default: uniform]")
@click.option("--algorithms", help="Names (or NAME:KEY=VALUE variants), comma-separated, or 'all' "
                                   "(every algorithm serving the collective). [default: all]")
@click.option("--plugin", multiple=True, help="A .py file or module that registers algorithms (repeatable).")
@click.option("--option", multiple=True, help="ALG.KEY=VALUE, e.g. bruck.radix=4 (repeatable).")
@click.option("--table", "decision_table", help="Decision table for the `auto` algorithm (auto.table=FILE).")
@click.option("--nprocs", help="Process counts to sweep. [default: powers of two up to the world size, and it]")
@click.option("--warmup", help="Untimed calls before timing each point. [default: 1]")
@click.option("--iterations", help="Timed calls per point. [default: 25]")
@click.option("--max-time-per-point", help="Seconds; stop a point early after 5 iterations. [default: 10]")
@click.option("--stall-threshold", help="Seconds above the point's fastest sample that make a stall. [default: 0.1]")
@click.option("--check/--no-check", default=None, help="Verify each point's result once. [default: check]")
@click.option("--output", help="Results directory. [default: results/<UTC time>]")
@click.option("--resume", "resume", type=click.Path(file_okay=False), help="Finish an interrupted run in DIR.")
@click.option("--timeout", help="Seconds one point may take before the job ends. [default: 300]")
@click.option("--max-memory",
              help="Bytes of buffers per rank; larger points are skipped. [default: a share of the node]")
@click.option("--ppn", help="Ranks per virtual node, for node-aware algorithms. [default: real nodes]")
@click.option("--seed", help="Seed of the algorithm order within a size. [default: 0]")
@click.option("--timing", type=click.Choice(TIMINGS), default=None,
              help="sync: barrier + one timed call, max over ranks, every sample; pipelined: OSU/IMB "
                   "back-to-back calls, per-rank means; global: ReproMPI's synchronised clocks, latest exit "
                   "minus an agreed start. [default: sync]")
@click.option("--mesh", help="Cartesian meshes, comma-separated (2x2x8,2x4); ranks fill them row-major.")
@click.option("--groups", multiple=True, help="Axes forming each replica group: z, y,z or 1x1x8 (repeatable).")
@click.option("--allow-oversubscribed", is_flag=True, help="No warning when ranks outnumber cores (still recorded).")
@click.option("--quiet", is_flag=True, help="No progress bar or tables (errors and warnings still show).")
@click.option("--format", "fmt", type=click.Choice(["table", "tpu", "csv", "json"]), default="table",
              help="stdout: tables per process count (seed mail's or TPU benchmark's columns), or rows at the end.")
@click.pass_context
def run(ctx: click.Context, **given: Any) -> None:
    """Sweep message sizes x process counts x algorithms (the main job)."""
    stop = StopRequest()
    stop.install()  # before MPI starts: a batch system's warning may come at any time
    start_mpi_like_osu()
    comm = world()
    explicit = {k: v for k, v in given.items()
                if ctx.get_parameter_source(k) is click.core.ParameterSource.COMMANDLINE}
    if given["decision_table"]:
        explicit["option"] = (*explicit.get("option", ()), f"auto.table={given['decision_table']}")
    directory, config, plugins, done = prepare(comm, explicit)
    session = Session(comm, directory, config, plugins, given["quiet"], given["fmt"],
                      float(given["timeout"] or config.timeout), given["allow_oversubscribed"], stop)
    sys.exit(session.sweep(done))


def start_mpi_like_osu() -> None:
    """Ask for MPI_THREAD_FUNNELED when every rank has a core, unless the user chose a level.

    At mpi4py's default MULTIPLE, MPICH takes a lock on every call: about 0.5 us more at 8 B
    per peer than C benchmarks (OSU, IMB) measure (docs/harness.md). But when ranks outnumber
    cores, that lock's yielding keeps spinning ranks off the CPU: 128 ranks on 2 cores took
    2 min 17 s at MULTIPLE against 8 min 17 s at FUNNELED here. So crowded nodes keep MULTIPLE.
    """
    import mpi4py

    if "MPI4PY_RC_THREAD_LEVEL" in os.environ:
        return
    if ranks_on_this_node() <= len(cores_of_this_rank()):
        mpi4py.rc.thread_level = "funneled"


# What launchers say about the ranks on this node: MPICH's hydra, Open MPI, Slurm's srun ("4(x2),2")
LOCAL_SIZE_VARIABLES = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE")


def ranks_on_this_node() -> int:
    """Ranks the launcher put on this node (the most per node for srun), 1 when it does not say."""
    for name in LOCAL_SIZE_VARIABLES:
        counts = [int(c) for c in re.findall(r"(\d+)(?:\(x\d+\))?", os.environ.get(name, ""))]
        if counts:
            return max(counts)
    return 1


def prepare(comm: Any, explicit: dict[str, Any]) -> tuple[Path, SweepConfig, list[str], set[tuple]]:
    """Resolve the config (fresh or resumed) identically on every rank; nothing is measured yet."""
    if explicit.get("resume"):
        return resume(comm, Path(explicit["resume"]), explicit)
    values = load_config(Path(explicit["config"])) if explicit.get("config") else {}
    values.update({k: v for k, v in explicit.items() if k != "config"})
    plugins = [str(p) for p in _as_list(values.get("plugin"))]
    for plugin in plugins:
        a2a.load_plugin(plugin)
    config = build_config(comm, values)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    directory = Path(values.get("output") or f"results/{stamp}")
    if (directory / "results.csv").exists():
        raise BadConfig(f"{directory} already holds results; use --resume {directory} or another --output")
    return directory, config, plugins, set()


def resume(comm: Any, directory: Path, explicit: dict[str, Any]) -> tuple[Path, SweepConfig, list[str], set[tuple]]:
    """Rebuild the interrupted sweep from DIR/meta.json; done points come from results.csv."""
    clashing = sorted(k for k in explicit if k in SWEEP_OPTIONS or k == "output")
    if clashing:
        raise BadConfig(f"--resume takes the sweep from {directory}/meta.json; drop --"
                        + ", --".join(k.replace("_", "-") for k in clashing))
    meta = read_meta(directory)
    if "config" not in meta:
        raise BadConfig(f"{directory} has no meta.json with a sweep config; it is not a run to resume")
    for plugin in meta.get("plugins", []):
        a2a.load_plugin(plugin)
    config = SweepConfig.from_dict(meta["config"])
    if max(config.nprocs) > comm.size:
        raise BadConfig(f"{directory} sweeps up to {max(config.nprocs)} ranks; this job has {comm.size}")
    done = {row.key for row in read_rows(directory)} if (directory / "results.csv").exists() else set()
    return directory, config, meta.get("plugins", []), done


def build_config(comm: Any, values: dict[str, Any]) -> SweepConfig:
    """Turn option values (text from the command line, or YAML values) into a checked config."""
    get = lambda key, default: default if values.get(key) in (None, "") else values[key]  # noqa: E731
    dtype = parse_dtype(str(get("dtype", "float32")))
    sizes = parse_list(_as_text(get("sizes", DEFAULT_SIZES)), "size")
    itemsize = __import__("numpy").dtype(dtype).itemsize
    odd = [s for s in sizes if s % itemsize]
    if odd:
        raise BadConfig(f"sizes {odd} are not multiples of {dtype}'s {itemsize} bytes")
    layouts = mesh_layouts(get("mesh", ""), _as_list(get("groups", [])))
    for layout in layouts:
        if layout.nprocs > comm.size:
            raise BadConfig(f"mesh {layout.mesh_text} holds {layout.nprocs} ranks, more than the {comm.size} "
                            "of this job")
    fallback = ",".join(str(m.nprocs) for m in layouts) if layouts else default_nprocs(comm.size)
    nprocs = parse_list(_as_text(get("nprocs", fallback)), "process count", parse_count)
    if nprocs[0] < 1 or nprocs[-1] > comm.size:
        raise BadConfig(f"process counts {nprocs} must lie between 1 and the world size {comm.size}")
    for layout in layouts:
        if layout.nprocs not in nprocs:
            raise BadConfig(f"mesh {layout.mesh_text} holds {layout.nprocs} ranks, not a process count of "
                            f"this sweep ({', '.join(map(str, nprocs))}; the world has {comm.size})")
    ppn = parse_count(str(get("ppn", 0)), "--ppn")
    options = parse_assignments(_as_list(get("option", [])), "--option")
    collective = _choice(get("collective", "alltoall"), COLLECTIVES, "--collective")
    workload = parse_workload(str(get("workload", "uniform"))).text
    if collective == "alltoall" and workload != "uniform":
        raise BadConfig(f"--workload {workload} makes uneven counts; add --collective alltoallv")
    return SweepConfig(
        sizes=sizes, dtype=dtype, nprocs=nprocs, ppn=ppn, collective=collective, workload=workload,
        variants=variants(_as_text(get("algorithms", "all")), options, ppn, collective, workload),
        warmup=parse_count(str(get("warmup", 1)), "--warmup"),
        iterations=max(1, parse_count(str(get("iterations", 25)), "--iterations")),
        max_time_per_point=_seconds(get("max_time_per_point", 10), "--max-time-per-point"),
        stall_threshold=_seconds(get("stall_threshold", 0.1), "--stall-threshold"),
        check=bool(get("check", True)),
        timeout=_seconds(get("timeout", 300), "--timeout"),
        max_memory=parse_size(str(get("max_memory", node_memory_share(comm))), "--max-memory"),
        seed=parse_count(str(get("seed", 0)), "--seed"),
        timing=_choice(get("timing", "sync"), TIMINGS, "--timing"),
        layouts=layouts,
    )


def mesh_layouts(meshes: Any, groups: list[str]) -> list[Layout]:
    """--mesh and --groups -> layouts (every mesh with every group choice)."""
    meshes = [m.strip() for m in _as_text(meshes).split(",") if m.strip()]
    if groups and not meshes:
        raise BadConfig("--groups needs --mesh (the axes are the mesh's)")
    return layouts(meshes, groups)


def _choice(value: Any, accepted: tuple[str, ...], what: str) -> str:
    if value not in accepted:
        raise BadConfig(f"{what} {value!r}; accepted: {', '.join(accepted)}")
    return str(value)


def variants(text: str, options: dict[str, dict[str, str]], ppn: int, collective: str = "alltoall",
             workload: str = "uniform") -> list[Variant]:
    """Algorithm specs -> variants with resolved options (unknown names, options and collectives fail here)."""
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if specs == ["all"]:
        specs = [name for name in a2a.algorithms(collective) if name != "auto"]
    known = {parse_algorithm_spec(s)[0] for s in specs}
    stray = sorted(set(options) - known)
    if stray:
        raise BadOption(f"--option names {', '.join(stray)}, which is not among the algorithms swept "
                        f"({', '.join(sorted(known))})")
    chosen = []
    for spec in specs:
        name, own = parse_algorithm_spec(spec)
        algorithm = a2a.get(name)
        algorithm.kind(collective)
        wanted = {**options.get(name, {}), **own}
        if ppn and "ppn" in algorithm.options and "ppn" not in wanted:
            wanted["ppn"] = ppn
        if name == "auto" and collective == "alltoallv":  # decide for the workload swept
            wanted.setdefault("workload", workload)
        variant = Variant(name, algorithm.resolve(wanted))
        if variant not in chosen:
            chosen.append(variant)
    if not chosen:
        raise BadConfig("no algorithms to sweep; name some with --algorithms (see `bench list`)")
    return chosen


def default_nprocs(size: int) -> str:
    """Powers of two from 2 up to the world size, and the world size itself."""
    counts = {size}
    n = 2
    while n <= size:
        counts.add(n)
        n *= 2
    return ",".join(map(str, sorted(counts)))


def _as_list(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _as_text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _seconds(value: Any, what: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds > 0:
        raise BadConfig(f"{what} {value!r}; accepted: a positive number of seconds")
    return seconds


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

    def sweep(self, done: set[tuple]) -> int:
        """Run every missing point; return the exit code."""
        with abort_on_error(self.comm):  # a failure on any rank, rank 0's files included, ends the job
            meta = describe_run(self.comm, self.config, self.plugins)
            observer = Output(self, meta, len(done)) if self.comm.rank == 0 else Observer()
            finished = run_sweep(self.comm, self.config, done, observer, self.stop)
            if self.comm.rank == 0:
                observer.finish("complete" if finished else f"terminated by {self.stop.name}")
        return 0 if finished else EXIT_TERMINATED


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


class Output(Observer):
    """Rank 0's side of a sweep: record, meta.json, progress, tables, and the per-point watchdog."""

    def __init__(self, session: Session, meta: dict[str, Any], already: int):
        self.session, self.meta = session, meta
        self.recorder = Recorder(session.directory)
        self.total = sum(len(points(session.config, n)) for n in session.config.nprocs) - already
        self.measured, self.rows, self.began = 0, [], time.monotonic()
        self.last_progress, self.watchdog, self.crowded = 0.0, None, {}
        meta.update(status="running", resumed_with=already or None, oversubscribed=False, by_nprocs={})
        write_meta(session.directory, meta)
        if not session.quiet:
            click.echo(f"a2a sweep: {self.total} points -> {session.directory}", err=True)

    def start_nprocs(self, nprocs: int, context: Context, layouts: list[Layout]) -> None:
        self.meta["by_nprocs"][str(nprocs)] = {
            "nnodes": context.nnodes, "ppn": context.ppn, "oversubscribed": context.crowded,
            "harness": context.harness,
            **({"clock": context.clock.report} if context.clock else {}),
            "replica_groups": [{"mesh": m.mesh_text, "groups": m.strategy, "members": m.groups()} for m in layouts],
        }
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
        if not row.valid and not row.note.startswith(("skipped", "refused")):
            click.echo(f"WARNING: {row.algorithm} gave a WRONG RESULT at {row.bytes_per_peer} B per peer "
                       f"on {row.nprocs} ranks ({row.note}); the point is marked invalid", err=True)
        self._progress(row)

    def end_nprocs(self, nprocs: int, rows: list[Row]) -> None:
        tables = self.session.fmt in ("table", "tpu") and not self.session.quiet and rows
        if self.crowded and not self.session.allow_oversubscribed:
            click.echo(f"\nWARNING: {nprocs} ranks, {report.oversubscription_warning(self.crowded)}",
                       err=not tables)
        if tables and self.session.fmt == "tpu":
            click.echo(f"\n{nprocs} ranks\n" + report.tpu_table(rows))
        elif tables:
            config = self.session.config
            what = f"{config.collective}, workload {config.workload}; " if config.collective != "alltoall" else ""
            click.echo(f"\n{nprocs} ranks ({what}{config.timing} timing; times in microseconds; "
                       f"! = stalled, a sample >= fastest + {self.session.config.stall_threshold:g} s)")
            click.echo(report.table(rows))
        self.crowded = {}

    def finish(self, status: str) -> None:
        """Close the record, stamp meta.json, print machine-readable output if asked."""
        self.recorder.close()
        self.meta.update(status=status, end=_now())
        write_meta(self.session.directory, self.meta)
        if self.session.fmt == "csv":
            click.echo(report.as_csv(self.rows), nl=False)
        elif self.session.fmt == "json":
            click.echo(report.as_json(self.rows))
        if status != "complete":
            click.echo(f"sweep {status} after {self.measured} of {self.total} points; the record is in "
                       f"{self.session.directory}; finish it with: "
                       f"python -m bench run --resume {self.session.directory}", err=True)
        elif not self.session.quiet:
            click.echo(f"results: {self.session.directory}", err=True)

    def _progress(self, row: Row) -> None:
        if self.session.quiet:
            return
        now = time.monotonic()
        tty = sys.stderr.isatty()
        if not tty and now - self.last_progress < 15 and self.measured < self.total:
            return
        self.last_progress = now
        elapsed = now - self.began
        eta = elapsed / self.measured * (self.total - self.measured)
        width = 30
        filled = int(width * self.measured / max(self.total, 1))
        text = (f"[{'#' * filled}{'.' * (width - filled)}] {self.measured}/{self.total} "
                f"ETA {_duration(eta)}  {row.nprocs} ranks {report.human_bytes(row.bytes_per_peer)} "
                f"{row.algorithm}")
        click.echo(("\r" + text.ljust(100)) if tty else text, err=True, nl=not tty or self.measured == self.total)

    def _timed_out(self, point: Point) -> None:
        message = (f"error: {point} did not finish within --timeout {self.session.timeout:g} s; "
                   f"{self.measured} points are in {self.session.directory}; resume with "
                   f"python -m bench run --resume {self.session.directory}")
        self.meta.update(status=f"timeout at {point}", end=_now())
        write_meta(self.session.directory, self.meta)
        abort_job(self.session.comm, message, 124, prefix_rank=False)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
