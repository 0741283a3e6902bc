"""`bench slurm`: the sweep's batch script filled in, printed or submitted (a2a.workflows.slurm)."""
from __future__ import annotations

import re
import sys

import click

from a2a.errors import BadOption
from a2a.workflows.slurm import TIME_FORMATS, batch_job

from .group import echo, main

FORBIDDEN_RUN_OPTIONS = ("--output", "--resume")


@main.command("slurm", context_settings={"ignore_unknown_options": True})
@click.option("-N", "--nodes", help="Node count, or a list (1,2,4,8): one job per count, one campaign "
              "directory. [default: the script's, 2]")
@click.option("--ntasks-per-node", help="MPI ranks per node (instead of the script's --ntasks=8).")
@click.option("-p", "--partition", help="Slurm partition. [default: the cluster's]")
@click.option("-A", "--account", help="Account to charge. [default: yours]")
@click.option("-t", "--time", "time_limit", help=f"Time limit: {TIME_FORMATS}. [default: 01:00:00]")
@click.option("-J", "--job-name", help="Job name. [default: a2a-sweep]")
@click.option("--warning", type=click.IntRange(min=1), default=120, show_default=True,
              help="Seconds before the time limit at which the sweep is asked to stop.")
@click.option("--launcher", type=click.Choice(["mpirun", "srun"]), default="mpirun", show_default=True)
@click.option("--python", "python", default=sys.executable, show_default="this Python",
              help="The Python, with the testbed installed, that the ranks run.")
@click.option("--output", help="Results directory of a single job. [default: results/slurm-<job id>]")
@click.option("--campaign", help="Campaign directory: one job per node count, each writing CAMPAIGN/nodes-N. "
              "[default with several node counts: results/scaling-<UTC time>]")
@click.option("--resubmit", type=click.IntRange(min=0), default=0, show_default=True,
              help="Requeue the job up to this many times when the time limit stops the sweep.")
@click.option("--sbatch", "sbatch_options", multiple=True, metavar="OPTION",
              help="Another sbatch option, e.g. --sbatch=--qos=debug or --sbatch=--overcommit (repeatable).")
@click.option("--tune", is_flag=True, help="The job runs `bench tune` (sweeps, decide, export, verify) instead of "
              "one sweep; RUN_OPTIONS are then tune's options.")
@click.option("--submit", is_flag=True, help="Submit with sbatch instead of printing the script.")
@click.option("--script-file", help="Where --submit writes the script. [default: results/<job name>-<UTC time>.sbatch]")
@click.argument("run_options", nargs=-1, type=click.UNPROCESSED)
def slurm(nodes: str | None, ntasks_per_node: str | None, partition: str | None, account: str | None,
          time_limit: str | None, job_name: str | None, warning: int, launcher: str, python: str,
          output: str | None, campaign: str | None, resubmit: int, sbatch_options: tuple[str, ...], tune: bool,
          submit: bool, script_file: str | None, run_options: tuple[str, ...]) -> None:
    """Fill in the sweep's batch script and print it (or --submit it).

    RUN_OPTIONS after `--` are `bench run` options for the sweep (with --tune, `bench tune`'s), e.g.
    `python -m bench slurm -N 4 --ntasks-per-node 32 -p compute -t 2:00:00 -- --sizes 8:1M:x4`.
    """
    batch_job(nodes, ntasks_per_node, partition, account, time_limit, job_name, warning, launcher, python, output,
              campaign, resubmit, sbatch_options, tune, submit, script_file,
              run_arguments(run_options, "tune" if tune else "run"), echo)


def run_arguments(run_options: tuple[str, ...], command: str = "run") -> str:
    """Check `bench run` (or `bench tune`) options for the job; return them as the script's A2A_RUN_ARGS."""
    for word in run_options:
        if word.split("=", 1)[0] in FORBIDDEN_RUN_OPTIONS:
            raise BadOption(f"{word.split('=', 1)[0]} is the script's business; use `bench slurm --output`")
        if re.search(r"[\s'\"\\$`]", word):
            raise BadOption(f"run option {word!r}: the batch script splits options on spaces, so a "
                            "value cannot hold spaces, quotes, $, ` or \\")
    found = main.get_command(click.Context(main), command)
    if found is None:
        raise BadOption(f"bench {command}: no such command; accepted: run, tune")
    try:
        found.make_context(f"bench {command}", list(run_options))
    except click.UsageError as problem:
        raise BadOption(f"options for bench {command} (after --): {problem.format_message()}") from None
    return " ".join(run_options)


