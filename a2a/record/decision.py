"""The decision table's schema, reading, writing and lookup; `auto` and the exporters need only this.

The table is a JSON document (schema "a2a-decision/2", described in docs/decide.md; "a2a-decision/1", written
before verdicts, still reads). For every context (process count, timing, mesh, groups) it lists byte ranges per
peer that cover 0 to infinity; each range names an algorithm with its options and keeps the measured cells it came
from, with every candidate's metric and verdicts so exporters can substitute.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from a2a.errors import BadInput
from a2a.record.results import CONTROL, KEY_COLUMNS, KEY_DEFAULTS, NATIVE, write_atomic

SCHEMA = "a2a-decision/2"
READABLE = ("a2a-decision/1", SCHEMA)  # /1: before a2a.record.verdict (no statistic, margin, vs_native, noise_floor)
# Key columns that split the table: every key column but what a cell chooses and the dtype
CONTEXT_COLUMNS = tuple(c for c in KEY_COLUMNS if c not in ("algorithm", "options", "dtype", "bytes_per_peer"))


def parse_options(text: str) -> dict[str, str]:
    """'radix=2;window=8' -> {'radix': '2', 'window': '8'}."""
    return dict(pair.split("=", 1) for pair in text.split(";") if pair)


def controls_native(algorithm: str, options: str, native_options: str) -> bool:
    """Whether a point is the control of the library's own call in `native_options`' form (its ratio to that call
    is a cell's noise floor)."""
    mine, native = parse_options(options), parse_options(native_options)
    return algorithm == CONTROL and mine.get("of", NATIVE) == NATIVE and \
        mine.get("form", "blocking") == native.get("form", "blocking")


def rounded(value: float) -> float:
    """Six significant digits, for JSON that people read."""
    return float(f"{value:.6g}")


def lower_bounds(sizes: list[int]) -> list[int]:
    """First byte count of each measured size's range: 0, then geometric means of neighbours."""
    bounds = [0]
    for small, large in zip(sizes, sizes[1:]):
        bounds.append(min(large, max(small + 1, round(math.sqrt(small * large)))))
    return bounds


def ranges(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge size-ordered cells with the same choice into byte ranges covering 0..infinity."""
    lows = lower_bounds([c["bytes_per_peer"] for c in cells])
    merged: list[dict[str, Any]] = []
    for low, cell in zip(lows, cells):
        if merged and (merged[-1]["algorithm"], merged[-1]["options"]) == (cell["algorithm"], cell["options"]):
            merged[-1]["cells"].append(cell)
            continue
        if merged:
            merged[-1]["bytes_max"] = low - 1
        merged.append({"bytes_min": low, "bytes_max": None, "algorithm": cell["algorithm"],
                       "options": cell["options"], "cells": [cell]})
    return merged


def context_of(record: dict[str, Any]) -> tuple:
    """A table's or comparison row's context; columns it lacks take the results' defaults."""
    return tuple(record.get(c, KEY_DEFAULTS.get(c, "")) for c in CONTEXT_COLUMNS)


def varying(records: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The context columns a table of these records shows (nprocs, and those whose value varies), and the others
    not at their defaults as 'column=value' (one value for every record)."""
    values = {c: {str(r.get(c, KEY_DEFAULTS.get(c, ""))) for r in records} for c in CONTEXT_COLUMNS}
    shown = [c for c in CONTEXT_COLUMNS if c == "nprocs" or len(values[c]) > 1]
    same = [f"{c}={next(iter(values[c]))}" for c in CONTEXT_COLUMNS
            if c not in shown and values[c] and values[c] != {str(KEY_DEFAULTS.get(c, ""))}]
    return shown, same


def context_dict(context: tuple) -> dict[str, Any]:
    return {column: _plain(value) for column, value in zip(CONTEXT_COLUMNS, context)}


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def write_decision(document: dict[str, Any], path: Path) -> None:
    """Write decision.json atomically."""
    write_atomic(Path(path), json.dumps(document, indent=1) + "\n")


def read_decision(path: Path | str) -> dict[str, Any]:
    """Read and check a decision.json; BadInput names what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"decision table {path} does not exist (make one with `python -m bench decide`)")
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"decision table {path} is not valid JSON ({exc})") from None
    problem = _schema_problem(document)
    if problem:
        raise BadInput(f"decision table {path}: {problem} (expected a file written by `bench decide`)")
    return document


def _schema_problem(document: Any) -> str | None:
    if not isinstance(document, dict) or document.get("schema") not in READABLE:
        return f"no \"schema\": \"{SCHEMA}\" (or \"{READABLE[0]}\")"
    tables = document.get("tables")
    if not isinstance(tables, list) or not tables:
        return "no tables"
    for table in tables:
        if not isinstance(table, dict) or not isinstance(table.get("nprocs"), int):
            return "a table lacks an integer nprocs"
        rows = table.get("ranges")
        if not isinstance(rows, list) or not rows or rows[0].get("bytes_min") != 0:
            return f"the ranges of {where(table)} do not start at 0 bytes"
        for row, following in zip(rows, rows[1:] + [None]):
            if not isinstance(row.get("algorithm"), str) or not isinstance(row.get("options"), str):
                return f"a range of {where(table)} lacks algorithm or options"
            end = None if following is None else following.get("bytes_min", -1) - 1
            if row.get("bytes_max") != end:
                return f"the ranges of {where(table)} leave a gap or overlap at {row.get('bytes_max')}"
    return None


def where(table: dict[str, Any]) -> str:
    """'nprocs=4', with the other context columns where they differ from their defaults."""
    return ", ".join(f"{c}={table.get(c)}" for c in CONTEXT_COLUMNS
                     if c == "nprocs" or table.get(c, KEY_DEFAULTS.get(c, "")) != KEY_DEFAULTS.get(c, ""))


def lookup(document: dict[str, Any], nprocs: int, bytes_per_peer: int,
           **context: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(table, range) for a communicator: the nearest measured process count at or below nprocs.

    None when nprocs is below every measured count. Context columns given must match exactly
    (a table without one has the results' default, e.g. collective alltoall).
    """
    fitting = [t for t in document["tables"]
               if t["nprocs"] <= nprocs and all(t.get(c, KEY_DEFAULTS.get(c, "")) == v for c, v in context.items())]
    if not fitting:
        return None
    table = max(fitting, key=lambda t: t["nprocs"])
    row = next(r for r in reversed(table["ranges"]) if r["bytes_min"] <= bytes_per_peer)
    return table, row
