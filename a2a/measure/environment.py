"""Facts about the run for meta.json: library, versions, hosts, commit, job."""
from __future__ import annotations

import os
import platform
from collections import Counter
from pathlib import Path
from typing import Any

from a2a.errors import BadConfig
from a2a.execute.executor import executor_facts
from a2a.measure.cache import last_level_cache
from a2a.mpi import TOPOLOGY_ENV, library_version
from a2a.mpilib import PROFILES, profile_of
from a2a.units import counted


def describe_run(comm: Any) -> dict[str, Any]:
    """What a reader needs to trust or reproduce a measured run: library, versions, hosts (collective)."""
    import mpi4py
    from mpi4py import MPI

    hosts = Counter(comm.allgather(MPI.Get_processor_name()))
    return {
        "world_size": comm.size,
        "hosts": dict(hosts),
        "nodes": len(hosts),
        "ranks_per_node": max(hosts.values()),
        "mpi_library": library_version(),
        "mpi_version": "%d.%d" % MPI.Get_version(),
        "mpi_thread_level": ["single", "funneled", "serialized", "multiple"][MPI.Query_thread()],
        "mpi4py": mpi4py.__version__,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "topology": emulated_topology() or None,
        "last_level_cache": last_level_cache(),
        "tuning": tuning_variables(),
        "executor": executor_facts(comm),
    }


# The variables by which a library's collective tuning is set from outside (a tuning file, a forced algorithm)
TUNING_PREFIXES = tuple(prefix for profile in PROFILES for prefix in profile.tuning_variables)


def tuning_variables() -> dict[str, str]:
    """The tuning variables set in this rank's environment: what the library's own MPI_Alltoall runs under."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(TUNING_PREFIXES)}


def emulated_topology() -> str:
    """The topology of the emulated cluster this rank runs on ('' anywhere else)."""
    return os.environ.get(TOPOLOGY_ENV, "")


def node_memory_share(comm: Any) -> int:
    """Half of this node's available memory divided among its ranks (collective)."""
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    ranks_here = local.size
    local.Free()
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    return comm.allreduce(available // 2 // ranks_here, op=MPI.MIN)


def cores_of_this_rank() -> frozenset[int]:
    """CPUs this process may run on (its affinity mask)."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset(range(os.cpu_count() or 1))


def machine_of_this_rank() -> str:
    """The kernel this rank runs on: its boot id, the same in every network namespace of a machine."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return platform.node()


def by_machine(placements: list[tuple[str, str, frozenset[int]]]) -> list[tuple[str, frozenset[int]]]:
    """(machine, host name, cores) per rank -> (host names of that machine, cores): emulated nodes
    in namespaces of one kernel share its cores, so they count as one machine."""
    names: dict[str, set[str]] = {}
    for machine, host, _ in placements:
        names.setdefault(machine, set()).add(host)
    return [(",".join(sorted(names[machine])), cores) for machine, _, cores in placements]


def oversubscription(placements: list[tuple[str, frozenset[int]]]) -> dict[str, dict[str, int]]:
    """Hosts whose ranks outnumber the cores they may use: {host: {"ranks": n, "cores": c}}."""
    ranks: Counter = Counter()
    cores: dict[str, set[int]] = {}
    for host, mask in placements:
        ranks[host] += 1
        cores.setdefault(host, set()).update(mask)
    return {host: {"ranks": ranks[host], "cores": len(cores[host])}
            for host in sorted(ranks) if ranks[host] > len(cores[host])}


def describe_oversubscription(crowded: dict[str, dict[str, int]]) -> str:
    """'oversubscribed: 4 ranks on 2 cores (vm)' or ''."""
    return "; ".join(f"oversubscribed: {v['ranks']} ranks on {counted(v['cores'], 'core')} ({host})"
                     for host, v in crowded.items())


def ask_for_progress_thread() -> None:
    """Set the variables that start a library's progress thread (before MPI starts; harmless to a library that
    reads none of them)."""
    for profile in PROFILES:
        os.environ.update(profile.progress_thread)


def progress_thread_running() -> None:
    """BadConfig unless this library runs the progress thread asked for (MPICH does, at MPI_THREAD_MULTIPLE)."""
    from mpi4py import MPI

    version = library_version()
    library = version.splitlines()[0]
    if not profile_of(version).progress_thread:
        raise BadConfig(f"--progress thread: {library} has no asynchronous progress thread for collectives that the "
                        "testbed knows how to start (Open MPI 5.0 has none: its btl_tcp_progress_thread moves TCP "
                        "traffic only); accepted here: --progress poll (A2A_EXECUTOR_PROGRESS=thread gives "
                        "executor=c plans a thread of their own under MPI_THREAD_MULTIPLE: docs/executor.md)")
    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        raise BadConfig(f"--progress thread: {library} did not start its progress thread (it needs "
                        "MPI_THREAD_MULTIPLE, and runs at another level); accepted here: --progress poll")
