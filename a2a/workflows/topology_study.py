"""The topology study: the same `bench run` sweep on switch, ring, torus (and fat tree) emulated clusters at equal
link physics, one launch each on a cluster of its own (needs root), then the tables (a2a.analysis.study)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

from a2a.algos.registry import algorithms as registered
from a2a.analysis import study
from a2a.analysis.study import STUDY_MANIFEST, study_entries, study_runs
from a2a.emulate import cluster
from a2a.errors import BadConfig, ClusterError
from a2a.record.results import read_meta
from a2a.sweep.naming import empty_directory

ALGORITHMS = ("native", "pairwise", "bruck", "linear", "bine", "dimensional")  # the last two where registered


def topology_study(topologies: str, nodes: int, sizes: str, algorithms: str | None, iterations: int, warmup: int,
                   rate: str, queue: str, nic_queue: str, rto_min: int, max_time_per_point: str,
                   output: Path | None, say: Callable[..., Any] = print) -> str:
    """Make each topology's cluster, run the sweep on it, take it down; the study's tables."""
    chosen = algorithms or ",".join(a for a in ALGORITHMS if a in registered())
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
    output = empty_directory(output, "topology-study")
    manifest = [{"name": run_name(s.topology), "topology": s.topology, "title": s.describe()} for s in shapes]
    (output / STUDY_MANIFEST).write_text(json.dumps({"runs": manifest}, indent=2) + "\n")
    bench = ["run", "--sizes", sizes, "--algorithms", chosen, "--nprocs", str(nodes), "--warmup", str(warmup),
             "--iterations", str(iterations), "--max-time-per-point", max_time_per_point, "--quiet"]
    try:
        for step, (shape, entry) in enumerate(zip(shapes, manifest), 1):
            say(f"[{step}/{len(shapes)}] {chosen} on {shape.describe()}", err=True)
            began = time.monotonic()
            cluster.down()
            state, _ = cluster.up(shape)
            code = cluster.run([sys.executable, "-m", "bench", *bench, "--output", str(output / entry["name"])],
                               log=output / f"{entry['name']}.log", state=state)
            (output / f"{entry['name']}.links.json").write_text(json.dumps(cluster.link_report(shape), indent=1))
            if code:
                raise ClusterError(f"the {shape.topology} run failed (exit {code}); "
                                   f"see {output / entry['name']}.log")
            say(f"      done in {time.monotonic() - began:.0f} s", err=True)
    finally:
        cluster.down()
    return study_report(output)


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
