"""MPICH's collective-selection JSON (MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE).

A user file replaces MPICH's whole built-in tree, and a collective missing from it fails an
assertion, so the file is MPICH's own algorithm-level tree taken from the user's libmpi (it
embeds its trees as NUL-terminated JSON strings starting `{"collective=`), with only the
`collective=alltoall` subtree replaced. Keys match in file order; `avg_msg_size` is bytes
per destination for alltoall. Only `<=` keys are written: MPICH 5.0.2 matched `comm_size<3`
for a communicator of 3 (checked here), so `<` is not to be trusted as strict. Ranges where the table keeps `native`
hold MPICH's original intra-communicator subtree, so MPICH decides there as before, and
in-place calls keep MPICH's choice (MPIR_Alltoall_intra_pairwise_sendrecv_replace, which
asserts sendbuf == MPI_IN_PLACE and so cannot serve the out-of-place calls the table measured).
Scattered's throttle is not a JSON parameter: MPICH reads MPIR_CVAR_ALLTOALL_THROTTLE, one
value for every call. For alltoallv MPICH has scattered out of place (the same throttle);
its subtree is spliced the same way, selecting by comm size only, as Open MPI can. An overlap
record's table (its winners ranked by the time of start, compute, wait) becomes the
`collective=ialltoall` subtree, from the twins algorithms name for "MPICH Ialltoall"
(MPIR_Ialltoall_intra_sched_pairwise, _sched_brucks, _sched_permuted_sendrecv); MPICH runs it for
MPI_Ialltoall and for MPI_Alltoall_init alike.
"""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from a2a.analysis.export.common import Exported, Segment, collective_of, counterpart, translate, translate_by_comm_size
from a2a.errors import BadInput
from a2a.mpilib import MPICH
from a2a.record.decision import Decision
from a2a.record.results import NATIVE

TREE_START = re.compile(rb'\{"collective=')
INT_MAX = 2147483647
PREFIX = "algorithm=MPIR_{}_intra_"
LIBRARY = MPICH.name
IALLTOALL = MPICH.ialltoall_twins  # the twins an algorithm names for MPICH's non-blocking selection
THROTTLED = ("scattered", "sched_permuted_sendrecv")  # MPICH's algorithms that read MPIR_CVAR_ALLTOALL_THROTTLE


def export(document: Decision, libmpi: str | Path | None = None) -> Exported:
    """MPICH's built-in tree with the table's alltoall (or alltoallv) subtree spliced in."""
    collective = collective_of(document, "mpich")
    tree, source = builtin_tree(libmpi)
    if collective == "alltoallv":
        chosen, warnings = translate_by_comm_size(document, counterpart(LIBRARY, "alltoallv"), LIBRARY)
        tables = [(nprocs, [Segment(0, None, target)]) for nprocs, target in chosen]
    elif collective == "ialltoall":  # an overlap record's winners, as MPICH's non-blocking algorithms
        tables, warnings = translate(document, counterpart(IALLTOALL), IALLTOALL)
    else:
        tables, warnings = translate(document, counterpart(LIBRARY), LIBRARY)
    throttle = _throttle(tables, warnings)
    original = tree.get(f"collective={collective}")
    if not isinstance(original, dict):
        raise BadInput(f"{source}: its selection tree has no collective={collective} to replace")
    tree[f"collective={collective}"] = alltoall_subtree(tables, original, collective)
    text = json.dumps(tree, indent=1) + "\n"
    note = "" if throttle is None else ("(the throttle also applies where MPICH itself picks scattered, "
                                        "in the ranges left to it)")
    return Exported(text, lambda path: _environment(path, throttle), warnings, note)


def alltoall_subtree(tables: list[tuple[int, list[Any]]], original: dict[str, Any],
                     collective: str = "alltoall") -> dict[str, Any]:
    """{comm_type=intra: {in place: MPICH's, out of place: by comm size, then size}, other keys: MPICH's}."""
    native = original.get("comm_type=intra", original)
    by_size: dict[str, Any] = {f"comm_size<={tables[0][0] - 1}": copy.deepcopy(native)}
    for i, (_, segments) in enumerate(tables):
        key = f"comm_size<={tables[i + 1][0] - 1}" if i + 1 < len(tables) else "comm_size=any"
        by_size[key] = {_size_key(s): _leaf(s.target, native, collective) for s in segments}
    intra = {"is_sendbuf_inplace=yes": copy.deepcopy(native), "is_sendbuf_inplace=no": by_size}
    return {"comm_type=intra": intra, **{k: v for k, v in original.items() if k != "comm_type=intra"}}


def _size_key(segment: Any) -> str:
    if segment.high is None or segment.high >= INT_MAX:
        return "avg_msg_size=any"
    return f"avg_msg_size<={segment.high}"


def _leaf(target: tuple, native: dict[str, Any], collective: str) -> dict[str, Any]:
    name, prefix = target[0], PREFIX.format(collective.capitalize())
    if name == NATIVE:
        return copy.deepcopy(native)
    if name == "k_brucks":
        return {prefix + "k_brucks": {f"k={target[1]}": {}}}
    return {prefix + name: {}}


def _throttle(tables: list[tuple[int, list[Any]]], warnings: list[str]) -> int | None:
    windows = Counter(s.target[1] for _, segments in tables for s in segments if s.target[0] in THROTTLED)
    if not windows:
        return None
    chosen = min(windows, key=lambda w: (-windows[w], w))
    for nprocs, segments in tables:
        for s in segments:
            if s.target[0] in THROTTLED and s.target[1] != chosen:
                warnings.append(f"{nprocs} ranks, from {s.low} B/peer: wants {s.target[0]} with throttle "
                                f"{s.target[1]} but runs with {chosen}: MPIR_CVAR_ALLTOALL_THROTTLE is one "
                                "value for all calls, not a JSON parameter (0 = all peers at once)")
    return chosen


def forcing(target: tuple) -> tuple[str, dict[str, str]]:
    """A twin's name (`MPICH k_brucks:k=4`) and the CVARs that make MPICH run it for every MPI_Alltoall."""
    variables = {"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": target[0]}
    if target[0] == "k_brucks":
        variables["MPIR_CVAR_ALLTOALL_BRUCKS_KVAL"] = str(target[1])
    if target[0] == "scattered":
        variables["MPIR_CVAR_ALLTOALL_THROTTLE"] = str(target[1])
    return f"MPICH {target[0]}" + (f":k={target[1]}" if target[0] == "k_brucks" else ""), variables


def _environment(path: str, throttle: int | None) -> dict[str, str]:
    variables = {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": path}
    if throttle is not None:
        variables["MPIR_CVAR_ALLTOALL_THROTTLE"] = str(throttle)
    return variables


# --- the built-in tree -----------------------------------------------------------------

def builtin_tree(libmpi: str | Path | None = None) -> tuple[dict[str, Any], Path]:
    """MPICH's algorithm-level selection tree (the one with most collectives) and its library."""
    candidates = [Path(libmpi)] if libmpi else libmpi_candidates()
    if libmpi and not Path(libmpi).is_file():
        raise BadInput(f"--libmpi {libmpi} does not exist")
    for path in candidates:
        trees = embedded_trees(path)
        if trees:
            return max(trees, key=len), path
    tried = ", ".join(str(p) for p in candidates) or "none found"
    raise BadInput(f"no MPICH libmpi with a built-in selection tree (tried: {tried}); "
                   "name the user's MPICH library with --libmpi PATH")


def embedded_trees(path: Path) -> list[dict[str, Any]]:
    """Every JSON selection tree embedded in a shared library."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    trees = []
    for match in TREE_START.finditer(data):
        end = data.find(b"\0", match.start())
        try:
            tree = json.loads(data[match.start():end])
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(tree, dict):
            trees.append(tree)
    return trees


def libmpi_candidates() -> list[Path]:
    """Where an MPICH libmpi may be: this Python's prefix (the pip wheel), beside mpichversion, LD_LIBRARY_PATH."""
    dirs = [Path(sys.prefix) / "lib"]
    tool = shutil.which("mpichversion")
    if tool:
        dirs.append(Path(tool).resolve().parent.parent / "lib")
    dirs += [Path(d) for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += [Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib64"), Path("/usr/local/lib")]
    found: list[Path] = []
    for directory in dirs:
        for pattern in ("libmpi.so*", "libmpich.so*"):
            for path in sorted(directory.glob(pattern)):
                real = path.resolve()
                if real.is_file() and real not in found:
                    found.append(real)
    return found
