"""Open MPI's classic coll_tuned dynamic rules file (alltoall is collective 3, alltoallv 4).

Facts from Open MPI's coll_tuned_dynamic_file.c: numbers are read with %li (so never
zero-padded: a leading 0 means octal); `#` starts a comment; each comm size's first rule
starts at message size 0; the message size of alltoall is the whole send buffer (bytes per
peer x communicator size); the optional fifth field (max requests, used by linear_sync)
needs the `rule-file-version-2` header, which Open MPI reads from 5.0.7 on. Open MPI 5.0.x
applies the entry of the largest comm size <= the communicator's and none below the first.
For alltoallv it looks up message size 0 (coll_tuned_decision_dynamic.c: no rank knows the
total; ompi issue 7672), so only the communicator size selects, among linear (1) and pairwise (2).
"""
from __future__ import annotations

from a2a.analysis.export.common import Exported, Segment, collective_of, counterpart, translate, translate_by_comm_size
from a2a.mpilib import OPEN_MPI
from a2a.record.decision import Decision

ALLTOALL_ID, ALLTOALLV_ID = 3, 4
LIBRARY = OPEN_MPI.name
# coll_tuned's alltoall algorithms by the names our algorithms' twins use (0: its fixed decision)
ALGORITHM_IDS = {"ignore": 0, "linear": 1, "pairwise": 2, "modified_bruck": 3, "linear_sync": 4}
ALLTOALLV_IDS = {"ignore": 0, "linear": 1, "pairwise": 2}


def export(document: Decision) -> Exported:
    """The rules file for every process count of the table."""
    if collective_of(document, "ompi") == "alltoallv":
        return export_v(document)
    tables, warnings = translate(document, counterpart(LIBRARY), LIBRARY)
    needs_requests = any(_twin(s)[1] for _, segments in tables for s in segments)
    lines = ["rule-file-version-2"] if needs_requests else []
    comment = (f"# alltoall decision from a2a ({document.metric}, alpha {document.alpha}); "
               "message size = bytes per peer x comm size")
    lines += [comment, "1", str(ALLTOALL_ID), str(len(tables))]
    for nprocs, segments in tables:
        lines += [f"{nprocs}", f"{len(segments)}"]
        for segment in segments:
            algorithm, requests = _twin(segment)
            fields = [segment.low * nprocs, ALGORITHM_IDS[algorithm], 0, 0] + ([requests] if needs_requests else [])
            lines.append(" ".join(str(f) for f in fields))
    return Exported("\n".join(lines) + "\n", environment, warnings, NOTE)


def _twin(segment: Segment) -> tuple[str, int]:
    assert isinstance(segment.target, tuple)  # Open MPI's twins are (algorithm, requests)
    return segment.target


def export_v(document: Decision) -> Exported:
    """Alltoallv rules: one rule per comm size, at message size 0, the only size Open MPI looks up."""
    chosen, warnings = translate_by_comm_size(document, counterpart(LIBRARY, "alltoallv"), LIBRARY)
    lines = [f"# alltoallv decision from a2a ({document.metric}, workload {document.tables[0].column('workload')});"
             " Open MPI selects alltoallv by comm size only", "1", str(ALLTOALLV_ID), str(len(chosen))]
    for nprocs, (algorithm, _) in chosen:
        lines += [f"{nprocs}", "1", f"0 {ALLTOALLV_IDS[algorithm]} 0 0"]
    return Exported("\n".join(lines) + "\n", environment, warnings, NOTE)


NOTE = "(or: mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename {path} ...)"


def forcing(target: tuple) -> tuple[str, dict[str, str]]:
    """A twin's name (`Open MPI linear_sync:reqs=2`) and the MCA variables that make coll_tuned run it."""
    algorithm, requests = target
    return (f"Open MPI {algorithm}" + (f":reqs={requests}" if requests else ""),
            {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
             "OMPI_MCA_coll_tuned_alltoall_algorithm": str(ALGORITHM_IDS[algorithm]),
             "OMPI_MCA_coll_tuned_alltoall_algorithm_max_requests": str(requests)})


def environment(path: str) -> dict[str, str]:
    """The MCA variables that load the file."""
    return {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_dynamic_rules_filename": path}
