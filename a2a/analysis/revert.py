"""Give cells of a decision table back to `native`: where the tuned library measured slower, or where the
winner changed between launches."""
from __future__ import annotations

from typing import Any

from a2a.algos.facts import library_own, library_own_options, shown
from a2a.record.decision import context_of, ranges, rounded, where
from a2a.record.results import NATIVE
from a2a.record.verdict import SLOWER

Cell = tuple[tuple, int]  # (a table's context, bytes per peer)


def revert_slower(document: dict[str, Any], rows: list[dict[str, Any]], alpha: float) -> list[str]:
    """Give back to `native` every cell the verdicts found the tuned library slower at (compare's rows).

    The testbed's own implementation of an algorithm can outrun the library's (MPICH's
    scattered against our throttled, say), so a table is verified on the library itself.
    Changes `document` in place; returns what was reverted.
    """
    slower = {(context_of(row), row["bytes_per_peer"]): row["ratio"] for row in rows if row["verdict"] == SLOWER}
    return back_to_native(document, {cell: (f"ran {ratio:.2f}x slower in the library",
                                            {"library_ratio": rounded(ratio)}) for cell, ratio in slower.items()})


def back_to_native(document: dict[str, Any], cells: dict[Cell, tuple[str, dict[str, Any]]]) -> list[str]:
    """Give each named cell to `native`, keeping what it had chose in `reverted_from`, with (why, what to add).

    Changes `document` in place and merges its ranges again; returns one line per cell given back.
    """
    said = []
    for table in document["tables"]:
        context, timing = context_of(table), table.get("timing", "")
        every = [cell for row in table["ranges"] for cell in row["cells"]]
        for cell in every:
            found = cells.get((context, cell["bytes_per_peer"]))
            if found is None or library_own(cell["algorithm"], cell["options"], timing):
                continue
            why, extra = found
            native = next((c for c in cell["candidates"] if library_own(c["algorithm"], c["options"], timing)), None)
            chosen = shown(cell["algorithm"], cell["options"])
            said.append(f"{where(table)}, {cell['bytes_per_peer']} B/peer: {chosen} {why}; back to native")
            value = native["value_us"] if native else cell["value_us"]
            cell.update(reverted_from=chosen, **extra, runner_up=chosen, runner_up_us=cell["value_us"],
                        margin=rounded(cell["value_us"] / value - 1) if value else None, algorithm=NATIVE,
                        options=native["options"] if native else library_own_options(timing), value_us=value,
                        speedup_vs_native=1.0, vs_native=None, tie=False, tied_with=[])
        table["ranges"] = ranges(every)
    return said
