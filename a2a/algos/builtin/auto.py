"""The decision table's choice: per plan, the algorithm a `bench decide` table names.

Measuring it checks a table; it is never a candidate itself (not in `--algorithms all`, not
in decisions).
"""
from __future__ import annotations

from typing import Any

from a2a.algos.options import schedule_options
from a2a.algos.registry import get, register
from a2a.errors import A2AError, BadOption
from a2a.record.decision import Decision, lookup, parse_options, read_decision
from a2a.record.results import NATIVE

MIRRORS = "a tuned MPI library: the table that `bench export` writes for it"
LIMITS = {"table": (lambda path: bool(path), "the path of a decision.json from `bench decide`")}


@register("auto", mirrors=MIRRORS, limits=LIMITS, candidate=False)
def auto(comm, sendbuf, recvbuf, *, table: str = "", workload: str = ""):
    """Run the table's algorithm for this size (nearest measured process count at or below; native below all)."""
    if workload not in ("", "uniform"):
        raise BadOption(f"auto: workload={workload} is for alltoallv; an alltoall is uniform")
    chosen = choose(comm, table, sendbuf.nbytes // comm.size, "alltoall", "uniform")
    return chosen(comm, sendbuf, recvbuf)


@register("auto", collective="alltoallv", mirrors=MIRRORS, limits=LIMITS, candidate=False)
def auto_v(comm, send, recv, *, table: str = "", workload: str = ""):
    """The table's algorithm for this workload and mean block size (its only alltoallv workload if not named)."""
    from mpi4py import MPI

    mean = comm.allreduce(int(send.nbytes.sum()), op=MPI.SUM) // comm.size ** 2
    return choose(comm, table, mean, "alltoallv", workload)(comm, send, recv)


def choose(comm: Any, table: str, bytes_per_peer: int, collective: str, workload: str) -> Any:
    """The factory (options bound) the table names for this communicator, size, collective and workload."""
    if not table:
        raise BadOption("auto: option table is required; accepted: the path of a decision.json "
                        "from `bench decide` (--table FILE)")
    document = _read_on_rank0(comm, table)
    if collective == "alltoallv" and not workload:
        found = sorted({t.column("workload") for t in document.tables if t.column("collective") == collective})
        if len(found) != 1:
            raise BadOption(f"auto: table {table} has alltoallv decisions for workloads {found or 'none'}; "
                            "name one with workload=SPEC")
        workload = found[0]
    chosen = lookup(document, comm.size, bytes_per_peer, collective=collective, workload=workload)
    name, options = (NATIVE, {}) if chosen is None else (chosen[1].algorithm, parse_options(chosen[1].options))
    if name == "auto":
        raise BadOption(f"auto: table {table} names auto itself; make the table from the other algorithms")
    algorithm = get(name)
    try:
        resolved = schedule_options(algorithm.resolve(options))  # auto runs the chosen schedule's own code
        factory = algorithm.kind(collective).factory
    except A2AError as problem:
        raise BadOption(f"auto: table {table} names {name} with options the algorithm refuses: {problem}") from None
    return lambda *buffers: factory(*buffers, **resolved)


def _read_on_rank0(comm: Any, path: str) -> Decision:
    """Read the table once and share it, so every rank decides alike (or fails alike)."""
    outcome: Any = None
    if comm.rank == 0:
        try:
            outcome = read_decision(path)
        except A2AError as problem:
            outcome = str(problem)
    outcome = comm.bcast(outcome, root=0)
    if isinstance(outcome, str):
        raise BadOption(f"auto: {outcome}")
    return outcome
