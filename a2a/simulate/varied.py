"""An alltoallv's schedule for the simulator: a direct schedule's program, the one the C executor runs
(a2a.schedules.tracer), with every block at its count in the call's matrix; and SMPI's own MPI_Alltoallv for native.

A direct schedule sends every block straight from the send buffer to its place in the receive
buffer (no temporary rows), so its program serves any count matrix: a message's bytes are those
of the blocks it names, block i of rank r's send buffer counts[r, i] elements and of its receive
buffer counts[i, r]. The program is traced once per algorithm, options, process count and nodes,
and each point's matrix fills it in; a schedule that forwards blocks (Bruck's, the leaders') is
refused, as the executor refuses it.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from a2a.algos.options import schedule_options
from a2a.algos.registry import get
from a2a.record.results import NATIVE
from a2a.schedules.events import Copy, Event, Irecv, Isend, Schedule, Wait, WholeAlltoallv
from a2a.schedules.program import RECV, SEND, Region, ScheduleData
from a2a.schedules.tracer import NotExact, traced


def program(name: str, options: dict[str, Any], nprocs: int, nodes: list[list[int]]) -> ScheduleData:
    """The alltoallv program of `name` with `options` on `nprocs` ranks placed on `nodes`; NotExact if it is not a
    direct schedule of whole blocks."""
    found = get(name)
    chosen = tuple(sorted(schedule_options(found.resolve(dict(options))).items()))
    data = traced(found, chosen, nprocs, tuple(map(tuple, nodes)), "alltoallv")
    if not data.direct:
        raise NotExact(f"{name}'s alltoallv forwards blocks through a temporary buffer: the simulator replays "
                       "direct alltoallv schedules only (as the C executor runs them)")
    return data


def filled(data: ScheduleData, counts: np.ndarray, itemsize: int) -> Schedule:
    """Each rank's events of the program, its blocks at the matrix's counts (elements of `itemsize` bytes)."""
    counts = np.asarray(counts, np.int64) * itemsize
    events: list[list[Event]] = []
    for prog in data.programs:
        nbytes = partial(_bytes, {SEND: counts[prog.rank], RECV: counts[:, prog.rank]})
        mine: list[Event] = []
        number = 0  # messages are numbered in order, each round's receives then its sends, as the waits name them
        for round_ in prog.rounds:
            mine += [Copy(nbytes((source,))) for source, _ in round_.copies]
            for kind, messages in ((Irecv, round_.receives), (Isend, round_.sends)):
                for message in messages:
                    mine.append(kind(message.peer, nbytes(message.regions), number))
                    number += 1
            if round_.waits:
                mine.append(Wait(tuple(round_.waits)))
        events.append(mine)
    return Schedule(data.nprocs, 1, itemsize, events)


def _bytes(sizes: dict[int, np.ndarray], regions: tuple[Region, ...]) -> int:
    """The bytes of the regions, each block at its size in its buffer."""
    return int(sum(sizes[g.buffer][g.first:g.first + g.blocks].sum() for g in regions))


def native(counts: np.ndarray, itemsize: int) -> Schedule:
    """SMPI's own MPI_Alltoallv of the matrix on every rank (smpirun replays it), after the copy of the rank's own
    block (a2a.simulate.traces)."""
    counts = np.asarray(counts, np.int64) * itemsize
    return Schedule(len(counts), 1, itemsize, [[Copy(int(counts[r, r])), WholeAlltoallv(
        tuple(map(int, counts[r])), tuple(map(int, counts[:, r])))] for r in range(len(counts))])


def schedule_of(name: str, options: dict[str, Any], nprocs: int, nodes: list[list[int]]) -> ScheduleData | None:
    """What a variant's alltoallv points fill in: its program, or None for native (SMPI's own)."""
    return None if name == NATIVE else program(name, options, nprocs, nodes)


def volumes(schedule: Schedule) -> np.ndarray:
    """bytes[i, j] that rank i's events send rank j (SMPI's own MPI_Alltoallv: its sends to others), copies to itself
    on the diagonal: what a replay of the schedule moves."""
    moved = np.zeros((schedule.nprocs, schedule.nprocs), np.int64)
    for rank, events in enumerate(schedule.events):
        for e in events:
            if isinstance(e, Isend):
                moved[rank, e.peer] += e.nbytes
            elif isinstance(e, Copy):
                moved[rank, rank] += e.nbytes
            elif isinstance(e, WholeAlltoallv):
                moved[rank] += np.where(np.arange(schedule.nprocs) == rank, 0, e.sends)
    return moved
