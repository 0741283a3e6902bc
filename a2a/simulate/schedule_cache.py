"""Captured schedules kept on disk: a new platform, link or message cost replays them without capturing again.

A schedule is stored under the point that captured it (algorithm, options, ranks, dtype,
nodes, replica groups) and the source that produced it: every file of the testbed's package
and the file that defines the algorithm. An edit to any of them is another key, so a stored
schedule is the one the code would capture now.

A stored schedule is data only, so a shared directory is safe to read: one .npz file, read
without pickle, holds the schedule as JSON (each event as its kind and fields, the kinds from
the table below) and its arrays, one column per dtype. A file that does not decode as that is
captured again and replaced.
"""
from __future__ import annotations

import hashlib
import json
import operator
import os
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

import numpy as np

import a2a
from a2a.algos.registry import get
from a2a.kept import cache_home
from a2a.schedules.events import (
    Burst,
    Collective,
    Copy,
    Event,
    Irecv,
    Isend,
    Posts,
    Recv,
    Schedule,
    Send,
    Sendrecvs,
    Wait,
    WholeAlltoallv,
)

OFF = "none"
FORMAT = 1  # the layout below; a file of another is captured again
SCHEDULE = "schedule"  # the .npz member holding the JSON; the others are array columns named by dtype
COLUMNS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")

# Each event class by its kind, with how each of its fields (in order) is stored: int, int? (or None), text,
# ints (a tuple of ints, kept as an array), requests (a tuple of ints or a range), array, array? (or None)
EVENTS: dict[str, tuple[type, tuple[str, ...]]] = {
    "isend": (Isend, ("int", "int", "int")),
    "irecv": (Irecv, ("int", "int", "int")),
    "send": (Send, ("int", "int")),
    "recv": (Recv, ("int", "int")),
    "wait": (Wait, ("requests",)),
    "copy": (Copy, ("int",)),
    "coll": (Collective, ("text", "ints", "int?", "ints", "ints")),
    "posts": (Posts, ("array",) * 4),
    "burst": (Burst, ("array", "array", "int", "int", "array", "array")),
    "sendrecvs": (Sendrecvs, ("array", "array", "int", "int", "array?", "array?")),
    "alltoallv": (WholeAlltoallv, ("ints", "ints")),
}


class Undecodable(ValueError):
    """A stored schedule that is not one this module wrote."""


def default_directory() -> Path | None:
    """$A2A_SCHEDULE_CACHE, else $XDG_CACHE_HOME/a2a-testbed/schedules (~/.cache when unset); None for 'none'."""
    text = os.environ.get("A2A_SCHEDULE_CACHE")
    if text:
        return None if text == OFF else Path(text)
    return cache_home() / "schedules"


def _digest(files: list[Path]) -> str:
    hasher = hashlib.sha256()
    for path in files:
        hasher.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()


class ScheduleCache:
    """Schedules on disk in `directory` (None: none kept); counts what it captured, read back and replaced."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        package = Path(a2a.__file__).parent
        self.package = _digest(sorted(package.rglob("*.py"))) if directory else ""
        self.captured = self.stored = self.replaced = 0
        self.capture_seconds = 0.0

    def schedule(self, point: dict[str, Any], capture: Callable[[], Schedule]) -> Schedule:
        """The stored schedule of `point`, else `capture()`'s, stored for the next time."""
        path = self._path(point)
        if path is not None and path.exists():
            try:
                schedule = load(path)
                self.stored += 1
                return schedule
            except Exception:  # noqa: BLE001 (reading ran no code: whatever the file held, it is captured again)
                self.replaced += 1
        began = time.monotonic()
        schedule = capture()
        self.capture_seconds += time.monotonic() - began
        self.captured += 1
        if path is not None:
            _directories(path.parent)
            partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
            with partial.open("wb") as out:
                save(schedule, out)
            os.replace(partial, path)
        return schedule

    def _path(self, point: dict[str, Any]) -> Path | None:
        """Where `point`'s schedule is kept; None when nothing is kept or the algorithm's source is unknown."""
        if self.directory is None:
            return None
        files = set()
        for kind in get(point["algorithm"]).kinds.values():
            source = getattr(sys.modules.get(getattr(kind.factory, "__module__", "")), "__file__", None)
            if source is None:
                return None
            files.add(Path(source))
        key = json.dumps({**point, "package": self.package, "algorithm_source": _digest(sorted(files))},
                         sort_keys=True, default=str)
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()}.npz"


def _directories(directory: Path) -> None:
    """`directory` and its missing parents, made for this user alone (one that exists is left as it is)."""
    for missing in reversed([d for d in (directory, *directory.parents) if not d.exists()]):
        missing.mkdir(mode=0o700, exist_ok=True)


def save(schedule: Schedule, out: Any) -> None:
    """`schedule` into the open binary file `out`, as load reads it."""
    columns = _Columns()
    events = [[[e.kind, *(columns.encode(how, getattr(e, f.name)) for how, f in zip(EVENTS[e.kind][1], fields(e)))]
               for e in rank] for rank in schedule.events]
    text = json.dumps({"format": FORMAT, "nprocs": schedule.nprocs, "count": schedule.count,
                       "itemsize": schedule.itemsize, "events": events}, separators=(",", ":"))
    # numpy's stub: savez's keyword allow_pickle: bool makes any **dict of arrays a mismatch (these are named by
    # SCHEDULE and dtypes, never allow_pickle)
    np.savez(out, **{SCHEDULE: np.frombuffer(text.encode(), np.uint8)}, **columns.arrays())  # type: ignore[arg-type]


def load(path: Path) -> Schedule:
    """The schedule stored at `path`; Undecodable (or numpy's and json's errors) when it holds anything else."""
    with np.load(path, allow_pickle=False) as stored:
        if not isinstance(stored, np.lib.npyio.NpzFile) or SCHEDULE not in stored.files:
            raise Undecodable(f"{path} is no stored schedule")
        document = json.loads(stored[SCHEDULE].tobytes().decode())
        columns = {name: stored[name] for name in stored.files if name in COLUMNS}
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise Undecodable(f"{path} is not a stored schedule of format {FORMAT}")
    nprocs, count, itemsize = (_int(document.get(key)) for key in ("nprocs", "count", "itemsize"))
    events = document.get("events")
    if not isinstance(events, list) or len(events) != nprocs or not all(isinstance(r, list) for r in events):
        raise Undecodable(f"{path} does not hold one list of events per rank of {nprocs}")
    reader = _Reader(columns)
    return Schedule(nprocs, count, itemsize, [[reader.event(e) for e in rank] for rank in events])


class _Columns:
    """The arrays of a schedule being saved, one column per dtype; an array met twice is stored once."""

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {}
        self.sizes: dict[str, int] = {}
        self.seen: dict[int, tuple[Any, list]] = {}  # id -> (the object, kept alive; its reference)

    def encode(self, how: str, value: Any) -> Any:
        """`value` as JSON, stored as `how` says."""
        if value is None and how in ("int?", "array?"):
            return None
        if how in ("int", "int?"):
            return operator.index(value)
        if how == "text":
            return str(value)
        if how == "requests":
            return {"range": [value.start, value.stop, value.step]} if isinstance(value, range) else \
                [operator.index(i) for i in value]
        return self._array(value)

    def _array(self, value: Any) -> list:
        """[column, start, length] of a 1-D array or tuple of ints."""
        if id(value) in self.seen:
            return self.seen[id(value)][1]
        array = np.asarray(value, np.int64 if isinstance(value, tuple) else None)
        if array.ndim != 1 or array.dtype.name not in COLUMNS:
            raise ValueError(f"a schedule's arrays are 1-D of {', '.join(COLUMNS)}; not {array.dtype} {array.shape}")
        column = array.dtype.name
        start = self.sizes.get(column, 0)
        reference = [column, start, len(array)]
        self.parts.setdefault(column, []).append(array)
        self.sizes[column] = start + len(array)
        self.seen[id(value)] = (value, reference)
        return reference

    def arrays(self) -> dict[str, np.ndarray]:
        return {column: np.concatenate(parts) for column, parts in self.parts.items()}


class _Reader:
    """Events out of their JSON form, their arrays cut from the stored columns (one object per reference)."""

    def __init__(self, columns: dict[str, np.ndarray]):
        self.columns = columns
        self.arrays: dict[tuple, np.ndarray] = {}
        self.tuples: dict[tuple, tuple[int, ...]] = {}

    def event(self, stored: Any) -> Event:
        if not isinstance(stored, list) or not stored or stored[0] not in EVENTS:
            raise Undecodable(f"{str(stored)[:80]} is no event; known kinds: {', '.join(EVENTS)}")
        cls, hows = EVENTS[stored[0]]
        if len(stored) != 1 + len(hows):
            raise Undecodable(f"a {stored[0]} event has {len(hows)} fields, not {len(stored) - 1}")
        return cls(*(self.decode(how, value) for how, value in zip(hows, stored[1:])))

    def decode(self, how: str, value: Any) -> Any:
        """A field stored as `how` says."""
        if value is None and how in ("int?", "array?"):
            return None
        if how in ("int", "int?"):
            return _int(value)
        if how == "text":
            if not isinstance(value, str):
                raise Undecodable(f"{value!r} is no text")
            return value
        if how == "requests":
            if isinstance(value, dict) and list(value) == ["range"]:
                bounds = value["range"]
                if not (isinstance(bounds, list) and len(bounds) == 3):
                    raise Undecodable(f"{str(value)[:80]} is no range of requests (start, stop, step)")
                return range(*(_int(n) for n in bounds))
            if not isinstance(value, list):
                raise Undecodable(f"{str(value)[:80]} is no list of requests")
            return tuple(_int(n) for n in value)
        if how == "ints":
            key = self._reference(value)
            if key not in self.tuples:
                self.tuples[key] = tuple(self._cut(key).tolist())
            return self.tuples[key]
        key = self._reference(value)
        if key not in self.arrays:
            self.arrays[key] = self._cut(key)
        return self.arrays[key]

    def _reference(self, value: Any) -> tuple[str, int, int]:
        if not (isinstance(value, list) and len(value) == 3 and value[0] in self.columns):
            raise Undecodable(f"{str(value)[:80]} names no stored array; columns: {', '.join(self.columns)}")
        column, start, length = value[0], _int(value[1]), _int(value[2])
        if start < 0 or length < 0 or start + length > len(self.columns[column]):
            raise Undecodable(f"{column}[{start}:{start + length}] is outside its {len(self.columns[column])} values")
        return column, start, length

    def _cut(self, key: tuple[str, int, int]) -> np.ndarray:
        column, start, length = key
        values = self.columns[column]
        if values.ndim != 1 or values.dtype.name != column:
            raise Undecodable(f"the column {column} holds {values.dtype} {values.shape}")
        return values[start:start + length]


def _int(value: Any) -> int:
    if type(value) is not int:
        raise Undecodable(f"{str(value)[:80]} is no integer")
    return value
