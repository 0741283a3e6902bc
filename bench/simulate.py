"""`bench simulate`: every algorithm's captured schedule replayed on SimGrid SMPI at any scale."""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import click
import numpy as np

import a2a
from a2a import fabric
from a2a.algos.registry import NATIVE, candidates
from a2a.errors import A2AError, BadConfig, BadOption, CaptureError
from a2a.measure.environment import git_commit
from a2a.measure.grid import Point, SweepConfig, Variant, parse_variant, points, variants
from a2a.measure.mesh import group_comm, mesh_layouts
from a2a.measure.session import option_defaults, progress_text
from a2a.record import report
from a2a.record.results import Recorder, Row, read_meta, read_rows, write_meta
from a2a.record.stats import bandwidths
from a2a.simulate import simgrid
from a2a.simulate.capture import Schedule, capture_unit

from .group import main
from .options import parse_assignments, parse_count, parse_dtype, parse_list

TIMING = "simulated"
DEFAULTS = {"platform": "switch", "link": "100Gbps,1us", "nprocs": "64", "sizes": "8,1K,64K"}


@dataclass(frozen=True)
class Machine:
    """What the simulated calls run on: the topology, its links, and the memory copy rate."""

    platform: str
    link: simgrid.Link
    copy_bandwidth: float
    ppn: int
    network: str = "calibrated"

    def placement(self, nprocs: int) -> tuple[Any, int]:
        """The fabric for `nprocs` ranks and the ranks per node (block placement)."""
        ppn = self.ppn or 1
        kind = self.platform.split(":")[0].strip().lower()
        if kind in ("switch", "ring"):
            return fabric.parse(self.platform, nodes=math.ceil(nprocs / ppn)), ppn
        shape = simgrid.routable(fabric.parse(self.platform))
        ppn = self.ppn or math.ceil(nprocs / shape.nodes)
        if math.ceil(nprocs / ppn) > shape.nodes:
            raise BadConfig(f"{nprocs} ranks at --ppn {ppn} need {math.ceil(nprocs / ppn)} nodes; "
                            f"{shape.spec} has {shape.nodes} (raise --ppn or leave it out)")
        return shape, ppn


@main.command("simulate")
@click.option("--platform", help="switch, ring, torus:AxB[xC..], fattree:LEAVESxNODES[,oversub=R], "
                                 f"dragonfly:GxCxRxN. [default: {DEFAULTS['platform']}]")
@click.option("--link", help="Every link's RATE,LATENCY, e.g. 100Gbps,1us or 125MBps,50us. "
                             f"[default: {DEFAULTS['link']}]")
@click.option("--nprocs", help=f"Process counts, e.g. 64,1024,4096. [default: {DEFAULTS['nprocs']}]")
@click.option("--sizes", help=f"Bytes per peer (8,1K,4M or START:STOP:xF). [default: {DEFAULTS['sizes']}]")
@click.option("--dtype", help="NumPy element type. [default: float32]")
@click.option("--algorithms", help="Names or NAME:KEY=VALUE variants, or 'all'; native:selector=mpich|ompi|default "
                                   "or native:algorithm=NAME picks SMPI's MPI_Alltoall. [default: all]")
@click.option("--option", multiple=True, help="ALG.KEY=VALUE (repeatable).")
@click.option("--plugin", multiple=True, help="A .py file or module that registers algorithms (repeatable).")
@click.option("--ppn", help="Ranks per node. [default: 1 on switch and ring; else as many as the ranks need]")
@click.option("--mesh", help="Cartesian meshes (4x4x4); ranks fill them row-major.")
@click.option("--groups", multiple=True, help="Axes forming each replica group: z, y,z or 1x1x4 (repeatable).")
@click.option("--copy-bandwidth",
              help="Bytes/s of a local copy. [default: measured here, best of 20 np.copyto of 8 MiB]")
@click.option("--network", type=click.Choice(list(simgrid.NETWORKS)), default=None,
              help="calibrated: SMPI's size-dependent latency and bandwidth factors; ideal: none "
                   "(latency x hops + bytes / rate). [default: calibrated]")
@click.option("--output", help="Results directory. [default: results/<UTC time>-sim]")
@click.option("--resume", type=click.Path(file_okay=False), help="Finish an interrupted simulation in DIR.")
@click.option("--keep-traces", type=click.Path(file_okay=False), help="Keep platform, hostfile and traces under DIR.")
@click.option("--replay-timeout", type=click.FloatRange(min=0, min_open=True), default=3600.0, show_default=True,
              help="Seconds of wall time one replay may take; a longer one is stopped and its point recorded "
                   "as not simulated.")
@click.option("--quiet", is_flag=True, help="No progress or tables.")
@click.option("--format", "fmt", type=click.Choice(["table", "tpu", "csv", "json"]), default="table",
              help="stdout: tables per process count, the TPU benchmark's columns, or rows at the end.")
def simulate(**given: Any) -> None:
    """Replay every algorithm's exact schedule on a simulated platform (SimGrid SMPI)."""
    problem = simgrid.missing()
    if problem:
        raise BadConfig(problem)
    directory, config, machine, meta, done = prepare(given)
    sys.exit(Simulation(directory, config, machine, meta, given["quiet"], given["fmt"],
                        given["keep_traces"], given["replay_timeout"]).run(done))


def prepare(given: dict[str, Any]) -> tuple[Path, SweepConfig, Machine, dict[str, Any], set[tuple]]:
    """Check every option (nothing is simulated yet); fresh or resumed."""
    if given["resume"]:
        directory = Path(given["resume"])
        clashing = [k for k, v in given.items() if v not in (None, (), False) and k not in
                    ("resume", "quiet", "fmt", "keep_traces", "replay_timeout")]
        if clashing:
            raise BadConfig(f"--resume takes the simulation from {directory}/meta.json; drop --"
                            + ", --".join(k.replace("_", "-") for k in clashing))
        meta = read_meta(directory)
        if meta.get("timing") != TIMING or "config" not in meta:
            raise BadConfig(f"{directory} holds no simulation to resume (no simulated meta.json)")
        for plugin in meta.get("plugins", []):
            a2a.load_plugin(plugin)
        config = SweepConfig.from_dict(meta["config"])
        machine = Machine(meta["platform"], simgrid.Link.parse(meta["link"]), meta["copy_bandwidth"],
                          meta["ppn_option"], meta.get("network", "calibrated"))
        done = {r.key for r in read_rows(directory)} if (directory / "results.csv").exists() else set()
        return directory, config, machine, meta, done
    value = lambda key: given.get(key) or DEFAULTS.get(key)  # noqa: E731
    for plugin in given["plugin"]:
        a2a.load_plugin(plugin)
    dtype = parse_dtype(given["dtype"] or "float32")
    itemsize = np.dtype(dtype).itemsize
    sizes = parse_list(value("sizes"), "size")
    odd = [s for s in sizes if s % itemsize]
    if odd:
        raise BadConfig(f"sizes {odd} are not multiples of {dtype}'s {itemsize} bytes")
    layouts = mesh_layouts(given["mesh"] or "", list(given["groups"]))
    fallback = ",".join(str(m.nprocs) for m in layouts) if layouts else DEFAULTS["nprocs"]
    nprocs = parse_list(given["nprocs"] or fallback, "process count", parse_count)
    if nprocs[0] < 1:
        raise BadConfig("process counts must be 1 or more")
    for layout in layouts:
        if layout.nprocs not in nprocs:
            raise BadConfig(f"mesh {layout.mesh_text} holds {layout.nprocs} ranks, not a process count of "
                            f"this simulation ({', '.join(map(str, nprocs))})")
    ppn = parse_count(given["ppn"], "--ppn") if given["ppn"] else 0
    machine = Machine(value("platform"), simgrid.Link.parse(value("link")),
                      _bandwidth(given["copy_bandwidth"]), ppn, given["network"] or "calibrated")
    for n in nprocs:
        machine.placement(n)  # refuses a platform too small, or a bad spec, now
    config = SweepConfig(sizes=sizes, dtype=dtype, nprocs=nprocs, ppn=ppn, iterations=1, warmup=0,
                         variants=simulated_variants(given["algorithms"] or "all", list(given["option"]), ppn),
                         timing=TIMING, layouts=layouts, check=False)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    directory = Path(given["output"] or f"results/{stamp}-sim")
    if (directory / "results.csv").exists():
        raise BadConfig(f"{directory} already holds results; use --resume {directory} or another --output")
    meta = {"command": " ".join(sys.argv), "argv": sys.argv, "timing": TIMING, "config": config.as_dict(),
            "plugins": list(given["plugin"]), "platform": machine.platform, "link": machine.link.text,
            "copy_bandwidth": machine.copy_bandwidth, "ppn_option": ppn, "network": machine.network,
            "simgrid": simgrid.version(),
            "smpirun": simgrid.smpirun(), "replayer": simgrid.replayer(), "a2a": a2a.__version__,
            "git_commit": git_commit(), "start": _now()}
    return directory, config, machine, meta, set()


def simulated_variants(text: str, assignments: list[str], ppn: int) -> list[Variant]:
    """Our algorithms as `bench run` resolves them; native's options pick SMPI's MPI_Alltoall."""
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if specs == ["all"]:
        specs = candidates("alltoall")
    natives = [s for s in specs if parse_variant(s)[0] == NATIVE]
    ours = [s for s in specs if s not in natives]
    options = parse_assignments(assignments, "--option")
    chosen = variants(",".join(ours), {k: v for k, v in options.items() if k != NATIVE}, ppn) if ours else []
    for spec in natives:
        given = {**options.get(NATIVE, {}), **parse_variant(spec)[1]}
        chosen += [Variant(NATIVE, o) for o in native_options(given)]
    if not chosen:
        raise BadConfig("no algorithms to simulate; name some with --algorithms (see `bench list`)")
    return chosen


def native_options(given: dict[str, str]) -> list[dict[str, str]]:
    """native -> the mpich and ompi selectors; selector=S, algorithm=NAME or algorithm=all as asked."""
    unknown = sorted(set(given) - {"selector", "algorithm"})
    if unknown:
        raise BadOption(f"native: unknown option {', '.join(unknown)} in the simulator; accepted: "
                        f"selector ({', '.join(simgrid.SELECTORS)}) or algorithm (SMPI's alltoall names, or all)")
    if "algorithm" in given:
        names = simgrid.SMPI_ALLTOALL if given["algorithm"] == "all" else [given["algorithm"]]
        bad = [n for n in names if n not in simgrid.SMPI_ALLTOALL]
        if bad:
            raise BadOption(f"native: algorithm={bad[0]!r}; accepted: {', '.join(simgrid.SMPI_ALLTOALL)} or all")
        return [{"algorithm": n} for n in names]
    selectors = [given["selector"]] if "selector" in given else ["mpich", "ompi"]
    bad = [s for s in selectors if s not in simgrid.SELECTORS]
    if bad:
        raise BadOption(f"native: selector={bad[0]!r}; accepted: {', '.join(simgrid.SELECTORS)}")
    return [{"selector": s} for s in selectors]


def _bandwidth(text: str | None) -> float:
    if not text:
        return simgrid.copy_bandwidth()
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise BadConfig(f"--copy-bandwidth {text!r}; accepted: bytes per second above 0, e.g. 5e9")
    return value


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Simulation:
    """Capture each variant once per process count and layout, replay it at every size, record rows."""

    def __init__(self, directory: Path, config: SweepConfig, machine: Machine, meta: dict[str, Any],
                 quiet: bool, fmt: str, keep: str | None, replay_timeout: float = 3600):
        self.directory, self.config, self.machine, self.meta = directory, config, machine, meta
        self.quiet, self.fmt, self.keep = quiet, fmt, Path(keep) if keep else None
        self.replay_timeout = replay_timeout
        self.rows: list[Row] = []

    def run(self, done: set[tuple]) -> int:
        """Simulate every missing point; 0 when complete, 143 when interrupted (the record is kept).

        A variant's points follow one another (one capture serves its sizes, then goes), and
        each replay runs in the background while the next point is captured and written.
        """
        todo = sorted((p for n in self.config.nprocs for p in points(self.config, n) if p.key not in done),
                      key=lambda p: (p.nprocs, str(p.layout), p.variant.label))  # stable: sizes stay ascending
        recorder = Recorder(self.directory)
        self.meta.update(status="running", resumed_with=len(done) or None)
        write_meta(self.directory, self.meta)
        self._say(f"a2a simulate: {len(todo)} points on {self.machine.platform} ({self.machine.link.text}) "
                  f"-> {self.directory}")
        if simgrid.slow_version(self.meta["simgrid"]):
            self._say(f"note: SimGrid {self.meta['simgrid']} replays many small messages in flight slowly "
                      "(linear: O(p^4), hours at 1024 ranks); `make simgrid` builds SimGrid 4.1")
        status, began = "complete", time.monotonic()
        schedules: dict[tuple, Schedule | str] = {}
        running: tuple[Point, Row, simgrid.ReplayJob | None] | None = None

        def finish(point: Point, row: Row, job: simgrid.ReplayJob | None) -> None:
            seconds = self._simulated(row, job.result) if job else None
            recorder.add(row, [seconds] if seconds is not None else [])
            self.rows.append(row)
            self._progress(len(self.rows), len(todo), began, point)

        try:
            for point in todo:
                row, job = self._ready(point, schedules)
                if running:
                    finish(*running)
                running = point, row, self._started(row, job, point) if job else None
            if running:
                finish(*running)
                running = None
        except KeyboardInterrupt:
            status = "terminated by SIGINT"
        finally:
            if running and running[2]:
                running[2].stop()
            recorder.close()
            self.meta.update(status=status, end=_now())
            write_meta(self.directory, self.meta)
        self._finish(status, len(done))
        return 0 if status == "complete" else 143

    def _ready(self, point: Point, schedules: dict[tuple, Schedule | str]) -> tuple[Row, simgrid.ReplayJob | None]:
        """A point's row, and its replay's files (None with a note when it cannot be simulated)."""
        shape, ppn = self.machine.placement(point.nprocs)
        nnodes = math.ceil(point.nprocs / ppn)
        dtype = np.dtype(point.dtype)
        row = Row(point.nprocs, nnodes, ppn, point.variant.name, point.variant.options_text, point.dtype,
                  point.bytes_per_peer // dtype.itemsize, point.bytes_per_peer, iterations=1, warmup=0,
                  timing=TIMING, platform=shape.spec)
        layout = point.layout
        if layout:
            row.mesh, row.groups, row.group_size, row.ngroups = (layout.mesh_text, layout.strategy,
                                                                 layout.group_size, layout.ngroups)
        key = (point.nprocs, point.variant.label, layout)
        if key not in schedules:
            schedules.clear()  # the points of a variant come together: the last one's capture is done with
            schedules[key] = self._capture(point, ppn)
        schedule = schedules[key]
        if isinstance(schedule, str):
            row.note = schedule
            return row, None
        scaled = schedule.scaled(row.count) if row.count != schedule.count else schedule
        keep = self.keep / f"{point.nprocs}-{point.variant.label}-{point.bytes_per_peer}" if self.keep else None
        try:
            return row, simgrid.ReplayJob(scaled, shape, self.machine.link, self.machine.copy_bandwidth, keep)
        except CaptureError as failed:
            row.note = f"not simulated: {failed}"
            return row, None

    def _started(self, row: Row, job: simgrid.ReplayJob, point: Point) -> simgrid.ReplayJob:
        config = (simgrid.native_config(point.variant.options.get("selector", "default"),
                                        point.variant.options.get("algorithm", ""))
                  if point.variant.name == NATIVE else [])
        if point.variant.name == NATIVE and point.layout:
            row.note = "native in groups runs a linear point-to-point lowering, not SMPI's MPI_Alltoall"
        return job.start(config + simgrid.NETWORKS[self.machine.network], self.replay_timeout)

    def _simulated(self, row: Row, replay: Callable[[], simgrid.Replay]) -> float | None:
        """Fill the row from a finished replay; its simulated seconds, or None with the note why not."""
        try:
            result = replay()
        except CaptureError as failed:
            row.note = f"not simulated: {failed}"
            return None
        us = result.seconds * 1e6
        row.t_min_us = row.t_p50_us = row.t_p90_us = row.t_p95_us = row.t_p99_us = row.t_mean_us = row.t_max_us = us
        row.t_std_us = 0.0
        row.algbw_GBps, row.busbw_GBps = bandwidths(row.bytes_per_peer, row.group_size or row.nprocs, result.seconds)
        row.valid = True
        for key, value in (("replay_wall_seconds", result.wall_seconds), ("replay_cpu_seconds", result.cpu_seconds)):
            self.meta[key] = self.meta.get(key, 0.0) + value
        return result.seconds

    def _capture(self, point: Point, ppn: int) -> Schedule | str:
        """The schedule at unit size (scaled per size), or the refusal note."""
        nodes = [list(range(start, min(start + ppn, point.nprocs))) for start in range(0, point.nprocs, ppn)]
        options = {} if point.variant.name == NATIVE else point.variant.options
        group = (lambda world, layout=point.layout: group_comm(world, layout)) if point.layout else None
        try:
            return capture_unit(point.variant.name, options, point.nprocs, point.dtype, nodes=nodes, group=group)
        except A2AError as refused:
            return f"refused: {refused}"

    def _say(self, text: str) -> None:
        if not self.quiet:
            click.echo(text, err=True)

    def _progress(self, measured: int, total: int, began: float, point: Point) -> None:
        if self.quiet:
            return
        tty = sys.stderr.isatty()
        text = progress_text(measured, total, time.monotonic() - began,
                             f"{point.nprocs} ranks {report.human_bytes(point.bytes_per_peer)} {point.variant.label}")
        click.echo(("\r" + text.ljust(100)) if tty else text, err=True, nl=not tty or measured == total)

    def _finish(self, status: str, already: int) -> None:
        if self.fmt == "csv":
            click.echo(report.as_csv(self.rows), nl=False)
        elif self.fmt == "json":
            click.echo(report.as_json(self.rows))
        elif not self.quiet:
            for nprocs in sorted({r.nprocs for r in self.rows}):
                rows = [r for r in self.rows if r.nprocs == nprocs]
                defaults = option_defaults(self.config)
                if self.fmt == "tpu":
                    click.echo(f"\n{nprocs} ranks, simulated on {rows[0].platform}\n"
                               + report.tpu_table(rows, defaults))
                else:
                    click.echo(f"\n{nprocs} ranks, simulated on {rows[0].platform} ({self.machine.link.text}; "
                               "times in microseconds)")
                    click.echo(report.table(rows, defaults))
        if status != "complete":
            click.echo(f"simulation {status} after {len(self.rows)} new points; finish it with: "
                       f"python -m bench simulate --resume {self.directory}", err=True)
        else:
            self._say(f"results: {self.directory}")

