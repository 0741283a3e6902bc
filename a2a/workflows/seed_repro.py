"""The seed mail's stalls reproduced: MPI_Alltoall and Kutzner's node-ordered loop on an emulated Gigabit cluster
(Open MPI users' list, 2005), then the same with the fixes, each one `bench run` launch on a cluster of its own."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

from a2a.emulate import cluster
from a2a.errors import BadConfig, ClusterError
from a2a.record.mail_table import mail_table, stall_summary
from a2a.record.results import read_meta, read_rows
from a2a.sweep.naming import empty_directory
from a2a.sweep.parsing import parse_count, parse_list

MANIFEST = "seed-repro.json"


def seed_repro(nodes: int, slots: int, floats: str, runs: int, algorithms: str, fixes: str, rto_min: int, rate: str,
               queue: str, nic_queue: str, stall_threshold: str, output: Path | None,
               say: Callable[..., Any] = print) -> str:
    """Run every experiment of the plan on its cluster (taken down at the end); the tables."""
    plan = seed_plan(nodes, slots, rate, queue, nic_queue, rto_min, algorithms, fixes)
    sizes = ",".join(str(4 * n) for n in parse_list(floats, "floats", parse_count))
    if runs < 2:
        raise BadConfig(f"--runs {runs}; accepted: 2 or more (the first is not counted)")
    cluster.require_root()
    current = cluster.read_state()
    if current and current.shape not in [shape for _, shape, _, _ in plan]:
        raise ClusterError(f"a different cluster is up ({current.shape.describe()}); "
                           "seed-repro makes its own: run `python -m bench cluster down` first")
    output = empty_directory(output, "seed-repro")
    manifest = [{"name": name, "title": f"{shape.describe()}", "algorithms": algs} for name, shape, algs, _ in plan]
    (output / MANIFEST).write_text(json.dumps({"experiments": manifest}, indent=2) + "\n")
    try:
        for step, (name, shape, algs, why) in enumerate(plan, 1):
            say(f"[{step}/{len(plan)}] {why}: {algs} on {shape.describe()}", err=True)
            began = time.monotonic()
            bench = ["run", "--sizes", sizes, "--dtype", "float32", "--algorithms", algs,
                     "--nprocs", str(nodes * slots), "--warmup", "1", "--iterations", str(runs - 1),
                     "--stall-threshold", stall_threshold, "--max-time-per-point", "120",
                     "--output", str(output / name)]
            code = cluster.run([sys.executable, "-m", "bench", *bench], log=output / f"{name}.log",
                               state=cluster.fresh(shape))
            if code:
                raise ClusterError(f"the {name} run failed (exit {code}); see {output / name}.log")
            say(f"      done in {time.monotonic() - began:.0f} s", err=True)
    finally:
        cluster.down()
    return seed_report(output)


def seed_plan(nodes: int, slots: int, rate: str, queue: str, nic_queue: str, rto_min: int,
              algorithms: str, fixes: str) -> list[tuple[str, cluster.ClusterSpec, str, str]]:
    """The experiments: (name, cluster shape, algorithms, why), the seed's first."""
    chosen = [f.strip() for f in fixes.split(",") if f.strip()]
    unknown = sorted(set(chosen) - {"throttled", "rto-min", "none"})
    if unknown:
        raise BadConfig(f"--fixes {fixes!r}; accepted: throttled, rto-min (comma-separated) or none")
    plain = cluster.ClusterSpec.parse(nodes, slots, rate, queue, nic_queue, 0)
    plan = [("seed", plain, algorithms, "the seed's comparison")]
    if "throttled" in chosen:
        plan.append(("throttled", plain, "throttled:window=1,throttled:window=4",
                     "then: fewer messages in flight"))
    if "rto-min" in chosen:
        if rto_min < 1:
            raise BadConfig(f"--rto-min {rto_min}; accepted: 1 ms or more")
        lowered = cluster.ClusterSpec.parse(nodes, slots, rate, queue, nic_queue, rto_min)
        plan.append((f"rto-min-{rto_min}ms", lowered, algorithms, f"then: rto_min {rto_min} ms on the nodes' routes"))
    return plan


def seed_report(directory: Path) -> str:
    """The seed tables of every experiment of a seed-repro directory, with a summary."""
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        raise BadConfig(f"{directory} has no {MANIFEST}; it is not a seed-repro directory")
    experiments = json.loads(manifest_path.read_text())["experiments"]
    parts: list[str] = []
    summary: list = []
    for experiment in experiments:
        folder = directory / experiment["name"]
        if not (folder / "results.csv").is_file():
            summary.append(f"{experiment['name']}: no results (the run did not finish)")
            continue
        rows = read_rows(folder)
        nodes = read_meta(folder).get("nodes")
        for label, group in _by_variant(rows).items():
            parts.append(mail_table(group, f"{label}, {experiment['title']}"))
            summary.append((f"{label}, {experiment['name']}:", stall_summary(group)
                            + ("" if nodes is None else f"; MPI saw {nodes} nodes")))
    width = max((len(s[0]) for s in summary if isinstance(s, tuple)), default=0)
    lines = [f"{s[0]:<{width}} {s[1]}" if isinstance(s, tuple) else s for s in summary]
    return "\n\n".join(parts + ["summary:\n" + "\n".join(lines)])


def _by_variant(rows: list) -> dict[str, list]:
    groups: dict[str, list] = {}
    for row in rows:
        groups.setdefault(row.label, []).append(row)
    return groups
