"""The registry: Algorithm, what it serves (Kind), register(), and the names registered.

An algorithm is a factory ``f(comm, sendbuf, recvbuf, *, option=default, ...)`` that does all
preparation and returns the call (a2a.algos.plan). Its keyword-only parameters are its options
(a2a.algos.options). One name may serve both collectives: an alltoallv factory
``f(comm, send, recv, *, ...)`` takes two checked `VBuffer`s and registers with
``collective="alltoallv"`` and the same options.

What the rest of the testbed knows of an algorithm it reads from what register() was given
(a2a.algos.facts): its cost for the model, its rounds of link traffic for the contention
model, the steps its factory runs for the simulator, its twins in the MPI libraries for the
exporters, and its place in the tie-break of decisions. docs/adding-an-algorithm.md walks
through one.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator

from a2a.algos.buffers import alltoall_call, alltoallv_call
from a2a.algos.cost import Formula, MatrixCost, Traffic
from a2a.algos.options import EXECUTOR, EXECUTOR_OPTION, Limit, Option, defaults_text, options_of
from a2a.algos.plan import Plan
from a2a.errors import BadOption, PluginError, UnknownAlgorithm
from a2a.mpilib import PROFILES

ENTRY_POINT_GROUP = "a2a.algorithms"
LIBRARIES = tuple(p.name for p in PROFILES if p.files)  # whose algorithms an algorithm may name as its twins
# ... and the non-blocking selections it may name them in (twins of its alltoall, run by MPI_Ialltoall)
NONBLOCKING_TWINS = tuple(p.ialltoall_twins for p in PROFILES if p.ialltoall_twins)
PLUGIN_SIMPLICITY = 100  # where plug-ins that do not say come in the tie-break: after the built-ins
BUILTIN_PACKAGE = "a2a.algos.builtin"  # loaded by name, as plug-ins are: no import cycle
# What makes a plan (checks, agreement, the factory run for the C executor or the engine): the interface names it and
# a2a.execute provides it, so that nothing here imports the wings that run plans.
PLANNING = "a2a.execute.planning"
COLLECTIVES = ("alltoall", "alltoallv")
# (options as text with every default filled in, process count) -> the library's own choice, or None
Twin = Callable[[dict[str, str], int], Hashable | None]
# steps(p, rank, **options): what the factory runs after copying its own block, as a2a.algos.schedule Steps (one
# Sendrecv of blocks each; Exchanges keep a run of one-block Steps as arrays, Rounds a run of many-block ones as
# peers and counts) or Batches (many peers at once, then one wait), or Phases (a whole call with its copies and
# collectives), or None where it runs something else; the simulator reads them instead of capturing the plan. One
# that declares `nodes` is also given the ranks of each node of the job (list[list[int]]), as MPI would tell.
StepsOf = Callable[..., Any]


@dataclass(frozen=True)
class Kind:
    """How an algorithm serves one collective: its factory, what it does and mirrors, and what it costs.

    `cost`: a Formula for alltoall, a MatrixCost for alltoallv; `traffic`: alltoall's rounds of
    messages on the links; `steps`: the Steps its factory runs (StepsOf); `twins`: per library
    (LIBRARIES), the library's algorithm that sends the same messages, and per non-blocking selection
    (NONBLOCKING_TWINS) the one MPI_Ialltoall runs that does.
    """

    factory: Callable[..., Any]
    summary: str
    mirrors: str = ""
    cost: Formula | MatrixCost | None = None
    traffic: Traffic | None = None
    steps: StepsOf | None = None
    twins: dict[str, Twin] = field(default_factory=dict)
    intercomm: bool = False  # serves intercommunicators (else refused, naming the algorithm)
    in_place: bool = False  # takes MPI.IN_PLACE itself (else the plan stages the data: one copy per call)
    exact: bool = False  # its schedule is exact data: the algorithm takes executor=c|python (a2a.execute.executor)


@dataclass(frozen=True)
class Algorithm:
    """A registered all-to-all algorithm: one set of options, a factory per collective it serves."""

    name: str
    options: dict[str, Option]
    kinds: dict[str, Kind]
    simplicity: int = PLUGIN_SIMPLICITY  # decisions give a tie to the lowest: 0 is native, the simplest
    candidate: bool = True  # False: measured to check others' choices, never chosen itself (auto)

    @property
    def collectives(self) -> tuple[str, ...]:
        """The collectives it serves, alltoall first."""
        return tuple(c for c in COLLECTIVES if c in self.kinds)

    @property
    def summary(self) -> str:
        """What it does (for alltoall when it serves both)."""
        return self.kinds[self.collectives[0]].summary

    @property
    def mirrors(self) -> str:
        """The library designs it mirrors (for alltoall when it serves both)."""
        return self.kinds[self.collectives[0]].mirrors

    def kind(self, collective: str) -> Kind:
        """Its factory for `collective`; BadOption names the algorithms that serve it if it does not."""
        if collective not in self.kinds:
            raise BadOption(f"{self.name} serves {' and '.join(self.collectives)}, not {collective}; "
                            f"algorithms serving {collective}: {', '.join(algorithms(collective))}")
        return self.kinds[collective]

    def resolve(self, options: dict[str, Any]) -> dict[str, Any]:
        """Check option names and values; return every option with defaults filled in."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            accepted = ", ".join(self.options) or "none"
            raise BadOption(f"{self.name}: unknown option {', '.join(unknown)}; accepted: {accepted}")
        return {k: o.parse(options[k], self.name) if k in options else o.default
                for k, o in self.options.items()}

    def plan(self, comm: Any, sendbuf: Any, recvbuf: Any, **options: Any) -> Plan:
        """Check the call and the ranks' agreement on every rank, then prepare what one MPI_Alltoall-like call needs.

        sendbuf may be MPI.IN_PLACE (the data is taken from recvbuf); docs/library.md lists the buffers taken.
        """
        return planned(comm, lambda: self, "alltoall", options, lambda: alltoall_call(comm, sendbuf, recvbuf))

    def plan_v(self, comm: Any, sendbuf: Any, sendcounts: Any, recvbuf: Any, recvcounts: Any,
               sdispls: Any = None, rdispls: Any = None, **options: Any) -> Plan:
        """The same for MPI_Alltoallv: counts and displacements in elements (packed when None)."""
        return planned(comm, lambda: self, "alltoallv", options,
                       lambda: alltoallv_call(comm, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls))

    def init(self, comm: Any, sendbuf: Any, recvbuf: Any, **options: Any) -> Plan:
        """The plan prepared to run non-blocking (MPI_Alltoall_init's counterpart): start(), test(), wait()."""
        return planned(comm, lambda: self, "alltoall", options, lambda: alltoall_call(comm, sendbuf, recvbuf),
                       nonblocking=True)

    def init_v(self, comm: Any, sendbuf: Any, sendcounts: Any, recvbuf: Any, recvcounts: Any,
               sdispls: Any = None, rdispls: Any = None, **options: Any) -> Plan:
        """The same for MPI_Alltoallv_init."""
        return planned(comm, lambda: self, "alltoallv", options,
                       lambda: alltoallv_call(comm, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls),
                       nonblocking=True)

    def describe_options(self) -> str:
        """Options as `name=default (accepted)` text."""
        return ", ".join(
            f"{o.name}={o.default}" + (f" ({o.limit[1]})" if o.limit else "")
            for o in self.options.values()
        )


class Registry:
    """Name -> Algorithm: built-ins, entry points, and plug-ins loaded by the caller."""

    def __init__(self) -> None:
        self._algorithms: dict[str, Algorithm] = {}
        self._discovered = False

    def add(self, name: str, collective: str, kind: Kind, options: dict[str, Option], simplicity: int | None,
            candidate: bool) -> None:
        """Register a name's factory for a collective, once; both collectives' options must agree."""
        known = self._algorithms.get(name)
        if kind.exact or (known and EXECUTOR in known.options):  # the name takes executor for both collectives
            options = {**options, EXECUTOR: EXECUTOR_OPTION}
            if known and EXECUTOR not in known.options:
                known = replace(known, options={**known.options, EXECUTOR: EXECUTOR_OPTION})
        if known is None:
            self._algorithms[name] = Algorithm(name, options, {collective: kind},
                                               PLUGIN_SIMPLICITY if simplicity is None else simplicity, candidate)
            return
        if (simplicity is not None and simplicity != known.simplicity) or candidate != known.candidate:
            raise PluginError(f"{name}: its {collective} registration gives another simplicity or candidacy "
                              f"than its {known.collectives[0]} one; give them once, alike")
        if collective in known.kinds:
            if known.kinds[collective].factory is not kind.factory:
                raise PluginError(f"algorithm {name!r} is already registered for {collective}")
            return
        if {k: o.default for k, o in options.items()} != {k: o.default for k, o in known.options.items()}:
            raise PluginError(f"{name}: its {collective} options ({defaults_text(options)}) differ from its "
                              f"{known.collectives[0]} options ({defaults_text(known.options)}); "
                              "one name has one set of options")
        merged = {k: o if o.limit else options[k] for k, o in known.options.items()}
        self._algorithms[name] = replace(known, options=merged, kinds={**known.kinds, collective: kind})

    def all(self) -> dict[str, Algorithm]:
        """Every algorithm, built-ins and entry points loaded on first use (a failing one raises every time)."""
        if not self._discovered:
            for module in builtin_modules():
                importlib.import_module(module)
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                with self.undone_on_error():
                    try:
                        ep.load()
                    except Exception as exc:
                        raise PluginError(f"entry point {ep.name} ({ep.value}): {exc}") from exc
            self._discovered = True
        return self._algorithms

    @contextmanager
    def undone_on_error(self) -> Iterator[None]:
        """Forget what a failing import registered, so that importing it again fails again."""
        before = dict(self._algorithms)
        try:
            yield
        except BaseException:
            self._algorithms.clear()
            self._algorithms.update(before)
            raise


# The one process-wide table, as in mpi4py.bench: register() must reach it from any module.
REGISTRY = Registry()


def register(name: str, *, collective: str = "alltoall", mirrors: str = "", limits: dict[str, Limit] | None = None,
             cost: Formula | MatrixCost | None = None, traffic: Traffic | None = None, steps: StepsOf | None = None,
             twins: dict[str, Twin] | None = None, simplicity: int | None = None, candidate: bool = True,
             intercomm: bool = False, in_place: bool = False,
             exact: bool | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a factory `f(comm, sendbuf, recvbuf, *, option=default...)` under `name` for `collective`,
    with what the model, the contention study, the exporters and the tie-break know of it (see Kind). `exact`:
    whether its schedule is exact data the C executor may run (default: it declares its steps)."""
    if collective not in COLLECTIVES:
        raise PluginError(f"{name}: collective {collective!r}; accepted: {', '.join(COLLECTIVES)}")
    expected = Formula if collective == "alltoall" else MatrixCost
    if cost is not None and not isinstance(cost, expected):
        raise PluginError(f"{name}: the cost of an {collective} is a {expected.__name__}, not {type(cost).__name__}")
    stray = sorted(set(twins or {}) - set(LIBRARIES) - set(NONBLOCKING_TWINS))
    if stray:
        raise PluginError(f"{name}: twins in {', '.join(stray)}; accepted: {', '.join(LIBRARIES + NONBLOCKING_TWINS)}")

    def decorate(factory: Callable[..., Any]) -> Callable[..., Any]:
        options = options_of(factory, limits or {}, name)
        summary = (inspect.getdoc(factory) or "").strip().splitlines()
        kind = Kind(factory, summary[0] if summary else "", mirrors, cost, traffic, steps, dict(twins or {}),
                    intercomm, in_place, steps is not None if exact is None else exact)
        REGISTRY.add(name, collective, kind, options, simplicity, candidate)
        return factory
    return decorate


def planned(*args: Any, **kwargs: Any) -> Plan:
    """A plan made by the module PLANNING names (its `planned`): every rank checks its call and agrees first."""
    return importlib.import_module(PLANNING).planned(*args, **kwargs)


def builtin_modules() -> list[str]:
    """The built-in algorithms' modules: every module in the folder a2a/algos/builtin."""
    folder = Path(__file__).resolve().parent / "builtin"
    return [f"{BUILTIN_PACKAGE}.{m.name}" for m in pkgutil.iter_modules([str(folder)])]


def with_defaults(algorithm: str, options: dict[str, str]) -> dict[str, str]:
    """`options` (text values) over the algorithm's registered defaults: a table, a record or a spec may
    leave defaults out; an algorithm not registered here keeps what it was given."""
    found = known(algorithm)
    return {**({k: str(o.default) for k, o in found.options.items()} if found else {}), **options}


def known(name: str) -> Algorithm | None:
    """The algorithm called `name`, or None (a record may name a plug-in that is not loaded here)."""
    return REGISTRY.all().get(name)


def algorithms(collective: str | None = None) -> list[str]:
    """Names of the registered algorithms (those serving `collective` when given)."""
    return sorted(n for n, a in REGISTRY.all().items() if collective is None or collective in a.kinds)


def candidates(collective: str) -> list[str]:
    """Names that serve `collective` and may be chosen: what `--algorithms all` sweeps."""
    return [n for n in algorithms(collective) if REGISTRY.all()[n].candidate]


def get(name: str) -> Algorithm:
    """The algorithm called `name`; UnknownAlgorithm lists the valid names."""
    table = REGISTRY.all()
    if name not in table:
        raise UnknownAlgorithm(name, sorted(table))
    return table[name]
