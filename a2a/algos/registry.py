"""Algorithm, Plan, register() and plug-in loading.

An algorithm is a factory ``f(comm, sendbuf, recvbuf, *, option=default, ...)`` that does all
preparation and returns ``run`` (one all-to-all), ``(run, free)``, or ``Prepared(run, free, note)``
when the row should say something (a fallback schedule, say). Its keyword-only
parameters are its options: their defaults give types for parsing strings from the command
line, and ``limits`` give accepted values, so bad options fail before any communication.
One name may serve both collectives: an alltoallv factory ``f(comm, send, recv, *, ...)``
takes two checked `VBuffer`s and registers with ``collective="alltoallv"`` and the same options.

What the rest of the testbed knows of an algorithm it reads here, from what register() was
given: its cost for the model (`cost`), its rounds of link traffic for the contention model
(`traffic`), the steps of block moves its factory runs for the simulator (`steps`), its twins in
the MPI libraries for the exporters (`twins`), and its place in the tie-break of decisions
(`simplicity`). docs/adding-an-algorithm.md walks through one.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator

import numpy as np

from a2a.algos.buffers import VBuffer, agree, alltoall_call, alltoallv_call, is_inter, matched_counts
from a2a.algos.cost import GENERIC, Formula, MatrixCost, Round, Traffic, everything
from a2a.algos.nodes import one_per_node
from a2a.algos.prebuilt import copier
from a2a.errors import A2AError, BadInput, BadOption, PluginError, UnknownAlgorithm
from a2a.record.results import NATIVE

ENTRY_POINT_GROUP = "a2a.algorithms"
LIBRARIES = ("Open MPI", "MPICH", "Intel MPI")  # whose algorithms an algorithm may name as its twins
PLUGIN_SIMPLICITY = 100  # where plug-ins that do not say come in the tie-break: after the built-ins
BUILTIN_PACKAGE = "a2a.algos.builtin"  # loaded by name, as plug-ins are: no import cycle
COLLECTIVES = ("alltoall", "alltoallv")
Limit = tuple[Callable[[Any], bool], str]  # (predicate, what is accepted)
# (options as text with every default filled in, process count) -> the library's own choice, or None
Twin = Callable[[dict[str, str], int], Hashable | None]
# steps(p, rank, **options): what the factory runs after copying its own block, as a2a.algos.schedule Steps (one
# Sendrecv of blocks each; Exchanges keep a run of one-block Steps as arrays, Rounds a run of many-block ones as
# peers and counts) or Batches (many peers at once, then one wait), or None where it runs something else; the
# simulator reads them instead of capturing the plan. One that declares `nodes` is also given the ranks of each
# node of the job (list[list[int]]), as MPI would tell.
StepsOf = Callable[..., Any]


@dataclass(frozen=True)
class Option:
    """One keyword option of an algorithm: its default, and which values it accepts."""

    name: str
    default: Any
    limit: Limit | None = None

    def parse(self, value: Any, algorithm: str) -> Any:
        """Convert a value (maybe text from the command line) to the default's type and check it."""
        kind = type(self.default)
        try:
            if isinstance(value, str) and kind is bool:
                if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
                    raise ValueError(value)
                value = value.lower() in ("1", "true", "yes")
            elif self.default is not None and not isinstance(value, kind):
                if kind is int and isinstance(value, float) and not value.is_integer():
                    raise ValueError(value)
                value = kind(value)
        except (TypeError, ValueError):
            raise BadOption(
                f"{algorithm}: option {self.name}={value!r} is not a {kind.__name__}"
            ) from None
        if self.limit and not self.limit[0](value):
            raise BadOption(f"{algorithm}: option {self.name}={value!r}; accepted: {self.limit[1]}")
        return value


@dataclass(frozen=True)
class Kind:
    """How an algorithm serves one collective: its factory, what it does and mirrors, and what it costs.

    `cost`: a Formula for alltoall, a MatrixCost for alltoallv; `traffic`: alltoall's rounds of
    messages on the links; `steps`: the Steps its factory runs (StepsOf); `twins`: per library
    (LIBRARIES), the library's algorithm that sends the same messages.
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

    def plan(self, comm: Any, sendbuf: Any, recvbuf: Any, **options: Any) -> "Plan":
        """Check the call and the ranks' agreement on every rank, then prepare what one MPI_Alltoall-like call needs.

        sendbuf may be MPI.IN_PLACE (the data is taken from recvbuf); docs/library.md lists the buffers taken.
        """
        return planned(comm, self, "alltoall", options, lambda: alltoall_call(comm, sendbuf, recvbuf))

    def plan_v(self, comm: Any, sendbuf: Any, sendcounts: Any, recvbuf: Any, recvcounts: Any,
               sdispls: Any = None, rdispls: Any = None, **options: Any) -> "Plan":
        """The same for MPI_Alltoallv: counts and displacements in elements (packed when None)."""
        return planned(comm, self, "alltoallv", options,
                       lambda: alltoallv_call(comm, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls))

    def _prepare(self, comm: Any, kind: Kind, resolved: dict[str, Any], send: Any, recv: Any) -> "Plan":
        private = comm.Dup()  # our point-to-point traffic cannot match the caller's
        staging = None
        if send is None and not kind.in_place:  # in place: the schedule reads a copy of recvbuf
            send, staging = _staged(recv)
        try:
            made = kind.factory(private, send, recv, **resolved)
        except BaseException:
            private.Free()
            raise
        if not isinstance(made, Prepared):
            made = Prepared(*made) if isinstance(made, tuple) else Prepared(made, getattr(made, "free", None))
        run = made.run if staging is None else _after(staging, made.run)
        return Plan(self, resolved, run, made.free, private, made.note)

    def describe_options(self) -> str:
        """Options as `name=default (accepted)` text."""
        return ", ".join(
            f"{o.name}={o.default}" + (f" ({o.limit[1]})" if o.limit else "")
            for o in self.options.values()
        )


@dataclass(frozen=True)
class Prepared:
    """What a factory returns when it has more to say than `run` or `(run, free)`: a note for the row."""

    run: Callable[[], Any]
    free: Callable[[], Any] | None = None
    note: str = ""  # e.g. a fallback to another schedule at this process count


@dataclass
class Plan:
    """A prepared all-to-all: call it for one exchange; free it (or use `with`) when done."""

    algorithm: Algorithm
    options: dict[str, Any]
    run: Callable[[], Any]
    _free: Callable[[], Any] | None = field(default=None, repr=False)
    _comm: Any = field(default=None, repr=False)
    note: str = ""  # what the row should say about this plan (the factory's Prepared.note)

    def __call__(self) -> None:
        self.run()

    def free(self) -> None:
        """Release requests, buffers and communicators the plan holds."""
        if self._free is not None:
            self._free()
        if self._comm is not None:
            self._comm.Free()
        self._free = self._comm = None
        self.run = _freed

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()


def _freed() -> None:
    raise BadInput("this plan has been freed; make a new one")


def blocks(buf: np.ndarray, nblocks: int) -> np.ndarray:
    """View a buffer as `nblocks` rows of raw bytes, one per peer."""
    return buf.reshape(-1).view(np.uint8).reshape(nblocks, buf.nbytes // nblocks)


class Registry:
    """Name -> Algorithm: built-ins, entry points, and plug-ins loaded by the caller."""

    def __init__(self) -> None:
        self._algorithms: dict[str, Algorithm] = {}
        self._discovered = False

    def add(self, name: str, collective: str, kind: Kind, options: dict[str, Option], simplicity: int | None,
            candidate: bool) -> None:
        """Register a name's factory for a collective, once; both collectives' options must agree."""
        known = self._algorithms.get(name)
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
            raise PluginError(f"{name}: its {collective} options ({_defaults(options)}) differ from its "
                              f"{known.collectives[0]} options ({_defaults(known.options)}); "
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
_NOTHING = Algorithm("", {}, {})  # what an unknown name serves: nothing


def register(name: str, *, collective: str = "alltoall", mirrors: str = "", limits: dict[str, Limit] | None = None,
             cost: Formula | MatrixCost | None = None, traffic: Traffic | None = None, steps: StepsOf | None = None,
             twins: dict[str, Twin] | None = None, simplicity: int | None = None, candidate: bool = True,
             intercomm: bool = False, in_place: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a factory `f(comm, sendbuf, recvbuf, *, option=default...)` under `name` for `collective`,
    with what the model, the contention study, the exporters and the tie-break know of it (see Kind)."""
    if collective not in COLLECTIVES:
        raise PluginError(f"{name}: collective {collective!r}; accepted: {', '.join(COLLECTIVES)}")
    expected = Formula if collective == "alltoall" else MatrixCost
    if cost is not None and not isinstance(cost, expected):
        raise PluginError(f"{name}: the cost of an {collective} is a {expected.__name__}, not {type(cost).__name__}")
    stray = sorted(set(twins or {}) - set(LIBRARIES))
    if stray:
        raise PluginError(f"{name}: twins in {', '.join(stray)}; accepted libraries: {', '.join(LIBRARIES)}")

    def decorate(factory: Callable[..., Any]) -> Callable[..., Any]:
        options = _options_of(factory, limits or {}, name)
        summary = (inspect.getdoc(factory) or "").strip().splitlines()
        kind = Kind(factory, summary[0] if summary else "", mirrors, cost, traffic, steps, dict(twins or {}),
                    intercomm, in_place)
        REGISTRY.add(name, collective, kind, options, simplicity, candidate)
        return factory
    return decorate


def _defaults(options: dict[str, Option]) -> str:
    return ", ".join(f"{k}={o.default}" for k, o in options.items()) or "none"


def _options_of(factory: Callable[..., Any], limits: dict[str, Limit], name: str
                ) -> dict[str, Option]:
    params = list(inspect.signature(factory).parameters.values())
    if len(params) < 3 or any(p.kind is p.VAR_KEYWORD for p in params):
        raise PluginError(
            f"{name}: a factory takes (comm, sendbuf, recvbuf, *, option=default, ...); "
            "declare each option as a keyword-only parameter with a default"
        )
    options = {p.name: Option(p.name, p.default, limits.get(p.name))
               for p in params[3:] if p.default is not p.empty}
    stray = set(limits) - set(options)
    if stray:
        raise PluginError(f"{name}: limits for unknown options {', '.join(sorted(stray))}")
    return options


def builtin_modules() -> list[str]:
    """The built-in algorithms' modules: every module in the folder a2a/algos/builtin."""
    folder = Path(__file__).resolve().parent / "builtin"
    return [f"{BUILTIN_PACKAGE}.{m.name}" for m in pkgutil.iter_modules([str(folder)])]


def with_defaults(algorithm: str, options: dict[str, str]) -> dict[str, str]:
    """`options` (text values) over the algorithm's registered defaults: a table, a record or a spec may
    leave defaults out; an algorithm not registered here keeps what it was given."""
    known = REGISTRY.all().get(algorithm)
    return {**({k: str(o.default) for k, o in known.options.items()} if known else {}), **options}


def known(name: str) -> Algorithm | None:
    """The algorithm called `name`, or None (a record may name a plug-in that is not loaded here)."""
    return REGISTRY.all().get(name)


def formula(name: str) -> Formula:
    """The alltoall cost formula of `name`: its own, else the generic one (native, plug-ins without one)."""
    kind = (known(name) or _NOTHING).kinds.get("alltoall")
    return kind.cost if kind and kind.cost else GENERIC


def traffic(name: str) -> Traffic:
    """The rounds of messages of `name`'s alltoall: its own, else its steps', else one round of everything at once."""
    kind = (known(name) or _NOTHING).kinds.get("alltoall")
    if kind and kind.traffic:
        return kind.traffic
    return partial(_stepped_traffic, name) if kind and kind.steps else everything


def steps_for(name: str, options: dict[str, Any], nodes: list[list[int]]) -> Callable[[int, int], Any] | None:
    """`name`'s registered steps as steps(p, rank) under `options` (text or typed; defaults filled in) on a job
    of these `nodes`, or None if it registered none."""
    algorithm = known(name) or _NOTHING
    kind = algorithm.kinds.get("alltoall")
    if not (kind and kind.steps):
        return None
    chosen = {k: o.parse(options.get(k, o.default), name) for k, o in algorithm.options.items()}
    if "nodes" in inspect.signature(kind.steps).parameters:
        chosen["nodes"] = nodes
    return partial(kind.steps, **chosen)


def _stepped_traffic(name: str, p: int, m: float, options: dict) -> list[Round]:
    """Round k: every rank sends the blocks of its k-th step, m bytes each, to that step's peers (everything at
    once where the factory runs no steps); one rank per node."""
    steps, ranks = steps_for(name, options, one_per_node(p)), []
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
    kind = (known(name) or _NOTHING).kinds.get("alltoallv")
    return kind.cost if kind else None


def twin(name: str, collective: str, library: str, options: dict[str, str], nprocs: int) -> Hashable | None:
    """`library`'s own algorithm for `name` with `options` (text; defaults filled in here) at `nprocs`, or None."""
    kind = (known(name) or _NOTHING).kinds.get(collective)
    found = kind.twins.get(library) if kind else None
    return found(with_defaults(name, options), nprocs) if found else None


def simplicity(name: str) -> int:
    """The tie-break rank of `name`: lower wins a tie; unknown names come after every registered one."""
    found = known(name)
    return found.simplicity if found else PLUGIN_SIMPLICITY


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


def load_plugin(source: str | Path) -> list[str]:
    """Import a plug-in from a .py file or a module name; return the names it registered."""
    before = set(REGISTRY.all())
    path = Path(source)
    with REGISTRY.undone_on_error():
        try:
            if path.suffix == ".py" or path.exists():
                _import_file(path, str(source))
            else:
                importlib.import_module(str(source))
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"cannot load plug-in {source}: {type(exc).__name__}: {exc}") from exc
    return sorted(set(REGISTRY.all()) - before)


def _import_file(path: Path, source: str) -> None:
    """Import a plug-in file once; a failed import leaves no module behind, so a retry fails again."""
    if not path.is_file():
        raise PluginError(f"plug-in file {source} does not exist")
    name = f"a2a_plugin_{path.stem}_{abs(hash(str(path.resolve())))}"
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def alltoall(comm: Any, sendbuf: Any, recvbuf: Any, algorithm: str = NATIVE, **options: Any) -> None:
    """One all-to-all with the named algorithm (plans, runs once, frees); a name unknown on some rank is an
    error on every rank."""
    with planned(comm, algorithm, "alltoall", options, lambda: alltoall_call(comm, sendbuf, recvbuf)) as plan:
        plan()


def alltoallv(comm: Any, sendbuf: Any, sendcounts: Any, recvbuf: Any, recvcounts: Any, algorithm: str = NATIVE,
              sdispls: Any = None, rdispls: Any = None, **options: Any) -> None:
    """One MPI_Alltoallv-like exchange with the named algorithm (counts and displacements in elements)."""
    call = lambda: alltoallv_call(comm, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls)  # noqa: E731
    with planned(comm, algorithm, "alltoallv", options, call) as plan:
        plan()


def planned(comm: Any, algorithm: Algorithm | str, collective: str, options: dict[str, Any],
            call: Callable[[], tuple[Any, Any, tuple]]) -> Plan:
    """A plan, once every rank has checked its call (`call` returns send, recv and their signature) and the ranks
    agree: whatever is wrong on any rank, an unknown name or option included, is one BadInput on every rank."""
    problem, signature = None, None
    try:
        found = get(algorithm) if isinstance(algorithm, str) else algorithm
        kind = found.kind(collective)
        resolved = found.resolve(options)
        if is_inter(comm) and not kind.intercomm:
            raise BadInput(f"{found.name} does not serve intercommunicators; accepted: an intracommunicator, "
                           f"or {NATIVE} (the library's own {collective} between the two groups)")
        send, recv, shape = call()
        signature = (found.name, tuple(sorted((k, str(v)) for k, v in resolved.items())), *shape)
    except A2AError as error:
        problem = error
    agree(comm, problem, signature)
    if collective == "alltoallv":
        matched_counts(comm, send, recv)
    return found._prepare(comm, kind, resolved, send, recv)


def _staged(recv: Any) -> tuple[Any, Callable[[], Any]]:
    """For a call in place: a send side that is a copy of recvbuf, and the prebuilt copy that fills it."""
    if isinstance(recv, VBuffer):
        array = np.empty_like(recv.array)
        return VBuffer(array, recv.counts, recv.displs), copier(array, recv.array)
    array = np.empty_like(recv)
    return array, copier(array, recv)


def _after(first: Callable[[], Any], run: Callable[[], Any]) -> Callable[[], Any]:
    def staged_run() -> None:
        first()
        run()
    return staged_run
