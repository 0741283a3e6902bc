"""The decision table's choice: per plan, the algorithm a `bench decide` table names."""
from __future__ import annotations

from typing import Any

from ..decide import lookup, parse_options, read_decision
from ..errors import A2AError, BadOption
from ..registry import get, register


@register("auto", mirrors="a tuned MPI library: the table that `bench export` writes for it",
          limits={"table": (lambda path: bool(path), "the path of a decision.json from `bench decide`")})
def auto(comm, sendbuf, recvbuf, *, table: str = ""):
    """Run the table's algorithm for this size (nearest measured process count at or below; native below all)."""
    if not table:
        raise BadOption("auto: option table is required; accepted: the path of a decision.json "
                        "from `bench decide` (--table FILE)")
    document = _read_on_rank0(comm, table)
    bytes_per_peer = sendbuf.nbytes // comm.size
    found = lookup(document, comm.size, bytes_per_peer)
    name, options = ("native", {}) if found is None else (found[1]["algorithm"], parse_options(found[1]["options"]))
    if name == "auto":
        raise BadOption(f"auto: table {table} names auto itself; make the table from the other algorithms")
    algorithm = get(name)
    try:
        resolved = algorithm.resolve(options)
    except A2AError as problem:
        raise BadOption(f"auto: table {table} names {name} with options the algorithm refuses: {problem}") from None
    return algorithm.kind("alltoall").factory(comm, sendbuf, recvbuf, **resolved)


def _read_on_rank0(comm: Any, path: str) -> dict[str, Any]:
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
