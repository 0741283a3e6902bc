"""Open MPI 6's JSON rules for coll_tuned: bounds inclusive, "inf" allowed, first match wins.

Message sizes are the whole send buffer, as in the classic file; each measured process count
covers communicators up to the next measured count minus one (the last: no limit).
"""
from __future__ import annotations

import json
from typing import Any

from a2a.analysis.export.common import Exported, collective_of, counterpart, translate
from a2a.analysis.export.ompi import LIBRARY, NOTE, environment
from a2a.record.decision import Decision


def export(document: Decision) -> Exported:
    """The JSON rules for every process count of the table."""
    collective_of(document, "ompi-json")
    tables, warnings = translate(document, counterpart(LIBRARY), LIBRARY)
    entries = []
    for i, (nprocs, segments) in enumerate(tables):
        entry: dict[str, Any] = {"comm_size_min": nprocs}
        if i + 1 < len(tables):
            entry["comm_size_max"] = tables[i + 1][0] - 1
        entry["rules"] = [_rule(segment, nprocs) for segment in segments]
        entries.append(entry)
    rules = {"rule_file_version": 3, "module": "tuned", "collectives": {"alltoall": entries}}
    return Exported(json.dumps(rules, indent=1) + "\n", environment, warnings, NOTE)


def _rule(segment: Any, nprocs: int) -> dict[str, Any]:
    algorithm, requests = segment.target
    high = "inf" if segment.high is None else (segment.high + 1) * nprocs - 1
    rule: dict[str, Any] = {"msg_size_min": segment.low * nprocs, "msg_size_max": high,
                            "alg": algorithm}
    if requests:
        rule["reqs"] = requests
    return rule
