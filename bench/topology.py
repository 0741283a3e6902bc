"""`python -m bench topology-study`: the same sweep on switch, ring and torus emulated clusters (needs root)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import click

from a2a.algos import registry
from a2a.analysis import study
from a2a.analysis.study import STUDY_MANIFEST, study_entries, study_runs
from a2a.emulate import cluster
from a2a.errors import BadConfig, ClusterError
from a2a.record.results import read_meta

from .group import echo, main
from .options import empty_output

ALGORITHMS = ("native", "pairwise", "bruck", "linear", "bine", "dimensional")  # the last two where registered


@main.command("topology-study")
@click.option("--topologies", default="switch,ring,torus:2x4", show_default=True,
              help="Topology specs separated by ';' or ',' (torus:AxB and fattree:... keep their own commas "
                   "when separated by ';'); the first is the base of the speedups.")
@click.option("--nodes", type=int, default=8, show_default=True, help="Emulated nodes (1 rank each).")
@click.option("--sizes", default="8,64,512,4K,32K,256K,1M,4M", show_default=True,
              help="Bytes per peer (list or START:STOP:xF).")
@click.option("--algorithms", default=None,
              help=f"[default: those of {', '.join(ALGORITHMS)} that are registered]")
@click.option("--iterations", type=int, default=5, show_default=True, help="Timed calls per point.")
@click.option("--warmup", type=int, default=1, show_default=True, help="Untimed calls per point.")
@click.option("--rate", default="1gbit", show_default=True, help="Rate of every link, on every topology.")
@click.option("--queue", default="256kb", show_default=True, help="Buffer of every switch and router port.")
@click.option("--nic-queue", default="1mb", show_default=True, help="Queue of a node's interface toward a switch.")
@click.option("--rto-min", "rto_min", type=int, default=5, show_default=True,
              help="ms on the nodes' routes (0: the kernel's 200 ms), so that lost tails cost less than the sweep.")
@click.option("--max-time-per-point", default="60", show_default=True, help="Seconds before a point stops early.")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Results directory [default: results/topology-study-<UTC time>].")
@click.option("--show", "show", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=None, help="Only print the tables of an earlier study directory.")
def topology_study(topologies: str, nodes: int, sizes: str, algorithms: str | None, iterations: int,
                   warmup: int, rate: str, queue: str, nic_queue: str, rto_min: int, max_time_per_point: str,
                   output: Path | None, show: Path | None) -> None:
    """Switch vs ring vs torus at equal per-link physics: one launch per topology, then the tables.

    Each topology gets its own emulated cluster of NODES nodes x 1 rank with the same link
    rate and queues; the same sweep runs on each (one `bench run` launch), and the study
    prints per topology the p50-vs-size table, the speedup over the first topology per size,
    where each algorithm leaves its latency floor, and the fastest algorithm per size. It
    makes its own clusters and takes them down at the end.
    """
    if show:
        echo(study_report(show))
        return
    chosen = algorithms or ",".join(a for a in ALGORITHMS if a in registry.algorithms())
    shapes = [cluster.ClusterSpec.parse(None if spec.startswith(("torus", "fattree")) else nodes, 1, rate, queue,
                                        nic_queue, rto_min, spec) for spec in split_topologies(topologies)]
    wrong = [s.topology for s in shapes if s.nodes != nodes]
    if wrong:
        raise BadConfig(f"--topologies {', '.join(wrong)} do not have --nodes {nodes} nodes; "
                        "compare topologies of the same size")
    cluster.require_root()
    if cluster.read_state() or cluster.namespaces():
        raise ClusterError("an emulated cluster is up; the study makes its own: "
                           "run `python -m bench cluster down` first")
    output = empty_output(output, "topology-study")
    manifest = [{"name": run_name(s.topology), "topology": s.topology, "title": s.describe()} for s in shapes]
    (output / STUDY_MANIFEST).write_text(json.dumps({"runs": manifest}, indent=2) + "\n")
    bench = ["run", "--sizes", sizes, "--algorithms", chosen, "--nprocs", str(nodes), "--warmup", str(warmup),
             "--iterations", str(iterations), "--max-time-per-point", max_time_per_point, "--quiet"]
    try:
        for step, (shape, entry) in enumerate(zip(shapes, manifest), 1):
            echo(f"[{step}/{len(shapes)}] {chosen} on {shape.describe()}", err=True)
            began = time.monotonic()
            cluster.down()
            state, _ = cluster.up(shape)
            command = cluster.run_command(state, [sys.executable, "-m", "bench", *bench,
                                                  "--output", str(output / entry["name"])])
            with open(output / f"{entry['name']}.log", "w") as log:
                code = subprocess.run(command, check=False, env=cluster.run_env(), stdout=log,
                                      stderr=subprocess.STDOUT).returncode
            (output / f"{entry['name']}.links.json").write_text(json.dumps(cluster.link_report(shape), indent=1))
            if code:
                raise ClusterError(f"the {shape.topology} run failed (exit {code}); "
                                   f"see {output / entry['name']}.log")
            echo(f"      done in {time.monotonic() - began:.0f} s", err=True)
    finally:
        cluster.down()
    echo(study_report(output))


def split_topologies(text: str) -> list[str]:
    """'switch,ring,torus:2x4' or 'switch;fattree:2x4,oversub=2' -> the specs."""
    parts = text.split(";") if ";" in text else text.split(",")
    specs = [p.strip() for p in parts if p.strip()]
    if not specs:
        raise BadConfig("--topologies is empty; accepted: specs such as switch,ring,torus:2x4")
    return specs


def run_name(topology: str) -> str:
    """A directory name for a topology spec: torus:2x4 -> torus-2x4."""
    return topology.replace(":", "-").replace(",", "-").replace("=", "")


def study_report(directory: Path) -> str:
    """The study's tables, headed by what ran where."""
    runs = study_runs(directory)
    head = []
    for entry in study_entries(directory):
        folder = directory / entry["name"]
        if entry["topology"] in runs:
            meta = read_meta(folder)
            head.append(f"{entry['topology']}: {entry['title']}; {meta.get('start', '?')} .. {meta.get('end', '?')}")
        else:
            head.append(f"{entry['topology']}: no results (the run did not finish)")
    if not runs:
        return "\n".join(head)
    base = next(iter(runs))
    return "\n".join(head) + "\n\n" + study.report(runs, base)
