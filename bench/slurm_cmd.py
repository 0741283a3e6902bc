"""`bench slurm`: fill in the shipped batch script (nodes, tasks, partition, account, time) and
print it or submit it; a list of node counts submits one job per count into one campaign."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from a2a.errors import A2AError, BadOption

from .group import echo, main
from .options import parse_count, parse_list

SCRIPT = Path(__file__).resolve().parent / "slurm" / "sweep.sbatch"
SETTINGS_MARK = "# a2a settings"
TIME = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$|^(UNLIMITED|INFINITE)$", re.IGNORECASE)
TIME_FORMATS = "MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED"
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
    counts = parse_list(nodes, "node count", parse_count) if nodes else []
    if counts and counts[0] < 1:
        raise BadOption("-N/--nodes: node counts start at 1")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    several = len(counts) > 1
    if output and (campaign or several):
        raise BadOption("--output names one job's directory; for a campaign use --campaign")
    campaign = campaign or (f"results/scaling-{stamp}" if several else None)
    command = "tune" if tune else "run"
    if tune and (several or campaign):
        raise BadOption("--tune runs in one allocation: give one node count, and --output rather than --campaign")
    job_name = job_name or ("a2a-tune" if tune else None)
    options = sbatch_lines(None if several else next(iter(counts), None), ntasks_per_node, partition,
                           account, time_limit, job_name, warning, sbatch_options)
    settings = {"A2A_PYTHON": python, "A2A_LAUNCHER": launcher, "A2A_COMMAND": command if tune else "",
                "A2A_RUN_ARGS": run_arguments(run_options, command),
                "A2A_RESUBMIT": str(resubmit) if resubmit else "", "A2A_OUTPUT": output or "",
                "A2A_CAMPAIGN": campaign or ""}
    script = render(SCRIPT.read_text(), options, settings)
    if not submit:
        click.echo(script, nl=False)
        if several:
            echo(f"# one job per node count, one after another:\n#   for n in {' '.join(map(str, counts))}; "
                 "do sbatch --nodes=$n --dependency=singleton SCRIPT; done", err=True)
        return
    path = Path(script_file or f"results/{job_name or 'a2a-sweep'}-{stamp}.sbatch")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
    path.chmod(0o755)
    submit_jobs(path, counts, campaign, output)


def submit_jobs(path: Path, counts: list[int], campaign: str | None, output: str | None) -> None:
    """Submit the script once, or once per node count (one after another); say where results go."""
    for count in counts or [None]:
        per_count = ["--nodes", str(count), "--dependency=singleton"] if len(counts) > 1 else []
        job = sbatch(*per_count, str(path))
        if campaign:
            echo(f"submitted job {job}: results in {campaign}/nodes-{count or '<nodes>'}")
        else:
            echo(f"submitted job {job}: results in {output or f'results/slurm-{job}'}")
    echo(f"script: {path}")


def sbatch_lines(nodes: int | None, ntasks_per_node: str | None, partition: str | None,
                 account: str | None, time_limit: str | None, job_name: str | None, warning: int,
                 extra: tuple[str, ...]) -> list[str]:
    """The #SBATCH options to set, as `--key=value` (or `--flag`) strings, checked."""
    if ntasks_per_node is not None and parse_count(ntasks_per_node, "--ntasks-per-node") < 1:
        raise BadOption("--ntasks-per-node must be at least 1")
    if time_limit is not None and not TIME.match(time_limit):
        raise BadOption(f"--time {time_limit!r}; accepted: {TIME_FORMATS}")
    for name, value in (("--partition", partition), ("--account", account), ("--job-name", job_name)):
        if value is not None and (not value or re.search(r"\s", value)):
            raise BadOption(f"{name} {value!r}; accepted: a non-empty name without spaces")
    for option in extra:
        if not option.startswith("--") or re.search(r"\s", option):
            raise BadOption(f"--sbatch {option!r}; accepted: one long sbatch option such as --qos=debug")
    given = {"nodes": nodes, "ntasks-per-node": ntasks_per_node, "partition": partition, "account": account,
             "time": time_limit, "job-name": job_name, "signal": f"B:TERM@{warning}"}
    return [f"--{key}={value}" for key, value in given.items() if value is not None] + list(extra)


def run_arguments(run_options: tuple[str, ...], command: str = "run") -> str:
    """Check `bench run` (or `bench tune`) options for the job; return them as the script's A2A_RUN_ARGS."""
    for word in run_options:
        if word.split("=", 1)[0] in FORBIDDEN_RUN_OPTIONS:
            raise BadOption(f"{word.split('=', 1)[0]} is the script's business; use `bench slurm --output`")
        if re.search(r"[\s'\"\\$`]", word):
            raise BadOption(f"run option {word!r}: the batch script splits options on spaces, so a "
                            "value cannot hold spaces, quotes, $, ` or \\")
    try:
        main.commands[command].make_context(f"bench {command}", list(run_options))
    except click.UsageError as problem:
        raise BadOption(f"options for the {command} (after --): {problem.format_message()}") from None
    return " ".join(run_options)


def render(template: str, options: list[str], settings: dict[str, str]) -> str:
    """Set #SBATCH options (replacing the template's) and a2a settings (the environment still wins)."""
    lines = template.splitlines()
    if any(option.startswith("--ntasks-per-node=") for option in options):
        lines = [line for line in lines if not line.startswith("#SBATCH --ntasks=")]  # it would win
    for option in options:
        key = option.split("=", 1)[0]
        existing = [i for i, line in enumerate(lines) if re.match(rf"#SBATCH {re.escape(key)}(=|\s|$)", line)]
        if existing:
            lines[existing[0]] = f"#SBATCH {option}"
        else:
            last = max(i for i, line in enumerate(lines) if line.startswith("#SBATCH "))
            lines.insert(last + 1, f"#SBATCH {option}")
    mark = next(i for i, line in enumerate(lines) if line.startswith(SETTINGS_MARK))
    chosen = [f'[ -n "${{{name}:-}}" ] || {name}={shlex.quote(value)}'
              for name, value in settings.items() if value]
    lines[mark + 1:mark + 1] = chosen
    return "\n".join(lines) + "\n"


def sbatch(*args: str) -> str:
    """Submit a script; return the job id."""
    if not shutil.which("sbatch"):
        raise A2AError("sbatch not found: run this on a Slurm login node, or drop --submit to print the script")
    done = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise A2AError(f"sbatch refused the job: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip().split(";")[0]
