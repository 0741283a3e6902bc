"""Slurm batch scripts: the shipped sweep script (slurm/sweep.sbatch) filled in (nodes, tasks, partition, account,
time) and printed or submitted; a list of node counts submits one job per count into one campaign."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

from a2a.errors import A2AError, BadOption
from a2a.sweep.naming import RESULTS, utc_stamp
from a2a.sweep.parsing import parse_count, parse_list

SCRIPT = Path(__file__).resolve().parent / "slurm" / "sweep.sbatch"
SETTINGS_MARK = "# a2a settings"
TIME = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$|^(UNLIMITED|INFINITE)$", re.IGNORECASE)
TIME_FORMATS = "MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED"


def batch_job(nodes: str | None, ntasks_per_node: str | None, partition: str | None, account: str | None,
              time_limit: str | None, job_name: str | None, warning: int, launcher: str, python: str,
              output: str | None, campaign: str | None, resubmit: int, sbatch_options: tuple[str, ...], tune: bool,
              submit: bool, script_file: str | None, run_args: str, say: Callable[..., Any] = print) -> None:
    """Fill in the script for `bench run` (or `bench tune`) with `run_args` (checked by the caller) and print it,
    or submit it (once per node count)."""
    counts = parse_list(nodes, "node count", parse_count) if nodes else []
    if counts and counts[0] < 1:
        raise BadOption("-N/--nodes: node counts start at 1")
    stamp = utc_stamp()
    several = len(counts) > 1
    if output and (campaign or several):
        raise BadOption("--output names one job's directory; for a campaign use --campaign")
    campaign = campaign or (str(RESULTS / f"scaling-{stamp}") if several else None)
    command = "tune" if tune else "run"
    if tune and (several or campaign):
        raise BadOption("--tune runs in one allocation: give one node count, and --output rather than --campaign")
    job_name = job_name or ("a2a-tune" if tune else None)
    options = sbatch_lines(None if several else next(iter(counts), None), ntasks_per_node, partition,
                           account, time_limit, job_name, warning, sbatch_options)
    settings = {"A2A_PYTHON": python, "A2A_LAUNCHER": launcher, "A2A_COMMAND": command if tune else "",
                "A2A_RUN_ARGS": run_args,
                "A2A_RESUBMIT": str(resubmit) if resubmit else "", "A2A_OUTPUT": output or "",
                "A2A_CAMPAIGN": campaign or ""}
    script = render(SCRIPT.read_text(), options, settings)
    if not submit:
        say(script, nl=False)
        if several:
            say(f"# one job per node count, one after another:\n#   for n in {' '.join(map(str, counts))}; "
                "do sbatch --nodes=$n --dependency=singleton SCRIPT; done", err=True)
        return
    path = Path(script_file or RESULTS / f"{job_name or 'a2a-sweep'}-{stamp}.sbatch")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
    path.chmod(0o755)
    submit_jobs(path, counts, campaign, output, say)


def submit_jobs(path: Path, counts: list[int], campaign: str | None, output: str | None,
                say: Callable[..., Any] = print) -> None:
    """Submit the script once, or once per node count (one after another); say where results go."""
    each: list[int | None] = [*counts] or [None]  # None: the script's own node count
    for count in each:
        per_count = ["--nodes", str(count), "--dependency=singleton"] if len(counts) > 1 else []
        job = sbatch(*per_count, str(path))
        if campaign:
            say(f"submitted job {job}: results in {campaign}/nodes-{count or '<nodes>'}")
        else:
            say(f"submitted job {job}: results in {output or f'results/slurm-{job}'}")
    say(f"script: {path}")


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
