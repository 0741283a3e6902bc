"""meta.json's contents: what a record holds, how it was made, each launch that added to it; one owner.

The schema is `a2a-record/1`, described key by key in docs/record.md. A record is made by one
backend (`mpi`: measured by `bench run`; `simgrid`: simulated by `bench simulate`) and may grow
over several launches (`--resume`). The top level describes the latest launch (its backend
facts, config and status) but keeps the first start; `launches` keeps every launch's own facts;
`by_nprocs` merges what each launch learnt per process count, the latest winning.
Reading and writing the file is a2a.record.results' (with results.csv and samples.csv).
"""
from __future__ import annotations

import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

SCHEMA = "a2a-record/1"
# backend -> the command that makes and resumes it
BACKENDS = {"mpi": "bench run", "simgrid": "bench simulate", "analytical": "bench simulate --backend analytical"}
SIMULATED = ("simgrid", "analytical")  # the backends whose records are simulated, not measured
# What each launch records of its backend's facts in `launches`, besides its command, commit, status and points
LAUNCH_FACTS = ("mpi_library", "mpi_thread_level", "world_size", "hosts", "slurm_job_id", "simgrid", "progress")
RUNNING = "running"
PROJECT = Path(__file__).resolve().parent.parent.parent  # the checkout whose commit a record names


def now(timespec: str = "seconds") -> str:
    """UTC now, as meta.json writes times."""
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


def git_commit(here: Path = PROJECT) -> str | None:
    """The commit of the checkout `here` (default: the project's), with '+dirty' for local changes, when it is one.
    Read without the index lock: a run killed mid-read (a timeout, a job's abort) must not leave the user's
    checkout locked."""
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "--no-optional-locks", "-C", str(here), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (commit + ("+dirty" if dirty else "")) or None


def version() -> str:
    """The testbed's version, as setup.cfg gives it to the installed package."""
    try:
        return metadata.version("a2a-testbed")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def software() -> dict[str, Any]:
    """The testbed's and Python's versions and the project's commit: every launch records them."""
    import numpy

    return {"a2a": version(), "git_commit": git_commit(), "python": platform.python_version(),
            "numpy": numpy.__version__}


def backend_of(meta: dict[str, Any]) -> str:
    """The backend that made a record: `simgrid` for simulated ones (records before the schema say so in
    their timing), else `mpi`."""
    if "backend" in meta:
        return meta["backend"]
    return "simgrid" if meta.get("timing") == "simulated" else "mpi"


def launch_meta(earlier: dict[str, Any], backend: str, config: dict[str, Any], plugins: list[str],
                option_defaults: dict[str, dict[str, str]], facts: dict[str, Any], already: int, dropped: int
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """meta.json for a new launch after the earlier ones (maybe none), and this launch's entry in `launches`.

    `facts` are the backend's: the MPI library, hosts and versions for `mpi`; the platform, link
    and SimGrid for `simgrid`. `already` points were recorded before; `dropped` orphan samples removed.
    """
    # a launch's start names it (samples.csv's launch column): two launches of a second (a compare --launches pair
    # on an idle machine) must not become one
    start, made_with = now("microseconds"), software()
    entry = {"command": " ".join(sys.argv), "start": start, "git_commit": made_with["git_commit"],
             **{k: facts[k] for k in LAUNCH_FACTS if k in facts},
             "dtype": config["dtype"], "status": RUNNING, "end": None, "points_before": already,
             "orphan_samples_dropped": dropped, "points": 0, "by_nprocs": {}}
    launches = earlier.get("launches") or ([_legacy_launch(earlier)] if earlier else [])
    if launches and launches[-1]["status"] == RUNNING:  # killed: what it measured is what is recorded now
        launches[-1].update(status="ended without closing the record (killed?)",
                            points=already - launches[-1].get("points_before", 0))
    meta = {"schema": SCHEMA, "backend": backend, **made_with, **facts, "command": " ".join(sys.argv),
            "argv": sys.argv, "config": config, "plugins": plugins, "option_defaults": option_defaults,
            "start": earlier.get("start", start), "end": None, "status": RUNNING,
            "oversubscribed": bool(earlier.get("oversubscribed")), "by_nprocs": dict(earlier.get("by_nprocs", {})),
            "launches": [*launches, entry]}
    return meta, entry


def _legacy_launch(meta: dict[str, Any]) -> dict[str, Any]:
    """A launch entry for a record written before meta.json kept `launches`."""
    return {**{k: meta.get(k) for k in ("command", "start", "git_commit", *LAUNCH_FACTS)},
            "dtype": meta.get("config", {}).get("dtype"),
            "status": meta.get("status"), "end": meta.get("end"), "by_nprocs": meta.get("by_nprocs", {})}
