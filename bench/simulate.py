"""`bench simulate`: every algorithm's captured schedule replayed on SimGrid SMPI at any scale."""
from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
import numpy as np

import a2a
from a2a.errors import BadConfig
from a2a.measure.mesh import mesh_layouts
from a2a.measure.session import FORMATS, Output, SweepState
from a2a.simulate import simgrid
from a2a.simulate.calibrate import calibrated
from a2a.simulate.schedule_cache import OFF, ScheduleCache, default_directory
from a2a.simulate.sweep import Machine, resume_simulation, simulate_sweep, simulated_variants, simulation_config
from a2a.units import parse_size

from .group import main
from .options import parse_assignments, parse_count, parse_dtype, parse_list

DEFAULTS = {"platform": "switch", "link": "100Gbps,1us", "nprocs": "64", "sizes": "8,1K,64K"}


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
@click.option("--message-cost", help="Microseconds of software time per eager send and receive, SEND[,RECV]. "
                                     "[default: 0, SMPI's own]")
@click.option("--calibrate", type=click.Path(file_okay=False, exists=True),
              help="A measured record with linear at two or more process counts and 1 KiB per peer or less: "
                   "--message-cost from its growth per extra peer; and, where it has 64 KiB or more, SMPI's "
                   "bandwidth factor that gives linear's measured time there.")
@click.option("--output", help="Results directory. [default: results/<UTC time>-sim]")
@click.option("--resume", type=click.Path(file_okay=False), help="Finish an interrupted simulation in DIR.")
@click.option("--keep-traces", type=click.Path(file_okay=False), help="Keep platform, hostfile and traces under DIR.")
@click.option("--replay-timeout", type=click.FloatRange(min=0, min_open=True), default=3600.0, show_default=True,
              help="Seconds of wall time one replay may take; a longer one is stopped and its point recorded "
                   "as not simulated.")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Replays run at once (each is one process). [default: this process's cores]")
@click.option("--memory", help="Memory the replays running at once may hold together, e.g. 4G; one that needs "
                               "more runs alone, and a schedule captured by running the plans runs in what they "
                               "leave, or after them within the whole bound (or is refused). [default: three "
                               "quarters of the memory available]")
@click.option("--schedule-cache", help="Where captured schedules are kept for the next simulation, or 'none'. "
                                       "[default: $A2A_SCHEDULE_CACHE, else ~/.cache/a2a-testbed/schedules]")
@click.option("--replayer", type=click.Choice(simgrid.REPLAYERS), default=None,
              help="s4u: ours, SMPI's point-to-point model with messages matched per pair of ranks (faster "
                   "with many messages in flight); smpi: smpirun's. SMPI's own MPI_Alltoall (native) always replays on "
                   "smpirun. [default: s4u]")
@click.option("--quiet", is_flag=True, help="No progress or tables.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
              help="stdout: tables per process count, the TPU benchmark's columns, or rows at the end.")
def simulate(**given: Any) -> None:
    """Replay every algorithm's exact schedule on a simulated platform (SimGrid SMPI)."""
    problem = simgrid.missing()
    if problem:
        raise BadConfig(problem)
    directory, state, machine = prepare(given)
    keep = Path(given["keep_traces"]) if given["keep_traces"] else None
    jobs = given["jobs"] or len(os.sched_getaffinity(0))
    cache = given["schedule_cache"]
    schedules = ScheduleCache(None if cache == OFF else Path(cache) if cache else default_directory())
    memory = parse_size(given["memory"], "--memory") if given["memory"] is not None else None
    if memory == 0:
        raise BadConfig("--memory '0': the replays need some; accepted: a byte count above 0, e.g. 4G")
    sys.exit(simulate_sweep(directory, state, machine, Output(given["quiet"], given["fmt"]), keep,
                            given["replay_timeout"], jobs, schedules, memory))


def prepare(given: dict[str, Any]) -> tuple[Path, SweepState, Machine]:
    """Check every option (nothing is simulated yet); fresh or resumed."""
    if given["resume"]:
        directory = Path(given["resume"])
        clashing = [k for k, v in given.items() if v not in (None, (), False) and k not in
                    ("resume", "quiet", "fmt", "keep_traces", "replay_timeout", "jobs", "memory",
                     "schedule_cache")]
        if clashing:
            raise BadConfig(f"--resume takes the simulation from {directory}/meta.json; drop --"
                            + ", --".join(k.replace("_", "-") for k in clashing))
        return (directory, *resume_simulation(directory))
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
                      _bandwidth(given["copy_bandwidth"]), ppn, given["network"] or "calibrated",
                      _message_cost(given["message_cost"], given["calibrate"]),
                      given["replayer"] or simgrid.REPLAYERS[0])
    for n in nprocs:
        machine.placement(n)  # refuses a platform too small, or a bad spec, now
    chosen = simulated_variants(given["algorithms"] or "all", parse_assignments(given["option"], "--option"), ppn)
    config = simulation_config(sizes, dtype, nprocs, ppn, chosen, layouts)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    directory = Path(given["output"] or f"results/{stamp}-sim")
    if (directory / "results.csv").exists():
        raise BadConfig(f"{directory} already holds results; use --resume {directory} or another --output")
    if given["calibrate"]:
        machine = calibrated(machine, Path(given["calibrate"]))
    return directory, SweepState(config, list(given["plugin"])), machine


def _message_cost(text: str | None, calibrate: str | None) -> simgrid.MessageCost:
    if text and calibrate:
        raise BadConfig("--message-cost and --calibrate both set the cost of a message; give one")
    return simgrid.MessageCost.parse(text) if text else simgrid.MessageCost()


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
