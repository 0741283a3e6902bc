"""Give cells of a decision table back to `native`: where the tuned library measured slower, or where the
winner changed between launches."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from a2a.algos.facts import library_own, library_own_options, shown
from a2a.record.decision import Cell, Decision, Table, context_of, ranges, rounded, where
from a2a.record.results import NATIVE
from a2a.record.verdict import SLOWER

CellKey = tuple[tuple, int]  # (a table's context, bytes per peer)


def revert_slower(document: Decision, rows: list[dict[str, Any]], alpha: float) -> tuple[Decision, list[str]]:
    """The document with every cell the verdicts found the tuned library slower at (compare's rows) given back to
    `native`, and what was given back.

    The testbed's own implementation of an algorithm can outrun the library's (MPICH's
    scattered against our throttled, say), so a table is verified on the library itself.
    """
    slower = {(context_of(row), row["bytes_per_peer"]): row["ratio"] for row in rows if row["verdict"] == SLOWER}
    return back_to_native(document, {cell: (f"ran {ratio:.2f}x slower in the library", rounded(ratio))
                                     for cell, ratio in slower.items()})


def back_to_native(document: Decision, cells: dict[CellKey, tuple[str, float | None]]) -> tuple[Decision, list[str]]:
    """The document with each named cell given to `native`, keeping what it had chosen in `reverted_from`, with (why,
    the library's ratio where measured), its ranges merged again; and one line per cell given back."""
    said: list[str] = []
    tables = tuple(_table_back(table, cells, said) for table in document.tables)
    return replace(document, tables=tables), said


def _table_back(table: Table, cells: dict[CellKey, tuple[str, float | None]], said: list[str]) -> Table:
    every = []
    for cell in table.cells:
        found = cells.get((table.context, cell.bytes_per_peer))
        if found is None or library_own(cell.algorithm, cell.options, table.column("timing")):
            every.append(cell)
            continue
        said.append(f"{where(table)}, {cell.bytes_per_peer} B/peer: {shown(cell.algorithm, cell.options)} "
                    f"{found[0]}; back to native")
        every.append(_native_cell(cell, table.column("timing"), found[1]))
    return replace(table, ranges=ranges(every))


def _native_cell(cell: Cell, timing: str, library_ratio: float | None) -> Cell:
    """The cell given to the library's own, its choice now the runner-up."""
    native = next((c for c in cell.candidates if library_own(c.algorithm, c.options, timing)), None)
    value = native.value_us if native else cell.value_us
    return replace(cell, reverted_from=shown(cell.algorithm, cell.options), library_ratio=library_ratio,
                   runner_up=shown(cell.algorithm, cell.options), runner_up_us=cell.value_us,
                   margin=rounded(cell.value_us / value - 1) if value else None, algorithm=NATIVE,
                   options=native.options if native else library_own_options(timing), value_us=value,
                   speedup_vs_native=1.0, vs_native=None, tie=False, tied_with=())
