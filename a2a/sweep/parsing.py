"""Option values as the command line or a YAML sweep file give them, turned into checked values."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from a2a.errors import BadConfig, BadOption, unknown
from a2a.units import parse_size


def parse_list(text: str, what: str, parse: Any = parse_size) -> list[int]:
    """'8,1K,4:128K:x2' -> sorted distinct values; a range is start:stop:xFACTOR (from 0: 0, then 1, FACTOR, ...) or
    start:stop:+STEP."""
    values: set[int] = set()
    for part in str(text).split(","):
        if not part.strip():
            continue
        if ":" not in part:
            values.add(parse(part, what))
            continue
        pieces = part.split(":")
        step_match = re.match(r"^\s*([x*+])\s*(\S+)\s*$", pieces[2]) if len(pieces) == 3 else None
        if not step_match:
            raise BadConfig(f"{what} range {part!r}; accepted: START:STOP:xFACTOR or START:STOP:+STEP")
        start, stop = parse(pieces[0], what), parse(pieces[1], what)
        geometric = step_match.group(1) in "x*"
        step = parse_count(step_match.group(2), "factor") if geometric else parse(step_match.group(2), what)
        if (geometric and step < 2) or (not geometric and step < 1) or stop < start:
            raise BadConfig(f"{what} range {part!r} never reaches {stop}; use a factor >= 2 or a step >= 1, with "
                            "START <= STOP")
        if geometric and start == 0:  # 0:1M:x4 is 0, then 1, 4, 16, ... up to 1M
            values.add(0)
            start = 1
        value = start
        while value <= stop:
            values.add(value)
            value = value * step if geometric else value + step
    if not values:
        raise BadConfig(f"{what}: no values in {text!r}")
    return sorted(values)


def parse_count(text: Any, what: str) -> int:
    """A plain whole number (0 or more)."""
    if not str(text).strip().isdigit():
        raise BadConfig(f"{what} {text!r}; accepted: a whole number, 0 or more")
    return int(text)


def parse_counts(text: Any, what: str) -> list[int]:
    """Whole numbers of at least 1 (process counts): a list or a range."""
    counts = parse_list(as_text(text), what, parse_count)
    if counts[0] < 1:
        raise BadConfig(f"{what} {text!r}: each must be 1 or more")
    return counts


def parse_dtype(name: str) -> str:
    """A NumPy dtype name whose elements can carry check data."""
    try:
        dtype = np.dtype(name)
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in "iufc":
        raise BadConfig(f"dtype {name!r}; accepted: NumPy integer, float or complex names "
                        "(float32, float64, int32, uint8, complex64, ...)")
    return dtype.name


def parse_assignments(items: Any, what: str) -> dict[str, dict[str, str]]:
    """['bruck.radix=4', 'throttled.window=2'] -> {'bruck': {'radix': '4'}, ...}."""
    options: dict[str, dict[str, str]] = {}
    for item in as_list(items):
        match = re.match(r"^\s*([\w.-]+)\.(\w+)\s*=\s*(.*?)\s*$", str(item))
        if not match:
            raise BadOption(f"{what} {item!r}; accepted: ALGORITHM.KEY=VALUE, e.g. bruck.radix=4")
        options.setdefault(match.group(1), {})[match.group(2)] = match.group(3)
    return options


def load_config(path: Path, accepted: tuple[str, ...]) -> dict[str, Any]:
    """Read a YAML sweep file into option values (keys as the long options, - or _); BadConfig names a key not
    `accepted`, and the one meant where one is close."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise BadConfig(f"cannot read config {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise BadConfig(f"config {path} must be a mapping of option names to values")
    values = {str(k).replace("-", "_"): v for k, v in data.items()}
    for key in values:
        if key not in accepted:
            spelt = [k.replace("_", "-") for k in accepted]
            raise BadConfig(f"config {path}: {unknown('key', key.replace('_', '-'), spelt)}")
    return values


def at_least_one(value: Any, what: str) -> int:
    """A whole number of at least 1 (anything else, 0 and -5 alike, is refused with the same words)."""
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise BadConfig(f"{what} {value!r}; accepted: a whole number, 1 or more")
    return int(text)


def choice(value: Any, accepted: tuple[str, ...], what: str) -> str:
    """One of `accepted`."""
    if value not in accepted:
        raise BadConfig(f"{what} {value!r}; accepted: {', '.join(accepted)}")
    return str(value)


def seconds(value: Any, what: str) -> float:
    """A positive number of seconds."""
    try:
        found = float(value)
    except (TypeError, ValueError):
        found = -1.0
    if not found > 0:
        raise BadConfig(f"{what} {value!r}; accepted: a positive number of seconds")
    return found


def as_list(value: Any) -> list[str]:
    """A repeatable option's values: none, one, or several."""
    if value in (None, ""):
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def as_text(value: Any) -> str:
    """A list option as the command line spells it: 8,1K,64K."""
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
