"""The decision table's schema, reading, writing and lookup; `auto` and the exporters need only this.

The table is a JSON document (schema "a2a-decision/2", described in docs/decide.md; "a2a-decision/1", written
before verdicts, still reads). For every context (process count, timing, mesh, groups) it lists byte ranges per
peer that cover 0 to infinity; each range names an algorithm with its options and keeps the measured cells it came
from, with every candidate's metric and verdicts so exporters can substitute.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from a2a.errors import BadInput
from a2a.record.results import CONTROL, KEY_COLUMNS, KEY_DEFAULTS, NATIVE, write_atomic
from a2a.record.verdict import FASTER, NOT_JUDGED, SLOWER, TIE, UNTESTED, Comparison

SCHEMA = "a2a-decision/2"
VERDICTS = (FASTER, SLOWER, TIE, UNTESTED, NOT_JUDGED)
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


def context_of(record: Mapping[str, Any]) -> tuple:
    """A comparison row's context (a table's: Table.context); columns it lacks take the results' defaults."""
    return tuple(record.get(c, KEY_DEFAULTS.get(c, "")) for c in CONTEXT_COLUMNS)


def varying(records: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """The context columns a table of these records (comparison rows, or tables' columns) shows (nprocs, and those
    whose value varies), and the others not at their defaults as 'column=value' (one value for every record)."""
    values = {c: {str(r.get(c, KEY_DEFAULTS.get(c, ""))) for r in records} for c in CONTEXT_COLUMNS}
    shown = [c for c in CONTEXT_COLUMNS if c == "nprocs" or len(values[c]) > 1]
    same = [f"{c}={next(iter(values[c]))}" for c in CONTEXT_COLUMNS
            if c not in shown and values[c] and values[c] != {str(KEY_DEFAULTS.get(c, ""))}]
    return shown, same


def context_dict(context: tuple) -> dict[str, Any]:
    return {column: _plain(value) for column, value in zip(CONTEXT_COLUMNS, context)}


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value




# --- the document, typed ----------------------------------------------------------------

@dataclass(frozen=True)
class Contender:
    """One candidate of a cell: its metric, and its verdicts against the cell's best and native (judged cells)."""

    algorithm: str
    options: str
    value_us: float
    vs_best: Comparison | None = None
    vs_native: Comparison | None = None


@dataclass(frozen=True)
class Cell:
    """One measured size of a table: the choice, its runner-up, every candidate, and the verdicts that chose it
    (`rounds` None: a cell not judged by verdicts, of schema /1 or predicted, which has none)."""

    bytes_per_peer: int
    algorithm: str
    options: str
    value_us: float
    samples: int = 0
    tie: bool = False
    tied_with: tuple[str, ...] = ()
    runner_up: str | None = None
    runner_up_us: float | None = None
    margin: float | None = None
    speedup_vs_native: float | None = None
    native_p: float | None = None
    candidates: tuple[Contender, ...] = ()
    vs_native: Comparison | None = None
    noise_floor: float | None = None
    rounds: int | None = None
    launches: int | None = None
    recorded_calls: int | None = None  # a recorded program's: how many times it made the calls of this size
    predicted: bool = False
    reverted_from: str | None = None  # given back to native: what it had chosen
    library_ratio: float | None = None  # given back: its time over native's in the library

    @property
    def judged(self) -> bool:
        """Whether verdicts chose it (schema /2, measured): its cell and candidates carry them."""
        return self.rounds is not None


@dataclass(frozen=True)
class Range:
    """Bytes per peer from bytes_min to bytes_max (None: no end) served by one choice, with the cells it rests on."""

    bytes_min: int
    bytes_max: int | None
    algorithm: str
    options: str
    cells: tuple[Cell, ...] = ()


@dataclass(frozen=True)
class Table:
    """One context's ranges; `columns` are its context columns as the file gives them (nprocs at least)."""

    columns: Mapping[str, Any]
    ranges: tuple[Range, ...]
    predicted: bool = False

    @property
    def nprocs(self) -> int:
        return self.columns["nprocs"]

    def column(self, name: str) -> Any:
        """A context column's value, the results' default where the table lacks it."""
        return self.columns.get(name, KEY_DEFAULTS.get(name, ""))

    @property
    def context(self) -> tuple:
        return tuple(self.column(c) for c in CONTEXT_COLUMNS)

    @property
    def cells(self) -> list[Cell]:
        """Every measured cell, smallest first."""
        return [cell for row in self.ranges for cell in row.cells]


@dataclass(frozen=True)
class Decision:
    """A decision document: how it judged (metric, alpha, margin, statistic), what it read, and its tables."""

    schema: str
    metric: str
    alpha: float | None
    tables: tuple[Table, ...]
    dtype: str | None = None
    margin: float | None = None
    statistic: str | None = None
    context_columns: tuple[str, ...] = CONTEXT_COLUMNS
    mpi_library: str | list[str] | None = None
    created: str | None = None
    sources: tuple[Mapping[str, Any], ...] = ()
    predicted: bool = False
    model: tuple[Mapping[str, Any], ...] | None = None  # a predicted table's fits

    @property
    def cells(self) -> list[Cell]:
        return [cell for table in self.tables for cell in table.cells]

    def to_json(self) -> str:
        """The document as written to decision.json."""
        return json.dumps(_document_dict(self), indent=1) + "\n"


def _comparison_dict(said: Comparison | None) -> dict[str, Any] | None:
    return None if said is None else said.as_dict()


def _contender_dict(entry: Contender, judged: bool) -> dict[str, Any]:
    said = {"vs_best": _comparison_dict(entry.vs_best), "vs_native": _comparison_dict(entry.vs_native)}
    return {"algorithm": entry.algorithm, "options": entry.options, "value_us": entry.value_us,
            **(said if judged else {})}


def cell_dict(cell: Cell) -> dict[str, Any]:
    """A cell as JSON keys, in the order decide has always written them; keys a cell does not have left out."""
    out = {"bytes_per_peer": cell.bytes_per_peer, "algorithm": cell.algorithm, "options": cell.options,
           "value_us": cell.value_us, "samples": cell.samples, "tie": cell.tie, "tied_with": list(cell.tied_with),
           "runner_up": cell.runner_up, "runner_up_us": cell.runner_up_us, "margin": cell.margin,
           "speedup_vs_native": cell.speedup_vs_native, "native_p": cell.native_p,
           "candidates": [_contender_dict(c, cell.judged) for c in cell.candidates]}
    if cell.judged:
        out.update(vs_native=_comparison_dict(cell.vs_native), noise_floor=cell.noise_floor, rounds=cell.rounds,
                   launches=cell.launches)
    optional = {"recorded_calls": cell.recorded_calls, "predicted": cell.predicted or None,
                "reverted_from": cell.reverted_from, "library_ratio": cell.library_ratio}
    return {**out, **{k: v for k, v in optional.items() if v is not None}}


def _range_dict(row: Range) -> dict[str, Any]:
    return {"bytes_min": row.bytes_min, "bytes_max": row.bytes_max, "algorithm": row.algorithm,
            "options": row.options, "cells": [cell_dict(c) for c in row.cells]}


def _table_dict(table: Table) -> dict[str, Any]:
    return {**{k: _plain(v) for k, v in table.columns.items()}, **({"predicted": True} if table.predicted else {}),
            "ranges": [_range_dict(r) for r in table.ranges]}


def _document_dict(document: Decision) -> dict[str, Any]:
    judged = {"margin": document.margin, "statistic": document.statistic}
    return {"schema": document.schema, **({"predicted": True} if document.predicted else {}),
            "metric": document.metric, "alpha": document.alpha,
            **{k: v for k, v in judged.items() if v is not None}, "dtype": document.dtype,
            "context_columns": list(document.context_columns), "mpi_library": document.mpi_library,
            "created": document.created, "sources": [dict(s) for s in document.sources],
            **({} if document.model is None else {"model": [dict(m) for m in document.model]}),
            "tables": [_table_dict(t) for t in document.tables]}


def comparison_kept(said: Comparison) -> Comparison:
    """A comparison as the document keeps it (six significant digits), so a fresh decision reads as its file does."""
    return replace(said, **said.as_dict())


def ranges(cells: list[Cell]) -> tuple[Range, ...]:
    """Merge size-ordered cells with the same choice into byte ranges covering 0..infinity."""
    lows = lower_bounds([c.bytes_per_peer for c in cells])
    merged: list[Range] = []
    for low, cell in zip(lows, cells):
        if merged and (merged[-1].algorithm, merged[-1].options) == (cell.algorithm, cell.options):
            merged[-1] = replace(merged[-1], cells=(*merged[-1].cells, cell))
            continue
        if merged:
            merged[-1] = replace(merged[-1], bytes_max=low - 1)
        merged.append(Range(low, None, cell.algorithm, cell.options, (cell,)))
    return tuple(merged)


# --- reading ---------------------------------------------------------------------------

_REQUIRED = object()
_NUMBER = (int, float)


def _get(found: Any, key: str, kinds: type | tuple[type, ...], at: str, default: Any = _REQUIRED,
         nullable: bool = False) -> Any:
    """found[key], checked to be of `kinds` (None where `nullable`); BadInput names the field where it is not."""
    if not isinstance(found, Mapping):
        raise BadInput(f"{at or 'the document'} is not a JSON object")
    if key not in found:
        if default is _REQUIRED:
            raise BadInput(f"{_at(at, key)} is missing")
        return default
    value = found[key]
    if value is None and nullable:
        return None
    wanted = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
        names = " or ".join(k.__name__ for k in wanted) + (" or null" if nullable else "")
        raise BadInput(f"{_at(at, key)} is {json.dumps(value)[:40]}, not {names}")
    return value


def _at(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def _comparison(found: Any, at: str, cell: dict[str, Any]) -> Comparison | None:
    if found is None:
        return None
    ratio = _get(found, "ratio", _NUMBER, at)
    if _get(found, "verdict", str, at) not in VERDICTS:
        raise BadInput(f"{at}.verdict is {json.dumps(found['verdict'])}, not one of {', '.join(VERDICTS)}")
    return Comparison(ratio, _get(found, "low", _NUMBER, at, None, True), _get(found, "high", _NUMBER, at, None, True),
                      _get(found, "p", _NUMBER, at, None, True), found["verdict"], cell.get("rounds") or 0,
                      cell.get("launches") or 0)


def _contender(found: Any, at: str, cell: dict[str, Any]) -> Contender:
    return Contender(_get(found, "algorithm", str, at), _get(found, "options", str, at),
                     _get(found, "value_us", _NUMBER, at),
                     _comparison(_get(found, "vs_best", dict, at, None, True), f"{at}.vs_best", cell),
                     _comparison(_get(found, "vs_native", dict, at, None, True), f"{at}.vs_native", cell))


def _cell(found: Any, at: str) -> Cell:
    def number(key: str) -> float | None:
        return _get(found, key, _NUMBER, at, None, True)

    entries = _get(found, "candidates", list, at, [])
    return Cell(
        _get(found, "bytes_per_peer", int, at), _get(found, "algorithm", str, at), _get(found, "options", str, at),
        _get(found, "value_us", _NUMBER, at), _get(found, "samples", int, at, 0), _get(found, "tie", bool, at, False),
        tuple(_strings(found, "tied_with", at)), _get(found, "runner_up", str, at, None, True), number("runner_up_us"),
        number("margin"), number("speedup_vs_native"), number("native_p"),
        tuple(_contender(e, f"{at}.candidates[{i}]", found) for i, e in enumerate(entries)),
        _comparison(_get(found, "vs_native", dict, at, None, True), f"{at}.vs_native", found), number("noise_floor"),
        _get(found, "rounds", int, at, None, True), _get(found, "launches", int, at, None, True),
        _get(found, "recorded_calls", int, at, None, True), _get(found, "predicted", bool, at, False),
        _get(found, "reverted_from", str, at, None, True), number("library_ratio"))


def _strings(found: Mapping[str, Any], key: str, at: str) -> list[str]:
    values = _get(found, key, list, at, [])
    if not all(isinstance(v, str) for v in values):
        raise BadInput(f"{_at(at, key)} holds something other than names")
    return values


def _range(found: Any, at: str) -> Range:
    cells = _get(found, "cells", list, at, [])
    return Range(_get(found, "bytes_min", int, at), _get(found, "bytes_max", int, at, _REQUIRED, True),
                 _get(found, "algorithm", str, at), _get(found, "options", str, at),
                 tuple(_cell(c, f"{at}.cells[{i}]") for i, c in enumerate(cells)))


def _table(found: Any, at: str) -> Table:
    _get(found, "nprocs", int, at)
    rows = _get(found, "ranges", list, at)
    columns = {k: v for k, v in found.items() if k not in ("ranges", "predicted")}
    table = Table(columns, tuple(_range(r, f"{at}.ranges[{i}]") for i, r in enumerate(rows)),
                  _get(found, "predicted", bool, at, False))
    _check_cover(table, at)
    return table


def _check_cover(table: Table, at: str) -> None:
    """BadInput unless the table's ranges cover 0 bytes to infinity, each starting where the one before ends."""
    rows = table.ranges
    if not rows or rows[0].bytes_min != 0:
        raise BadInput(f"{at}.ranges: the ranges of {where(table)} do not start at 0 bytes")
    for row, following in zip(rows, [*rows[1:], None]):
        if row.bytes_max != (None if following is None else following.bytes_min - 1):
            raise BadInput(f"{at}.ranges: the ranges of {where(table)} leave a gap or overlap at {row.bytes_max}")


def from_json(found: Any) -> Decision:
    """A decision document from its JSON value (schema /2, or /1); BadInput names the first field that is wrong."""
    if not isinstance(found, Mapping) or found.get("schema") not in READABLE:
        raise BadInput(f"no \"schema\": \"{SCHEMA}\" (or \"{READABLE[0]}\")")
    tables = _get(found, "tables", list, "")
    if not tables:
        raise BadInput("no tables")
    model = _get(found, "model", list, "", None, True)
    return Decision(
        found["schema"], _get(found, "metric", str, ""), _get(found, "alpha", _NUMBER, "", None, True),
        tuple(_table(t, f"tables[{i}]") for i, t in enumerate(tables)), _get(found, "dtype", str, "", None, True),
        _get(found, "margin", _NUMBER, "", None, True), _get(found, "statistic", str, "", None, True),
        tuple(_strings(found, "context_columns", "") or CONTEXT_COLUMNS),
        _get(found, "mpi_library", (str, list), "", None, True), _get(found, "created", str, "", None, True),
        tuple(_get(found, "sources", list, "", [])), _get(found, "predicted", bool, "", False),
        None if model is None else tuple(model))


def as_decision(document: Decision | Mapping[str, Any]) -> Decision:
    """A Decision as it is, or one read from its JSON value (a document built by hand, as tests do)."""
    return document if isinstance(document, Decision) else from_json(document)


def write_decision(document: Decision | Mapping[str, Any], path: Path) -> None:
    """Write decision.json atomically (a document given as JSON is checked first)."""
    write_atomic(Path(path), as_decision(document).to_json())


def read_decision(path: Path | str) -> Decision:
    """Read and check a decision.json; BadInput names what is wrong, in one line."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"decision table {path} does not exist (make one with `python -m bench decide`)")
    try:
        found = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"decision table {path} is not valid JSON ({exc})") from None
    try:
        return from_json(found)
    except BadInput as problem:
        raise BadInput(f"decision table {path}: {problem} (expected a file written by `bench decide`)") from None


def where(table: Table) -> str:
    """'nprocs=4', with the other context columns where they differ from their defaults."""
    return ", ".join(f"{c}={table.column(c)}" for c in CONTEXT_COLUMNS
                     if c == "nprocs" or table.column(c) != KEY_DEFAULTS.get(c, ""))


def lookup(document: Decision, nprocs: int, bytes_per_peer: int, **context: Any) -> tuple[Table, Range] | None:
    """(table, range) for a communicator: the nearest measured process count at or below nprocs.

    None when nprocs is below every measured count. Context columns given must match exactly
    (a table without one has the results' default, e.g. collective alltoall).
    """
    fitting = [t for t in document.tables
               if t.nprocs <= nprocs and all(t.column(c) == v for c, v in context.items())]
    if not fitting:
        return None
    table = max(fitting, key=lambda t: t.nprocs)
    return table, next(r for r in reversed(table.ranges) if r.bytes_min <= bytes_per_peer)
