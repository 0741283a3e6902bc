"""Captured schedules kept on disk: a new platform, link or message cost replays them without capturing again.

A schedule is stored under the point that captured it (algorithm, options, ranks, dtype,
nodes, replica groups) and the source that produced it: every file of the testbed's package
and the file that defines the algorithm. An edit to any of them is another key, so a stored
schedule is the one the code would capture now. Only this user's own files are read back.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any, Callable

import a2a
from a2a.algos.registry import get
from a2a.simulate.events import Schedule
from a2a.simulate.simgrid import cache_home

OFF = "none"


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
    """Schedules on disk in `directory` (None: none kept); counts what it captured and what it read back."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        package = Path(a2a.__file__).parent
        self.package = _digest(sorted(package.rglob("*.py"))) if directory else ""
        self.captured = self.stored = 0
        self.capture_seconds = 0.0

    def schedule(self, point: dict[str, Any], capture: Callable[[], Schedule]) -> Schedule:
        """The stored schedule of `point`, else `capture()`'s, stored for the next time."""
        path = self._path(point)
        if path is not None and path.exists():
            try:
                with path.open("rb") as stored:
                    schedule = pickle.load(stored)
                self.stored += 1
                return schedule
            except (OSError, EOFError, pickle.UnpicklingError, AttributeError, TypeError):
                pass  # a damaged file is captured again and replaced
        began = time.monotonic()
        schedule = capture()
        self.capture_seconds += time.monotonic() - began
        self.captured += 1
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.partial")
            with partial.open("wb") as out:
                pickle.dump(schedule, out, protocol=pickle.HIGHEST_PROTOCOL)
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
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()}.pickle"
