"""`python -m bench cluster up|run|status|down` and `seed-repro`: an emulated Gigabit Ethernet cluster (needs root)."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from a2a.emulate import cluster
from a2a.errors import BadConfig
from a2a.workflows.seed_repro import seed_report, seed_repro

from .group import echo, main


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
    echo(cluster.up_report(shape, hostfile_dir))


@cluster_group.command("run", context_settings={"ignore_unknown_options": True})
@click.option("-n", "--nprocs", type=int, default=0, help="MPI ranks [default: nodes x slots].")
@click.option("--raw", is_flag=True, help="ARGS is a whole program to run on every rank, not bench arguments.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(nprocs: int, raw: bool, args: tuple[str, ...]) -> None:
    """Run `python -m bench ARGS` (or, with --raw, ARGS) with mpiexec across the emulated nodes.

    mpiexec runs inside node 0; MPICH is forced onto TCP (UCX_TLS=tcp,self over eth0), so
    every byte between nodes crosses the emulated links. Put ARGS after `--`.
    """
    if raw and not args:
        raise BadConfig("--raw needs a program after `--`")
    code = cluster.run(list(args) if raw else [sys.executable, "-m", "bench", *args], nprocs)
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
    echo(cluster.status_report())


@cluster_group.command("down")
def down() -> None:
    """Remove the cluster's namespaces, processes and files (also after a crash)."""
    removed = cluster.down()
    echo("removed: " + ", ".join(removed) if removed else "no emulated cluster; nothing to remove")


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
def seed_repro_command(nodes: int, slots: int, floats: str, runs: int, algorithms: str, fixes: str, rto_min: int,
                       rate: str, queue: str, nic_queue: str, stall_threshold: str, output: Path | None,
                       show: Path | None) -> None:
    """The seed's experiment on an emulated Gigabit cluster (needs root; a few minutes).

    MPI_Alltoall ("native") and Kutzner's node-ordered loop ("node_aware") for 1 to 131072
    floats per peer, 25 calls each with the first not counted, printed as the seed's
    tables with `!` on sizes that stalled; then the same with the fixes, so that one sees
    whether the stalls go. Makes its own clusters and takes them down at the end.
    """
    echo(seed_report(show) if show else seed_repro(nodes, slots, floats, runs, algorithms, fixes, rto_min, rate, queue,
                                                   nic_queue, stall_threshold, output, echo))
