"""Intel MPI's I_MPI_ADJUST_ALLTOALL: `id:min-max@pmin-pmax` conditions joined by ';'.

Ids (Intel MPI developer reference): 1 Bruck's, 2 Isend/Irecv + waitall, 3 pairwise exchange,
4 Plum's. For MPI_Alltoall the message size is the bytes sent to one process. Ranges that
keep Intel's own choice (`native`) are left out, so Intel's default logic applies there.
"""
from __future__ import annotations

from a2a.analysis.export.common import Exported, collective_of, counterpart, translate
from a2a.mpilib import INTEL_MPI
from a2a.record.decision import Decision

LIBRARY = INTEL_MPI.name
# I_MPI_ADJUST_ALLTOALL's ids by the names our algorithms' twins use (0: Intel's own choice)
ALGORITHM_IDS = {"native": 0, "bruck": 1, "isend_irecv": 2, "pairwise": 3, "plum": 4}
NO_LIMIT = 2147483647


def export(document: Decision) -> Exported:
    """A shell line setting I_MPI_ADJUST_ALLTOALL for every process count of the table."""
    collective_of(document, "intel")
    tables, warnings = translate(document, counterpart(LIBRARY), LIBRARY)
    conditions = []
    for i, (nprocs, segments) in enumerate(tables):
        last = tables[i + 1][0] - 1 if i + 1 < len(tables) else NO_LIMIT
        for segment in segments:
            assert isinstance(segment.target, str)  # Intel MPI's twins are its algorithms' names
            if ALGORITHM_IDS[segment.target]:
                high = NO_LIMIT if segment.high is None else segment.high
                conditions.append(f"{ALGORITHM_IDS[segment.target]}:{segment.low}-{high}@{nprocs}-{last}")
    value = ";".join(conditions) or "0"
    return Exported(f'I_MPI_ADJUST_ALLTOALL="{value}"\n', lambda path: {"I_MPI_ADJUST_ALLTOALL": value},
                    warnings, "(or: set -a; . {path}; set +a)")
