"""The timing protocols, one object each: its name, what its samples are, its help, and how it times one visit.

A visit is one candidate's turn in one interleaved round of a cell (a2a.measure.driver): its warm-up, then
`calls` timed calls within `seconds`. The protocol's functions live in a2a.measure.timing and
a2a.measure.overlap; this module is the only place that says which protocol is which.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from a2a.errors import BadConfig
from a2a.measure.overlap import time_overlap
from a2a.measure.timing import time_global, time_imb, time_pipelined, time_sync
from a2a.record.results import OVERLAP


@dataclass(frozen=True)
class Visit:
    """What a protocol needs to time one candidate once: the job, the call (and its plan), and the budget."""

    comm: Any
    run: Callable[[], Any]
    plan: Any
    warmup: int
    calls: int
    seconds: float
    stop_requested: Callable[[], bool]
    clock: Any = None  # global timing's synchronised clock
    work: Any = None  # the overlap protocol's arithmetic
    units: int = 0  # the overlap protocol's compute phase
    tests: int = 0  # the overlap protocol's progress calls in it
    starts: Any = None  # global timing's verdicts on the point's starts so far (a2a.measure.timing.Starts)


@dataclass(frozen=True)
class Sampled:
    """What a visit saw: its samples (the overlap protocol's by quantity, '' for the calls' overall times), and
    whether a stop cut it short."""

    samples: Any
    stopped: bool = False

    @property
    def count(self) -> int:
        """How many samples of the calls' times it holds."""
        return len(self.samples[""] if isinstance(self.samples, dict) else self.samples)


@dataclass(frozen=True)
class Protocol:
    """A timing protocol: its name, help, whether a sample is one rank's mean over the calls, and its visit."""

    name: str
    help: str
    per_rank_means: bool
    time: Callable[[Visit], Sampled]


def _sync(visit: Visit) -> Sampled:
    samples, stopped = time_sync(visit.comm, visit.run, visit.warmup, visit.calls, visit.seconds,
                                 visit.stop_requested, least=1)
    return Sampled(samples, stopped)


def _pipelined(visit: Visit) -> Sampled:
    return Sampled(*time_pipelined(visit.comm, visit.run, visit.warmup, visit.calls, visit.stop_requested))


def _imb(visit: Visit) -> Sampled:
    return Sampled(*time_imb(visit.comm, visit.run, visit.warmup, visit.calls, visit.stop_requested))


def _global(visit: Visit) -> Sampled:
    timed = time_global(visit.comm, visit.run, visit.warmup, visit.calls, visit.seconds, visit.stop_requested,
                        visit.clock, least=1, starts=visit.starts)
    return Sampled(timed.samples, timed.stopped)


def _overlap(visit: Visit) -> Sampled:
    timed = time_overlap(visit.comm, visit.plan, visit.work, visit.warmup, visit.calls, visit.seconds,
                         visit.stop_requested, visit.units, visit.tests, least=1)
    if timed.stopped:
        return Sampled({}, True)
    return Sampled({"": timed.samples["overall"], **{q: v for q, v in timed.samples.items() if q != "overall"}})


PROTOCOLS: tuple[Protocol, ...] = (
    Protocol("sync", "barrier + one timed call, max over ranks, every sample", False, _sync),
    Protocol("pipelined", "calls back to back, per-rank means", True, _pipelined),
    Protocol("imb", "IMB-MPI1's and OSU's loop (timed call, untimed barrier), per-rank means", True, _imb),
    Protocol("global", "ReproMPI's synchronised clocks, latest exit minus an agreed start", False, _global),
    Protocol(OVERLAP, "OSU's and IMB-NBC's overlap of an exchange with computation", False, _overlap),
)
NAMES: tuple[str, ...] = tuple(p.name for p in PROTOCOLS)


def protocol(name: str) -> Protocol:
    """The protocol called `name`; BadConfig names the accepted ones."""
    for found in PROTOCOLS:
        if found.name == name:
            return found
    raise BadConfig(f"--timing {name!r}; accepted: {', '.join(NAMES)}")


def described() -> str:
    """Every protocol with its help, for `bench run --help`."""
    return "; ".join(f"{p.name}: {p.help}" for p in PROTOCOLS)

