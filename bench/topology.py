"""`python -m bench topology-study`: the same sweep on switch, ring and torus emulated clusters (needs root)."""
from __future__ import annotations

from pathlib import Path

import click

from a2a.workflows.topology_study import ALGORITHMS, study_report, topology_study

from .group import echo, main


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
def topology_study_command(topologies: str, nodes: int, sizes: str, algorithms: str | None, iterations: int,
                           warmup: int, rate: str, queue: str, nic_queue: str, rto_min: int, max_time_per_point: str,
                           output: Path | None, show: Path | None) -> None:
    """Switch vs ring vs torus at equal per-link physics: one launch per topology, then the tables.

    Each topology gets its own emulated cluster of NODES nodes x 1 rank with the same link
    rate and queues; the same sweep runs on each (one `bench run` launch), and the study
    prints per topology the p50-vs-size table, the speedup over the first topology per size,
    where each algorithm leaves its latency floor, and the fastest algorithm per size. It
    makes its own clusters and takes them down at the end.
    """
    echo(study_report(show) if show else topology_study(topologies, nodes, sizes, algorithms, iterations, warmup, rate,
                                                        queue, nic_queue, rto_min, max_time_per_point, output, echo))
