"""A program's recorded all-to-all traffic: the files the testbed's PMPI library writes with A2A_RECORD=DIR, read and
checked, so that a sweep can replay the program's own exchanges (the workload recorded:DIR).

At MPI_Finalize, world rank R writes DIR/record.<job>.rank<R>.jsonl: one JSON object a line, one per communicator
of which R is rank 0 and call signature. Every line has the fields of COMMON; an alltoall's those of ALLTOALL
(elements a peer, of sendtype); an alltoallv's `matrix` (matrix[i][j]: elements of sendtype rank i sends rank j, as
in a2a.sweep.workload), or null. A line with `why` holds the calls beyond the distinct signatures the library keeps
(their sizes or matrices differ; the count is one of them): counted, not replayed. `calls` is how often the
program made that call, `seconds` the time rank 0 of the communicator spent in them. docs/alltoallv.md shows a file.
"""
from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from a2a.algos.registry import COLLECTIVES
from a2a.errors import BadConfig
from a2a.mpi import bench_words, launch_command

FILE = re.compile(r"^record\.(?P<job>.+)\.rank(?P<rank>\d+)\.jsonl$")
NAMED = "record.<job>.rank<R>.jsonl"
COMMON = {"job": str, "writer": int, "comm": int, "nprocs": int, "collective": str, "sendtype": str,
          "recvtype": str, "type_bytes": int, "calls": int, "seconds": float}
ALLTOALL = {"count": int, "block_bytes": int}
# the NumPy type a replay sends for a recorded MPI datatype (where its width agrees); any other: an unsigned integer
# of the recorded width
NUMPY = {"MPI_CHAR": "int8", "MPI_SIGNED_CHAR": "int8", "MPI_UNSIGNED_CHAR": "uint8", "MPI_BYTE": "uint8",
         "MPI_SHORT": "int16", "MPI_UNSIGNED_SHORT": "uint16", "MPI_INT": "int32", "MPI_UNSIGNED": "uint32",
         "MPI_LONG": "int64", "MPI_UNSIGNED_LONG": "uint64", "MPI_LONG_LONG": "int64", "MPI_LONG_LONG_INT": "int64",
         "MPI_UNSIGNED_LONG_LONG": "uint64", "MPI_FLOAT": "float32", "MPI_DOUBLE": "float64",
         "MPI_INT8_T": "int8", "MPI_INT16_T": "int16", "MPI_INT32_T": "int32", "MPI_INT64_T": "int64",
         "MPI_UINT8_T": "uint8", "MPI_UINT16_T": "uint16", "MPI_UINT32_T": "uint32", "MPI_UINT64_T": "uint64",
         "MPI_C_FLOAT_COMPLEX": "complex64", "MPI_C_DOUBLE_COMPLEX": "complex128", "MPI_COMPLEX": "complex64",
         "MPI_DOUBLE_COMPLEX": "complex128"}


@dataclass(frozen=True)
class RecordedCall:
    """One line of a record: a call signature of one communicator, and how often and how long the program made it."""

    index: int  # its place in the job's record (files by rank, lines in order): the `call` a replayed point names
    where: str  # FILE:LINE
    job: str
    writer: int
    comm: int
    nprocs: int
    collective: str
    sendtype: str
    recvtype: str
    type_bytes: int
    calls: int
    seconds: float
    count: int = 0  # an alltoall's elements a peer
    matrix: tuple[tuple[int, ...], ...] | None = None  # an alltoallv's
    why: str = ""  # why the signature was not kept (the calls beyond the library's limit, together)

    @property
    def replayable(self) -> bool:
        """A signature the library kept: an alltoall's size, an alltoallv's matrix."""
        return not self.why and (self.collective == "alltoall" or self.matrix is not None)

    @property
    def bytes_per_peer(self) -> int:
        """An alltoall's block; an alltoallv's mean block (over all p x p), rounded to whole elements."""
        if self.collective == "alltoall":
            return int(round(self.count)) * self.type_bytes
        assert self.matrix is not None  # asked of replayed calls only, an alltoallv's with its matrix kept
        return int(round(np.mean(self.matrix))) * self.type_bytes

    def counts(self, itemsize: int) -> np.ndarray:
        """The matrix in elements of `itemsize` bytes: exactly the recorded one at the recorded width (BadConfig if
        its blocks are no whole number of such elements)."""
        held = np.array(self.matrix, np.int64) * self.type_bytes
        if (held % itemsize).any():
            raise BadConfig(f"recorded call {self.index} ({self.where}) sends {self.type_bytes} B elements "
                            f"({self.sendtype}), which do not fill whole {itemsize} B elements; leave --dtype out "
                            "to replay at the recorded width")
        return held // itemsize


@dataclass(frozen=True)
class Record:
    """One job's recorded calls, from DIR (`job`: the one chosen, where DIR holds several)."""

    directory: str
    job: str
    calls: tuple[RecordedCall, ...]

    def collective(self, given: str | None, simulated: bool = False) -> str:
        """The collective to replay: `given`, else the only one the record holds (BadConfig when it holds both)."""
        held = {c: sum(call.collective == c for call in self.calls) for c in COLLECTIVES}
        found = [c for c in COLLECTIVES if held[c]]
        if given is None and len(found) > 1:
            each = "a simulation replays one collective: simulate each" if simulated else \
                "a run races one collective: race each, then deploy both"
            lines = self.simulate_lines() if simulated else self.race_lines()
            raise BadConfig(f"recorded:{self.directory} holds {held['alltoall']} alltoall and {held['alltoallv']} "
                            f"alltoallv call signatures, and {each}:\n" + "\n".join(f"  {line}" for line in lines))
        chosen = given or found[0]
        if not self.replayed(chosen):
            kept = f" (not kept: {next(c.why for c in self.calls if c.collective == chosen)})" if held[chosen] else ""
            raise BadConfig(f"recorded:{self.directory} holds no {chosen} call to replay{kept}; it holds "
                            + ", ".join(f"{held[c]} {c}" for c in found) + " call signatures")
        return chosen

    def race_lines(self) -> list[str]:
        """The commands that race each collective the record holds, on the ranks it was recorded on, and deploy both."""
        nprocs = max(call.nprocs for call in self.calls)
        races = [launch_command(nprocs, ["run", "--workload", f"recorded:{self.directory}", "--collective", c,
                                         "--output", f"race-{c}"]) for c in COLLECTIVES]
        return [*races, shlex.join([*bench_words(), "deploy", *(f"race-{c}" for c in COLLECTIVES), "--nprocs",
                                    str(nprocs), "-o", "deploy.a2a"])]

    def simulate_lines(self) -> list[str]:
        """The commands that simulate each collective the record holds."""
        return [shlex.join([*bench_words(), "simulate", "--workload", f"recorded:{self.directory}", "--collective",
                            c, "--output", f"simulated-{c}"]) for c in COLLECTIVES]

    def replayed(self, collective: str) -> list[RecordedCall]:
        """The calls of `collective` a sweep replays (an alltoallv whose matrix was not kept cannot be)."""
        return [c for c in self.calls if c.collective == collective and c.replayable]

    def left_out(self, collective: str) -> str:
        """What a replay of `collective` leaves out of the record, in a line ('' when nothing)."""
        other = [c for c in self.calls if c.collective != collective]
        unkept = [c for c in self.calls if c.collective == collective and not c.replayable]
        return "; ".join(f"{len(calls)} {calls[0].collective} call signatures ({sum(c.calls for c in calls)} calls, "
                         f"{sum(c.seconds for c in calls):.3g} s in the program){why}" for calls, why in
                         ((other, ""), (unkept, f" not kept ({unkept[0].why or 'no matrix'})" if unkept else ""))
                         if calls)

    def dtype(self, collective: str) -> str:
        """The NumPy type that replays the calls at their recorded width: the datatype's own where all share one
        width, else an unsigned integer as wide as the largest power of two that divides every width."""
        calls = self.replayed(collective)
        widths = {c.type_bytes for c in calls}
        names = {NUMPY.get(c.sendtype) for c in calls}
        if len(names) == 1 and (name := next(iter(names))) is not None and {np.dtype(name).itemsize} == widths:
            return name
        width = math.gcd(*widths)
        return f"uint{8 * min(width & -width, 8)}"


def read_record(directory: str | Path, job: str = "") -> Record:
    """The record in `directory` of one job (`job`, or the only one there); BadConfig in one line naming what is
    wrong (the file and line of a malformed line)."""
    folder = Path(directory)
    if not folder.is_dir():
        raise BadConfig(f"recorded:{directory}: no such directory; accepted: a directory of {NAMED} files written "
                        "by the testbed's library with A2A_RECORD=DIR")
    files = sorted(((m["job"], int(m["rank"]), path) for path in folder.iterdir() if (m := FILE.match(path.name))),
                   key=lambda found: found[:2])
    jobs = sorted({found[0] for found in files})
    if not files:
        raise BadConfig(f"recorded:{directory}: no {NAMED} files in it; the library writes them at MPI_Finalize of "
                        "a program run with A2A_RECORD=DIR")
    if job and job not in jobs or not job and len(jobs) > 1:
        asked = f"no job {job!r}" if job else f"the records of {len(jobs)} jobs"
        raise BadConfig(f"recorded:{directory} holds {asked}; name one: "
                        + ", ".join(f"recorded:{directory}:job={j}" for j in jobs))
    job = job or jobs[0]
    calls: list[RecordedCall] = []
    for _, rank, path in (found for found in files if found[0] == job):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                calls.append(_call(line, f"{path}:{number}", len(calls), job, rank))
    if not calls:
        raise BadConfig(f"recorded:{directory}: job {job}'s record files hold no line; the program made no "
                        "MPI_Alltoall or MPI_Alltoallv call the library saw")
    return Record(str(directory), job, tuple(calls))


def _call(line: str, where: str, index: int, job: str, rank: int) -> RecordedCall:
    """One line read and checked; BadConfig naming `where` and what is wrong."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        raise BadConfig(f"{where}: not JSON ({error.msg}); accepted: one JSON object a line") from None
    if not isinstance(data, dict):
        raise BadConfig(f"{where}: a JSON {type(data).__name__}, not an object")
    collective = data.get("collective")
    if collective not in COLLECTIVES:
        raise BadConfig(f"{where}: collective {collective!r}; accepted: {', '.join(COLLECTIVES)}")
    fields = {**COMMON, **(ALLTOALL if collective == "alltoall" else {})}
    for name, kind in fields.items():
        value = data.get(name)
        if not isinstance(value, (int, float) if kind is float else kind) or isinstance(value, bool):
            raise BadConfig(f"{where}: {name} is {value!r}; accepted: a{'n' if kind is int else ''} "
                            f"{kind.__name__}")
    values = {name: data[name] for name in fields}
    _check(where, values, job, rank)
    if collective == "alltoallv":
        values["matrix"] = _matrix(where, data.get("matrix", "missing"), values["nprocs"])
    else:
        del values["block_bytes"]
    values["why"] = str(data.get("why") or "")
    return RecordedCall(index, where, **values)


def _check(where: str, values: dict, job: str, rank: int) -> None:
    """The numbers in range and the line in the file its job and writer name."""
    wrong = [f"{k} {values[k]} (accepted: {at_least} or more)" for k, at_least in
             (("nprocs", 1), ("type_bytes", 1), ("calls", 1), ("seconds", 0), ("count", 0)) if
             k in values and not values[k] >= at_least]
    if "count" in values and values["block_bytes"] != values["count"] * values["type_bytes"]:
        wrong.append(f"block_bytes {values['block_bytes']} is not count x type_bytes "
                     f"({values['count']} x {values['type_bytes']})")
    if (values["job"], values["writer"]) != (job, rank):
        wrong.append(f"job {values['job']!r}, writer {values['writer']} in the file of job {job!r}, rank {rank}")
    if wrong:
        raise BadConfig(f"{where}: {'; '.join(wrong)}")


def _matrix(where: str, matrix: object, p: int) -> tuple[tuple[int, ...], ...] | None:
    """An alltoallv's count matrix: p rows of p whole numbers >= 0, or null."""
    if matrix is None:
        return None
    if not (isinstance(matrix, list) and len(matrix) == p and all(
            isinstance(row, list) and len(row) == p and all(type(v) is int and v >= 0 for v in row) for row in matrix)):
        raise BadConfig(f"{where}: matrix {str(matrix)[:80]}; accepted: {p} rows of {p} whole numbers >= 0 (nprocs "
                        f"is {p}), or null")
    return tuple(map(tuple, matrix))
