"""`python -m bench cluster up|run|status|down`: an emulated Gigabit Ethernet cluster (needs root)."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import click
from tabulate import tabulate

from a2a.emulate import cluster
from a2a.errors import BadConfig, ClusterError
from a2a.record.results import read_meta, read_rows
from a2a.record.seed import seed_table, stall_summary

from .group import echo, main
from .options import empty_output, parse_count, parse_list


@main.group("cluster")
def cluster_group() -> None:
    """An emulated Gigabit Ethernet cluster on this machine (network namespaces; needs root).

    Nodes are network namespaces on one bridge ("switch"), leaf bridges and a spine (fat
    tree), or routers wired as a ring or torus; tbf qdiscs give every link its rate and
    every port a shallow buffer, so all-to-all traffic meets the TCP incast and
    retransmission timeouts of a real Gigabit cluster.
    """


@cluster_group.command("up")
@click.option("--nodes", type=int, default=None,
              help="Number of emulated nodes (1 to 200); torus and fattree imply it.")
@click.option("--topology", default="switch", show_default=True,
              help="switch, ring, torus:AxB (row-major, k = B*x + y) or fattree:LEAVESxNODES[,oversub=R].")
@click.option("--slots", type=int, default=2, show_default=True, help="MPI ranks per node.")
@click.option("--rate", default="1gbit", show_default=True, help="Rate of every link (tc syntax: 1gbit, 100mbit).")
@click.option("--queue", default="32kb", show_default=True,
              help="Buffer of each switch or router port, where incast drops happen.")
@click.option("--nic-queue", default="1mb", show_default=True,
              help="Queue of each node's interface toward its switch (a host's transmit queue).")
@click.option("--rto-min", type=int, default=0, show_default=True,
              help="TCP minimum retransmission timeout on the nodes' routes, in ms (0: the kernel's 200 ms).")
@click.option("--delay", default="0", show_default=True,
              help="Delay per hop (50us, 1ms); needs the netem qdisc, refused where the kernel lacks it.")
@click.option("--hostfiles", "hostfile_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help=f"Where to write the hostfiles [default: {cluster.STATE_DIR}/hostfiles].")
def up(nodes: int | None, topology: str, slots: int, rate: str, queue: str, nic_queue: str, rto_min: int,
       delay: str, hostfile_dir: Path | None) -> None:
    """Make the cluster; a no-op if the same one is up, refused if a different one is."""
    shape = cluster.ClusterSpec.parse(nodes, slots, rate, queue, nic_queue, rto_min, topology, delay)
    state, made = cluster.up(shape, hostfile_dir)
    if not made:
        echo(f"cluster already up: {shape.describe()}; nothing to do")
        return
    echo(f"cluster up: {shape.describe()}")
    if shape.direct:
        echo(f"  routers   namespaces {cluster.router_name(0)}..{cluster.router_name(shape.nodes - 1)} "
             "(forwarding; one veth toJ per neighbour J, static routes in dimension order)")
    else:
        bridges = cluster.BRIDGE if shape.topology == "switch" else "leafI (per leaf) and spine"
        echo(f"  switch    namespace {cluster.SWITCH}, bridge {bridges}, ports p0..p{shape.nodes - 1}")
    for k, host in enumerate(shape.hosts):
        echo(f"  node {k:<4} namespace {host}, {cluster.NODE_DEVICE} {cluster.node_address(k)}/24")
    echo(f"  launcher  {state.launcher}")
    echo(f"  hostfiles {', '.join(state.hostfiles)}")
    echo("run with: python -m bench cluster run -- <bench arguments>")


@cluster_group.command("run", context_settings={"ignore_unknown_options": True})
@click.option("-n", "--nprocs", type=int, default=0, help="MPI ranks [default: nodes x slots].")
@click.option("--raw", is_flag=True, help="ARGS is a whole program to run on every rank, not bench arguments.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(nprocs: int, raw: bool, args: tuple[str, ...]) -> None:
    """Run `python -m bench ARGS` (or, with --raw, ARGS) with mpiexec across the emulated nodes.

    mpiexec runs inside node 0; MPICH is forced onto TCP (UCX_TLS=tcp,self over eth0), so
    every byte between nodes crosses the emulated links. Put ARGS after `--`.
    """
    state = cluster.current()
    if raw and not args:
        raise BadConfig("--raw needs a program after `--`")
    program = list(args) if raw else [sys.executable, "-m", "bench", *args]
    command = cluster.run_command(state, program, nprocs)
    code = subprocess.run(command, check=False, env=cluster.run_env()).returncode
    if code:
        sys.exit(code)


@cluster_group.command("launcher")
def launcher() -> None:
    """Print the command prefix that launches across the emulated nodes, for `bench tune --launcher`.

    python -m bench tune --launcher "$(python -m bench cluster launcher)" --nprocs 4 ...
    """
    click.echo(shlex.join(cluster.launcher_prefix(cluster.current())))


@cluster_group.command("status")
def status() -> None:
    """Show the cluster: its shape, per node bytes and TCP timeouts, per link bytes, packets and drops."""
    cluster.require_root()
    state = cluster.read_state()
    if state is None:
        leftovers = cluster.namespaces()
        echo("no emulated cluster is up" + (f" (leftover namespaces: {', '.join(leftovers)}; "
                                             "`cluster down` removes them)" if leftovers else ""))
        return
    echo(f"cluster {state.status}: {state.shape.describe()}")
    broken = cluster.problems(state.shape)
    for problem in broken:
        echo(f"  problem: {problem}")
    if not broken:
        echo(tabulate(cluster.node_report(state.shape), headers="keys"))
        echo("\nlinks (each direction; drops at its egress qdisc):")
        echo(tabulate(cluster.link_report(state.shape), headers="keys"))
    echo(f"launcher {state.launcher}; hostfiles {', '.join(state.hostfiles)}")


@cluster_group.command("down")
def down() -> None:
    """Remove the cluster's namespaces, processes and files (also after a crash)."""
    removed = cluster.down()
    echo("removed: " + ", ".join(removed) if removed else "no emulated cluster; nothing to remove")


SEED_MANIFEST = "seed-repro.json"


@main.command("seed-repro")
@click.option("--nodes", type=int, default=4, show_default=True, help="Emulated nodes.")
@click.option("--slots", type=int, default=2, show_default=True, help="Ranks per node.")
@click.option("--floats", default="1:131072:x2", show_default=True,
              help="Floats per peer: list or START:STOP:xF (the seed: 1 to 131072).")
@click.option("--runs", type=int, default=25, show_default=True,
              help="Calls per size; the first is not counted, as in the seed.")
@click.option("--algorithms", default="native,node_aware", show_default=True,
              help="Algorithms of the seed's comparison.")
@click.option("--fixes", default="throttled,rto-min", show_default=True,
              help="What to try after: 'throttled' (throttled:window=1,4 on the same links), "
                   "'rto-min' (the algorithms again with --rto-min), both, or 'none'.")
@click.option("--rto-min", "rto_min", type=int, default=5, show_default=True, help="ms, for the rto-min fix.")
@click.option("--rate", default="1gbit", show_default=True, help="Link rate.")
@click.option("--queue", default="32kb", show_default=True, help="Switch port buffer.")
@click.option("--nic-queue", default="1mb", show_default=True, help="Node interface queue.")
@click.option("--stall-threshold", default="0.1", show_default=True,
              help="Seconds above a size's fastest call that make a stall.")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Results directory [default: results/seed-repro-<UTC time>].")
@click.option("--show", "show", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=None, help="Only print the tables of an earlier seed-repro directory.")
def seed_repro(nodes: int, slots: int, floats: str, runs: int, algorithms: str, fixes: str,
               rto_min: int, rate: str, queue: str, nic_queue: str, stall_threshold: str,
               output: Path | None, show: Path | None) -> None:
    """The seed's experiment on an emulated Gigabit cluster (needs root; a few minutes).

    MPI_Alltoall ("native") and Kutzner's node-ordered loop ("node_aware") for 1 to 131072
    floats per peer, 25 calls each with the first not counted, printed as the seed's
    tables with `!` on sizes that stalled; then the same with the fixes, so that one sees
    whether the stalls go. Makes its own clusters and takes them down at the end.
    """
    if show:
        echo(seed_report(show))
        return
    plan = seed_plan(nodes, slots, rate, queue, nic_queue, rto_min, algorithms, fixes)
    sizes = ",".join(str(4 * n) for n in parse_list(floats, "floats", lambda t, w: parse_count(t, w)))
    if runs < 2:
        raise BadConfig(f"--runs {runs}; accepted: 2 or more (the first is not counted)")
    cluster.require_root()
    current = cluster.read_state()
    if current and current.shape not in [shape for _, shape, _, _ in plan]:
        raise ClusterError(f"a different cluster is up ({current.shape.describe()}); "
                           "seed-repro makes its own: run `python -m bench cluster down` first")
    output = empty_output(output, "seed-repro")
    manifest = [{"name": name, "title": f"{shape.describe()}", "algorithms": algs}
                for name, shape, algs, _ in plan]
    (output / SEED_MANIFEST).write_text(json.dumps({"experiments": manifest}, indent=2) + "\n")
    try:
        for step, (name, shape, algs, why) in enumerate(plan, 1):
            echo(f"[{step}/{len(plan)}] {why}: {algs} on {shape.describe()}", err=True)
            began = time.monotonic()
            state = cluster.current() if _same(shape) else _fresh(shape)
            bench = ["run", "--sizes", sizes, "--dtype", "float32", "--algorithms", algs,
                     "--nprocs", str(nodes * slots), "--warmup", "1", "--iterations", str(runs - 1),
                     "--stall-threshold", stall_threshold, "--max-time-per-point", "120",
                     "--output", str(output / name)]
            command = cluster.run_command(state, [sys.executable, "-m", "bench", *bench])
            with open(output / f"{name}.log", "w") as log:
                code = subprocess.run(command, check=False, env=cluster.run_env(), stdout=log).returncode
            if code:
                raise ClusterError(f"the {name} run failed (exit {code}); see {output / name}.log")
            echo(f"      done in {time.monotonic() - began:.0f} s", err=True)
    finally:
        cluster.down()
    echo(seed_report(output))


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


def _same(shape: cluster.ClusterSpec) -> bool:
    state = cluster.read_state()
    return bool(state and state.shape == shape and state.status == "up")


def _fresh(shape: cluster.ClusterSpec) -> cluster.State:
    cluster.down()
    cluster.up(shape)
    return cluster.current()


def seed_report(directory: Path) -> str:
    """The seed tables of every experiment of a seed-repro directory, with a summary."""
    manifest_path = directory / SEED_MANIFEST
    if not manifest_path.is_file():
        raise BadConfig(f"{directory} has no {SEED_MANIFEST}; it is not a seed-repro directory")
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
            parts.append(seed_table(group, f"{label}, {experiment['title']}"))
            summary.append((f"{label}, {experiment['name']}:", stall_summary(group)
                            + ("" if nodes is None else f"; MPI saw {nodes} nodes")))
    width = max((len(s[0]) for s in summary if isinstance(s, tuple)), default=0)
    lines = [f"{s[0]:<{width}} {s[1]}" if isinstance(s, tuple) else s for s in summary]
    return "\n\n".join(parts + ["summary:\n" + "\n".join(lines)])


def _by_variant(rows: list) -> dict[str, list]:
    groups: dict[str, list] = {}
    for row in rows:
        label = row.label
        groups.setdefault(label, []).append(row)
    return groups
