"""`bench run`: sweep sizes x process counts x algorithms and keep a complete record."""
from __future__ import annotations

import sys
from typing import Any

import click

from a2a.algos.registry import COLLECTIVES
from a2a.measure.protocols import NAMES, described
from a2a.record.outputs import writable_folder
from a2a.sweep.config import CACHES, DEFAULTS
from a2a.sweep.launch import with_file
from a2a.sweep.naming import named
from a2a.sweep.session import FORMATS, Output
from a2a.workflows.run import measured

from .group import main
from .options import defaults


@main.command("run")
@click.option("--config", "config", type=click.Path(dir_okay=False), help="YAML sweep file; options given here win.")
@click.option("--sizes", help=defaults("Bytes per peer: list (8,1K,64KiB,1M) or START:STOP:xF.", DEFAULTS["sizes"]))
@click.option("--dtype", help=defaults("NumPy element type.", DEFAULTS["dtype"]))
@click.option("--collective", type=click.Choice(COLLECTIVES), default=None,
              help=defaults("alltoall, or alltoallv with counts from --workload.", DEFAULTS["collective"]))
@click.option("--workload", help=defaults("alltoallv count matrix: uniform, random:spread=S, zipf:s=S, "
                                          "sparse:density=D, moe:experts=E,topk=K,..., matrix:FILE.csv, or "
                                          "recorded:DIR, a program's own calls (docs/alltoallv.md).",
                                          DEFAULTS["workload"]))
@click.option("--algorithms", help=defaults("Names (or NAME:KEY=VALUE variants), comma-separated, or 'all' "
                                            "(every algorithm serving the collective).", DEFAULTS["algorithms"]))
@click.option("--plugin", multiple=True, help="A .py file or module that registers algorithms (repeatable).")
@click.option("--option", multiple=True, help="ALG.KEY=VALUE, e.g. bruck.radix=4 (repeatable).")
@click.option("--table", "decision_table", help="Decision table for the `auto` algorithm (auto.table=FILE).")
@click.option("--nprocs", help="Process counts to sweep. [default: 2, 4, 8, ... up to the world size, and it]")
@click.option("--warmup", help=defaults("Untimed calls before timing each point.", DEFAULTS["warmup"]))
@click.option("--iterations", help=defaults("Timed calls per point, split over its rounds.", DEFAULTS["iterations"]))
@click.option("--rounds", help=defaults("Interleaved rounds per cell: each visits every algorithm once, in a fresh "
                                        "seeded order, with its warm-up and its share of the iterations (at most "
                                        "--iterations).", DEFAULTS["rounds"]))
@click.option("--control/--no-control", default=None,
              help=defaults("Time `control` (the library's own under a second name) in every cell: the noise floor "
                            "no win may fall below.", "control"))
@click.option("--aa", is_flag=True, help="The A/A self-check: native and pairwise each beside twins of themselves "
                                         "(one schedule under other names); prints how many twin comparisons the "
                                         "statistics call different.")
@click.option("--launches", type=int, default=None,
              help="Measure the sweep this many times in this job, into DIR/launch-1.. (fresh plans and rounds "
                   "each); the decision takes the launches as its top level. [default: 1]")
@click.option("--max-time-per-point", help=defaults("Seconds a point's visits may take in all (at least one call "
                                                    "per round).", DEFAULTS["max_time_per_point"]))
@click.option("--stall-threshold", help=defaults("Seconds above the point's fastest sample that make a stall.",
                                                 DEFAULTS["stall_threshold"]))
@click.option("--check/--no-check", default=None, help=defaults("Verify each point's result once.", "check"))
@click.option("--output", help="Results directory. [default: results/<UTC time>]")
@click.option("--resume", "resume", type=click.Path(file_okay=False), help="Finish an interrupted run in DIR.")
@click.option("--force-resume", is_flag=True,
              help="With --resume: go on under another MPI library, or at the --dtype given (each launch is recorded).")
@click.option("--timeout", help=defaults("Seconds one point may take before the job ends.", DEFAULTS["timeout"]))
@click.option("--max-memory",
              help="Bytes of buffers per rank; larger points are skipped. [default: a share of the node]")
@click.option("--ppn", help="Ranks per virtual node, for node-aware algorithms. [default: real nodes]")
@click.option("--seed", help=defaults("Seed of the algorithm order within a size.", DEFAULTS["seed"]))
@click.option("--timing", type=click.Choice(NAMES), default=None,
              help=defaults(f"{described()}.", DEFAULTS["timing"]))
@click.option("--compute-ratio", help=defaults("--timing overlap: the compute phase over the library's own "
                                               "non-blocking pure time (real arithmetic, sized once per point, the "
                                               "same for every algorithm).", DEFAULTS["compute_ratio"]))
@click.option("--compute-us", type=float, help="--timing overlap: the compute phase in microseconds, instead of "
                                               "--compute-ratio.")
@click.option("--tests", help=defaults("--timing overlap: progress calls (test) spread through the compute phase; "
                                       "a list is swept like sizes (0: a program that never polls).",
                                       DEFAULTS["tests"]))
@click.option("--progress", help=defaults("--timing overlap: poll (only the program's calls advance an exchange) or "
                                          "thread (the library's asynchronous progress thread, MPICH's "
                                          "MPIR_CVAR_ASYNC_PROGRESS); a list takes a launch per mode (--resume).",
                                          DEFAULTS["progress"]))
@click.option("--cache", type=click.Choice(CACHES), default=None,
              help=defaults("warm: every call reuses one buffer set; cold: IMB's -off_cache, each call its own set "
                            "from a ring larger than the last-level cache.", DEFAULTS["cache"]))
@click.option("--mesh", help="Cartesian meshes, comma-separated (2x2x8,2x4); ranks fill them row-major.")
@click.option("--groups", multiple=True, help="Axes forming each replica group: z, y,z or 1x1x8 (repeatable).")
@click.option("--refine", is_flag=True, help="Where neighbouring sizes' winners differ, measure their geometric "
              "midpoint too, until each crossover is bracketed within a factor of 2 or the two are within noise.")
@click.option("--allow-oversubscribed", is_flag=True, help="No warning when ranks outnumber cores (still recorded).")
@click.option("--quiet", is_flag=True, help="No progress bar or tables (errors, warnings and the record's directory "
                                            "still show).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
              help="stdout: tables per process count (seed mail's or TPU benchmark's columns), or rows at the end.")
@click.pass_context
def run(ctx: click.Context, **given: Any) -> None:
    """Sweep message sizes x process counts x algorithms (the main job)."""
    explicit = given_options(ctx, given)
    writable_folder(explicit.get("resume") or named(with_file(explicit).get("output")), "the results", "bench run")
    sys.exit(measured(explicit, Output(given["quiet"], given["fmt"], given["allow_oversubscribed"])))


def given_options(ctx: click.Context, given: dict[str, Any]) -> dict[str, Any]:
    """The options given on the command line, as the sweep takes them (--refine always; --aa and --decision-table
    as what they stand for)."""
    explicit = {k: v for k, v in given.items()
                if ctx.get_parameter_source(k) is click.core.ParameterSource.COMMANDLINE}
    explicit["refine"] = given["refine"]
    if given["aa"]:
        explicit["aa"] = True
    if given["decision_table"]:
        explicit["option"] = (*explicit.get("option", ()), f"auto.table={given['decision_table']}")
    return explicit
