"""`bench run`: sweep sizes x process counts x algorithms and keep a complete record."""
from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
import numpy as np

import a2a
from a2a.algos.registry import COLLECTIVES
from a2a.errors import BadConfig
from a2a.measure.cache import CACHES
from a2a.measure.driver import measure_sweep, resume_measured, set_thread_level
from a2a.measure.environment import node_memory_share
from a2a.measure.grid import TIMINGS, SweepConfig, default_nprocs, variants
from a2a.measure.mesh import mesh_layouts
from a2a.measure.session import FORMATS, Output, StopRequest, SweepState
from a2a.measure.workload import parse_workload
from a2a.mpi import world
from a2a.units import parse_size

from .group import main
from .options import (
    load_config,
    parse_assignments,
    parse_count,
    parse_dtype,
    parse_list,
)

DEFAULT_SIZES = "4:128K:x2"
SWEEP_OPTIONS = ("config", "sizes", "dtype", "algorithms", "plugin", "option", "nprocs", "warmup",
                 "iterations", "max_time_per_point", "stall_threshold", "check", "max_memory", "ppn", "seed",
                 "timing", "mesh", "groups", "collective", "workload", "cache")


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
@click.option("--force-resume", is_flag=True,
              help="With --resume: go on under another MPI library, or at the --dtype given (each launch is recorded).")
@click.option("--timeout", help="Seconds one point may take before the job ends. [default: 300]")
@click.option("--max-memory",
              help="Bytes of buffers per rank; larger points are skipped. [default: a share of the node]")
@click.option("--ppn", help="Ranks per virtual node, for node-aware algorithms. [default: real nodes]")
@click.option("--seed", help="Seed of the algorithm order within a size. [default: 0]")
@click.option("--timing", type=click.Choice(TIMINGS), default=None,
              help="sync: barrier + one timed call, max over ranks, every sample; pipelined: calls back to "
                   "back, per-rank means; imb: IMB-MPI1's and OSU's loop (timed call, untimed barrier), per-rank "
                   "means; global: ReproMPI's synchronised clocks, latest exit minus an agreed start. "
                   "[default: sync]")
@click.option("--cache", type=click.Choice(CACHES), default=None,
              help="warm: every call reuses one buffer set; cold: IMB's -off_cache, each call its own set from a "
                   "ring larger than the last-level cache. [default: warm]")
@click.option("--mesh", help="Cartesian meshes, comma-separated (2x2x8,2x4); ranks fill them row-major.")
@click.option("--groups", multiple=True, help="Axes forming each replica group: z, y,z or 1x1x8 (repeatable).")
@click.option("--allow-oversubscribed", is_flag=True, help="No warning when ranks outnumber cores (still recorded).")
@click.option("--quiet", is_flag=True, help="No progress bar or tables (errors and warnings still show).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
              help="stdout: tables per process count (seed mail's or TPU benchmark's columns), or rows at the end.")
@click.pass_context
def run(ctx: click.Context, **given: Any) -> None:
    """Sweep message sizes x process counts x algorithms (the main job)."""
    stop = StopRequest()
    stop.install()  # before MPI starts: a batch system's warning may come at any time
    set_thread_level()
    comm = world()
    explicit = {k: v for k, v in given.items()
                if ctx.get_parameter_source(k) is click.core.ParameterSource.COMMANDLINE}
    if given["decision_table"]:
        explicit["option"] = (*explicit.get("option", ()), f"auto.table={given['decision_table']}")
    directory, sweep = prepare(comm, explicit)
    output = Output(given["quiet"], given["fmt"], given["allow_oversubscribed"])
    sys.exit(measure_sweep(comm, directory, sweep, output, stop, float(given["timeout"] or sweep.config.timeout)))


def prepare(comm: Any, explicit: dict[str, Any]) -> tuple[Path, SweepState]:
    """Resolve the config (fresh or resumed) identically on every rank; nothing is measured yet."""
    if explicit.get("resume"):
        return resume_options(comm, Path(explicit["resume"]), explicit)
    if explicit.get("force_resume"):
        raise BadConfig("--force-resume goes with --resume DIR")
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
    return directory, SweepState(config, plugins)


def resume_options(comm: Any, directory: Path, explicit: dict[str, Any]) -> tuple[Path, SweepState]:
    """--resume DIR: the sweep comes from DIR/meta.json, so sweep options (but --dtype) may not be given too."""
    clashing = sorted(k for k in explicit if (k in SWEEP_OPTIONS and k != "dtype") or k == "output")
    if clashing:
        raise BadConfig(f"--resume takes the sweep from {directory}/meta.json; drop --"
                        + ", --".join(k.replace("_", "-") for k in clashing))
    dtype = parse_dtype(explicit["dtype"]) if explicit.get("dtype") else None
    resumed = resume_measured(comm, directory, dtype, bool(explicit.get("force_resume")))
    _check_sizes(resumed.config.sizes, resumed.config.dtype)
    return directory, resumed


def build_config(comm: Any, values: dict[str, Any]) -> SweepConfig:
    """Turn option values (text from the command line, or YAML values) into a checked config."""
    get = lambda key, default: default if values.get(key) in (None, "") else values[key]  # noqa: E731
    dtype = parse_dtype(str(get("dtype", "float32")))
    sizes = parse_list(_as_text(get("sizes", DEFAULT_SIZES)), "size")
    _check_sizes(sizes, dtype)
    layouts = mesh_layouts(_as_text(get("mesh", "")), _as_list(get("groups", [])))
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
        iterations=_at_least_one(get("iterations", 25), "--iterations"),
        max_time_per_point=_seconds(get("max_time_per_point", 10), "--max-time-per-point"),
        stall_threshold=_seconds(get("stall_threshold", 0.1), "--stall-threshold"),
        check=bool(get("check", True)),
        timeout=_seconds(get("timeout", 300), "--timeout"),
        max_memory=parse_size(str(get("max_memory", node_memory_share(comm))), "--max-memory"),
        seed=parse_count(str(get("seed", 0)), "--seed"),
        timing=_choice(get("timing", "sync"), TIMINGS, "--timing"),
        cache=_choice(get("cache", "warm"), CACHES, "--cache"),
        layouts=layouts,
    )


def _check_sizes(sizes: list[int], dtype: str) -> None:
    itemsize = np.dtype(dtype).itemsize
    odd = [s for s in sizes if s % itemsize]
    if odd:
        raise BadConfig(f"sizes {odd} are not multiples of {dtype}'s {itemsize} bytes")


def _at_least_one(value: Any, what: str) -> int:
    count = parse_count(str(value), what)
    if count < 1:
        raise BadConfig(f"{what} {count}; accepted: 1 or more")
    return count


def _choice(value: Any, accepted: tuple[str, ...], what: str) -> str:
    if value not in accepted:
        raise BadConfig(f"{what} {value!r}; accepted: {', '.join(accepted)}")
    return str(value)


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
