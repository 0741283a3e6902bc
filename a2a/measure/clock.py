"""A global clock for `--timing global` (ReproMPI's method): every rank reads rank 0's time.

Each rank's MPI_Wtime is mapped onto rank 0's by a linear model, offset and drift, learnt
from ping-pongs with rank 0 (the JK model of Hunold and Carpen-Amarie; the offset of each
set of ping-pongs by SKaMPI's bounds). A round trip that leaves rank 0 at s1 and returns at
s2 carrying the client's reading t bounds the client's offset o = client - rank 0:
t - s2 < o < t - s1, whatever the two one-way delays were; the intersection over a set of
round trips is the estimate and its half width the error bound.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from a2a.mpi import idle_wait

FITPOINTS = 10  # sets of ping-pongs per rank; they span SYNC_SPAN_SECONDS so that drift can show
EXCHANGES = 16  # ping-pongs per set
SYNC_SPAN_SECONDS = 0.1
DRIFT_SIGNIFICANCE = 3.0  # a fitted drift is applied only when it exceeds this many standard errors
MIN_LEAD_SECONDS = 20e-6
POLL_SECONDS = 0.0005  # a rank waiting for its turn sleeps this long between tests
TAG = 7171


@dataclass(frozen=True)
class ClockModel:
    """This rank's estimate of rank 0's time: global = local - (drift * local + offset)."""

    drift: float = 0.0
    offset: float = 0.0

    def __call__(self, local: float) -> float:
        return local - (self.drift * local + self.offset)

    def local(self, global_time: float) -> float:
        """This rank's reading when rank 0's clock shows `global_time` (the inverse)."""
        return (global_time + self.offset) / (1 - self.drift)


@dataclass(frozen=True)
class GlobalClock:
    """A rank's synchronised clock: its model, how far ahead a start is agreed, and rank 0's report."""

    model: ClockModel
    lead: float
    report: dict[str, Any]


@dataclass(frozen=True)
class Bounds:
    """What one set of round trips says about a client's offset from rank 0."""

    lower: float
    upper: float
    at: float  # the client's reading in the shortest round trip

    @property
    def middle(self) -> float:
        """The estimate."""
        return (self.lower + self.upper) / 2


def synchronise(comm: Any, fitpoints: int = FITPOINTS, exchanges: int = EXCHANGES, span: float = SYNC_SPAN_SECONDS,
                raw: Callable[[], float] | None = None) -> GlobalClock:
    """Learn every rank's model of its clock `raw` (MPI_Wtime), check it, agree the lead of a start (collective)."""
    from mpi4py import MPI

    raw = raw or MPI.Wtime
    began = MPI.Wtime()
    sets: dict[int, list[Bounds]] = {client: [] for client in range(1, comm.size)}
    for f in range(fitpoints):
        for client in range(1, comm.size):
            if comm.rank == 0:
                sets[client].append(_ping(comm, client, exchanges, raw))
            elif comm.rank == client:
                _pong(comm, exchanges, raw)
        if comm.rank == 0 and f < fitpoints - 1:
            time.sleep(span / fitpoints)
    models = [ClockModel()] + [fit(sets[c]) for c in range(1, comm.size)] if comm.rank == 0 else None
    idle_wait(comm.Ibarrier(), POLL_SECONDS)
    model = comm.scatter(models)
    # the check: the same round trips on the synchronised clocks bound what offset is left
    residual = [Bounds(0.0, 0.0, 0.0)] * comm.size
    for client in range(1, comm.size):
        if comm.rank == 0:
            residual[client] = _ping(comm, client, exchanges, lambda: model(raw()))
        elif comm.rank == client:
            _pong(comm, exchanges, lambda: model(raw()))
    idle_wait(comm.Ibarrier(), POLL_SECONDS)
    lead = max(MIN_LEAD_SECONDS, 3 * _agreement_time(comm))
    report = {}
    if models is not None:  # rank 0's
        report = _report(models, residual, fitpoints, exchanges, lead, MPI.Wtime() - began)
    return GlobalClock(model, lead, report)


def fit(sets: list[Bounds]) -> ClockModel:
    """A client's model from its sets: offset from all bounds together, drift only where it shows."""
    lower, upper = max(b.lower for b in sets), min(b.upper for b in sets)
    offset = (lower + upper) / 2 if lower <= upper else float(np.median([b.middle for b in sets]))
    x = np.array([b.at for b in sets])
    y = np.array([b.middle for b in sets])
    if len(sets) < 4 or np.ptp(x) <= 0:
        return ClockModel(0.0, offset)
    (slope, intercept), covariance = np.polyfit(x - x.mean(), y, 1, cov=True)
    error = math.sqrt(max(covariance[0][0], 0.0))
    if abs(slope) <= DRIFT_SIGNIFICANCE * error or not math.isfinite(error):
        return ClockModel(0.0, offset)
    return ClockModel(float(slope), float(intercept - slope * x.mean()))


def _ping(comm: Any, client: int, exchanges: int, clock: Callable[[], float]) -> Bounds:
    """Rank 0's side of `exchanges` round trips with `client`."""
    out, back = np.zeros(1), np.zeros(1)
    lower, upper, at, shortest = -math.inf, math.inf, 0.0, math.inf
    for _ in range(exchanges):
        sent = clock()
        comm.Send(out, client, TAG)
        comm.Recv(back, client, TAG)
        returned = clock()
        t = float(back[0])
        lower, upper = max(lower, t - returned), min(upper, t - sent)
        if returned - sent < shortest:
            shortest, at = returned - sent, t
    return Bounds(lower, upper, at)


def _pong(comm: Any, exchanges: int, clock: Callable[[], float]) -> None:
    """A client's side: answer each of rank 0's messages with its clock's reading."""
    out, back = np.zeros(1), np.zeros(1)
    idle_wait(comm.Irecv(out, 0, TAG), POLL_SECONDS)  # asleep until its turn comes
    for i in range(exchanges):
        if i:
            comm.Recv(out, 0, TAG)
        back[0] = clock()
        comm.Send(back, 0, TAG)


def _agreement_time(comm: Any, tries: int = 20) -> float:
    """The slowest rank's median time of the per-iteration MPI_Allreduce (collective)."""
    from mpi4py import MPI

    mine, agreed, took = np.zeros(4), np.zeros(4), []
    for _ in range(tries):
        start = MPI.Wtime()
        comm.Allreduce(mine, agreed, MPI.MAX)
        took.append(MPI.Wtime() - start)
    return comm.allreduce(float(np.median(took)), op=MPI.MAX)


def _report(models: list[ClockModel], residual: list[Bounds], fitpoints: int, exchanges: int, lead: float,
            seconds: float) -> dict[str, Any]:
    """What meta.json keeps of a synchronisation (rank 0's view)."""
    error = max(max(abs(b.lower), abs(b.upper)) for b in residual)
    return {
        "method": "JK linear model per rank against rank 0, SKaMPI ping-pong bounds",
        "fitpoints": fitpoints, "exchanges": exchanges, "seconds": round(seconds, 4),
        "offset_error_us": error * 1e6,
        "offset_error_per_rank_us": [max(abs(b.lower), abs(b.upper)) * 1e6 for b in residual],
        "offsets_us": [m.offset * 1e6 for m in models],
        "drifts": [m.drift for m in models],
        "lead_us": lead * 1e6,
    }
