"""Intel MPI's I_MPI_ADJUST_ALLTOALL: `id:min-max@pmin-pmax` conditions joined by ';'.

Ids (Intel MPI developer reference): 1 Bruck's, 2 Isend/Irecv + waitall, 3 pairwise exchange,
4 Plum's. For MPI_Alltoall the message size is the bytes sent to one process. Ranges that
keep Intel's own choice (`native`) are left out, so Intel's default logic applies there.
"""
from __future__ import annotations

from typing import Any

from a2a.analysis.export import Exported, collective_of, translate

ALGORITHM_IDS = {"native": 0, "bruck": 1, "linear": 2, "pairwise": 3}
NO_LIMIT = 2147483647


def counterpart(algorithm: str, options: dict[str, str], nprocs: int) -> int | None:
    """Intel's preset id, or None."""
    if algorithm in ("bruck", "bruck_zero_copy"):
        return ALGORITHM_IDS["bruck"] if options["radix"] == "2" else None
    if algorithm == "linear_sync":  # all at once is Isend/Irecv + waitall; a narrower window has no twin
        window = int(options["window"])
        return ALGORITHM_IDS["linear"] if window <= 0 or window >= nprocs - 1 else None
    return ALGORITHM_IDS.get(algorithm)


def export(document: dict[str, Any]) -> Exported:
    """A shell line setting I_MPI_ADJUST_ALLTOALL for every process count of the table."""
    collective_of(document, "Intel MPI", ("alltoall",))
    tables, warnings = translate(document, counterpart, "Intel MPI")
    conditions = []
    for i, (nprocs, segments) in enumerate(tables):
        last = tables[i + 1][0] - 1 if i + 1 < len(tables) else NO_LIMIT
        for segment in segments:
            if segment.target:
                high = NO_LIMIT if segment.high is None else segment.high
                conditions.append(f"{segment.target}:{segment.low}-{high}@{nprocs}-{last}")
    value = ";".join(conditions) or "0"
    return Exported(f'I_MPI_ADJUST_ALLTOALL="{value}"\n', lambda path: {"I_MPI_ADJUST_ALLTOALL": value},
                    warnings, "(or: set -a; . {path}; set +a)")
