"""What the rest of the testbed reads of an algorithm: its cost, its link traffic, its steps, its twins, its rank
in a tie. Each answers for any name, registered or not (a record may name a plug-in that is not loaded here)."""
from __future__ import annotations

import inspect
from functools import partial
from typing import Any, Callable, Hashable

from a2a.algos.cost import GENERIC, Formula, MatrixCost, Round, Traffic, everything
from a2a.algos.nodes import one_per_node
from a2a.algos.options import schedule_options
from a2a.algos.registry import PLUGIN_SIMPLICITY, Algorithm, Kind, known, with_defaults
from a2a.record.decision import parse_options
from a2a.record.results import NATIVE, OVERLAP, short

_NOTHING = Algorithm("", {}, {})  # what an unknown name serves: nothing


def _kind(name: str, collective: str = "alltoall") -> Kind | None:
    return (known(name) or _NOTHING).kinds.get(collective)


def formula(name: str) -> Formula:
    """The alltoall cost formula of `name`: its own, else the generic one (native, plug-ins without one)."""
    kind = _kind(name)
    return kind.cost if kind and isinstance(kind.cost, Formula) else GENERIC  # register: alltoall's is a Formula


def traffic(name: str) -> Traffic:
    """The rounds of messages of `name`'s alltoall: its own, else its steps', else one round of everything at once."""
    kind = _kind(name)
    if kind and kind.traffic:
        return kind.traffic
    return partial(_stepped_traffic, name) if kind and kind.steps else everything


def steps_for(name: str, options: dict[str, Any], nodes: list[list[int]]) -> Callable[[int, int], Any] | None:
    """`name`'s registered steps as steps(p, rank) under `options` (text or typed; defaults filled in) on a job
    of these `nodes`, or None if it registered none."""
    algorithm, kind = known(name) or _NOTHING, _kind(name)
    if not (kind and kind.steps):
        return None
    chosen = {k: o.parse(options.get(k, o.default), name) for k, o in schedule_options(algorithm.options).items()}
    if "nodes" in inspect.signature(kind.steps).parameters:
        chosen["nodes"] = nodes
    return partial(kind.steps, **chosen)


def _stepped_traffic(name: str, p: int, m: float, options: dict) -> list[Round]:
    """Round k: every rank sends the blocks of its k-th step, m bytes each, to that step's peers (everything at
    once where the factory runs no steps); one rank per node."""
    steps, ranks = steps_for(name, options, one_per_node(p)), []
    if steps is None:  # `traffic` reads steps only where there are some
        return everything(p, m)
    for rank in range(p):
        mine = steps(p, rank)
        if mine is None:
            return everything(p, m)
        rounds = getattr(mine, "rounds", None)  # Phases and Rounds list their messages without naming blocks
        ranks.append(rounds() if rounds else [step.sends() for step in mine])
    found = ([(rank, dest, blocks * m) for rank, mine in enumerate(ranks) if k < len(mine) for dest, blocks in mine[k]
              if dest != rank] for k in range(max(map(len, ranks), default=0)))
    return [messages for messages in found if messages]  # a collective on one node's ranks sends none at one per node


def matrix_cost(name: str) -> MatrixCost | None:
    """The alltoallv cost of `name` on a count matrix, if it registered one."""
    kind = _kind(name, "alltoallv")
    return kind.cost if kind and isinstance(kind.cost, MatrixCost) else None  # register: alltoallv's is one


def twin(name: str, collective: str, library: str, options: dict[str, str], nprocs: int) -> Hashable | None:
    """`library`'s own algorithm for `name` with `options` (text; defaults filled in here) at `nprocs`, or None."""
    kind = _kind(name, collective)
    found = kind.twins.get(library) if kind else None
    return found(with_defaults(name, options), nprocs) if found else None


def simplicity(name: str) -> int:
    """The tie-break rank of `name`: lower wins a tie; unknown names come after every registered one."""
    found = known(name)
    return found.simplicity if found else PLUGIN_SIMPLICITY


def library_own(algorithm: str, options: str, timing: str = "") -> bool:
    """Whether a record's (algorithm, options) measured under `timing` is the library's own all-to-all, every
    comparison's baseline, whichever of its defaults the record spells out ('', 'form=blocking')."""
    return algorithm == NATIVE and with_defaults(NATIVE, parse_options(options)) == _own(timing)


def library_own_options(timing: str = "") -> str:
    """The options of the library's own all-to-all under `timing` as a record spells them ('form=blocking')."""
    return ";".join(f"{k}={v}" for k, v in _own(timing).items())


def _own(timing: str) -> dict[str, str]:
    """native at its default options; under the overlap protocol, which starts an exchange, tests it and waits for it,
    its non-blocking form (MPI_Ialltoall)."""
    return {**with_defaults(NATIVE, {}), **({"form": "nonblocking"} if timing == OVERLAP else {})}


def shown(algorithm: str, options: str) -> str:
    """The name tables and messages give a record's (algorithm, options): options at their registered defaults left
    out ('bruck', not 'bruck:radix=2'; 'bruck:radix=4')."""
    return short(algorithm, options, {algorithm: with_defaults(algorithm, {})})
