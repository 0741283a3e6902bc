"""`bench simulate`: every algorithm's schedule replayed on SimGrid SMPI, or timed on the analytical network, at any
scale."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from a2a.algos.registry import COLLECTIVES
from a2a.record.outputs import writable_folder
from a2a.simulate import platforms, simgrid
from a2a.simulate.analytical_run import ANALYTICAL, CONGESTION, simulate_analytical
from a2a.simulate.driver import REPLAY_TIMEOUT
from a2a.simulate.driver import simulate as simulate_sweep
from a2a.simulate.machine import MACHINE_DEFAULTS
from a2a.sweep.config import SIMULATION_DEFAULTS
from a2a.sweep.naming import named
from a2a.sweep.session import FORMATS, Output

from .group import main
from .options import defaults


@main.command("simulate")
@click.option("--backend", type=click.Choice(["simgrid", ANALYTICAL]), default=None,
              help="simgrid: every message replayed on SimGrid SMPI; analytical: the rounds timed on the fabric's "
                   "links with SimGrid's costs (numpy, 16,384 ranks in minutes; docs/simulation-analytical.md). "
                   "[default: simgrid]")
@click.option("--congestion", type=click.Choice(CONGESTION), default=None,
              help="--backend analytical: aware, messages that share a link share it (the busiest link sets a "
                   "round); unaware, each message alone on its route. The record's times are this one's; "
                   "analytical.csv has both. [default: aware]")
@click.option("--platform", help=defaults("switch, ring, torus:AxB[xC..], fattree:LEAVESxNODES[,oversub=R], "
                                          "dragonfly:GxCxRxN.", MACHINE_DEFAULTS["platform"]))
@click.option("--link", help=defaults("Every link's RATE,LATENCY, e.g. 100Gbps,1us or 125MBps,50us.",
                                      MACHINE_DEFAULTS["link"]))
@click.option("--nprocs", help=defaults("Process counts, e.g. 64,1024,4096.", SIMULATION_DEFAULTS["nprocs"]))
@click.option("--sizes", help=defaults("Bytes per peer (8,1K,4M or START:STOP:xF).", SIMULATION_DEFAULTS["sizes"]))
@click.option("--dtype", help=defaults("NumPy element type.", SIMULATION_DEFAULTS["dtype"]))
@click.option("--collective", type=click.Choice(COLLECTIVES), default=None,
              help=defaults("alltoall, or alltoallv with counts from --workload (direct schedules, and SMPI's own "
                            "for native).", SIMULATION_DEFAULTS["collective"]))
@click.option("--workload", help=defaults("alltoallv count matrix: uniform, random:spread=S, zipf:s=S, "
                                          "sparse:density=D, moe:experts=E,topk=K,..., matrix:FILE.csv, or "
                                          "recorded:DIR[:job=ID], a program's recorded calls (A2A_RECORD=DIR), each "
                                          "a point at its size and process count (no --sizes, --nprocs).",
                                          SIMULATION_DEFAULTS["workload"]))
@click.option("--algorithms", help=defaults("Names or NAME:KEY=VALUE variants, or 'all'; native:selector=mpich|ompi|"
                                            "default or native:algorithm=NAME picks SMPI's MPI_Alltoall.",
                                            SIMULATION_DEFAULTS["algorithms"]))
@click.option("--timing", type=click.Choice(["simulated", "overlap"]), default=None,
              help=defaults("simulated: one replay per point; overlap: then a second, computing --compute-ratio x "
                            "the pure time between start and wait (messages move by themselves: the bound of a "
                            "program that never polls).", SIMULATION_DEFAULTS["timing"]))
@click.option("--compute-ratio", help=defaults("--timing overlap: the compute phase over the pure exchange time.",
                                               SIMULATION_DEFAULTS["compute_ratio"]))
@click.option("--option", multiple=True, help="ALG.KEY=VALUE (repeatable).")
@click.option("--plugin", multiple=True, help="A .py file or module that registers algorithms (repeatable).")
@click.option("--ppn", help="Ranks per node. [default: 1 on switch and ring; else as many as the ranks need]")
@click.option("--mesh", help="Cartesian meshes (4x4x4); ranks fill them row-major.")
@click.option("--groups", multiple=True, help="Axes forming each replica group: z, y,z or 1x1x4 (repeatable).")
@click.option("--copy-bandwidth",
              help="Bytes/s of a local copy. [default: measured here, best of 20 np.copyto of 8 MiB]")
@click.option("--network", type=click.Choice(list(platforms.NETWORKS)), default=None,
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
@click.option("--force-resume", is_flag=True,
              help="With --resume: add points simulated by another SimGrid version than the record's (refused "
                   "without it).")
@click.option("--keep-traces", type=click.Path(file_okay=False), help="Keep platform, hostfile and traces under DIR.")
@click.option("--replay-timeout", type=click.FloatRange(min=0, min_open=True), default=REPLAY_TIMEOUT,
              show_default=True,
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
              help=defaults("s4u: ours, SMPI's point-to-point model with messages matched per pair of ranks (faster "
                            "with many messages in flight); smpi: smpirun's. SMPI's own MPI_Alltoall (native) always "
                            "replays on smpirun.", MACHINE_DEFAULTS["replayer"]))
@click.option("--quiet", is_flag=True, help="No progress or tables.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
              help="stdout: tables per process count, the TPU benchmark's columns, or rows at the end.")
def simulate(**given: Any) -> None:
    """Replay every algorithm's exact schedule on a simulated platform (SimGrid SMPI), or time it analytically."""
    writable_folder(given["resume"] or named(given["output"], suffix="-sim"), "the results", "bench simulate")
    if given["backend"] == ANALYTICAL or (given["resume"] and _made_by(given["resume"]) == ANALYTICAL):
        sys.exit(simulate_analytical(given, Output(given["quiet"], given["fmt"])))
    if given["congestion"]:
        raise click.UsageError("--congestion goes with --backend analytical")
    if given["keep_traces"]:
        writable_folder(given["keep_traces"], "the traces", "bench simulate")
    sys.exit(simulate_sweep(given, Output(given["quiet"], given["fmt"])))


def _made_by(directory: str) -> str:
    """The backend of the record in `directory` (resumed under its own backend)."""
    from a2a.record.meta import backend_of
    from a2a.record.results import read_meta

    return backend_of(read_meta(Path(directory))) if (Path(directory) / "meta.json").exists() else ""
