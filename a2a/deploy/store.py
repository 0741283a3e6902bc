"""The store of learning evidence that many jobs share (A2A_LEARN_DIR, docs/learn.md): read, compacted and shown.

A folder of evidence files, one per job, which liba2a writes at MPI_Finalize (c/liba2a_store.c says the format):

    a2a-evidence 1
    job NAME
    evidence LIBRARY CANDIDATES COLLECTIVE NPROCS LAYOUT LOW HIGH STATE CHOICE CALLS ... (a learned line's rest)
    end CHECKSUM

A compact file holds the sections of the files it absorbed; a job's section counts once wherever it appears. Classes
of MPI_Alltoall (bytes per peer) and of MPI_Alltoallv (the largest block any rank sends one peer) are kept apart by
the collective in their key.
"""
from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from a2a.deploy.file import Learned, family, span_text
from a2a.errors import BadInput
from a2a.record.results import write_atomic
from a2a.schedules.program import checksum
from a2a.units import counted

HEADER = "a2a-evidence 1\n"
SUFFIX = ".a2a-evidence"


@dataclass(frozen=True)
class Evidence:
    """One job's evidence line: the class's key and what that job added to it."""

    library: str
    candidates: str
    learned: Learned

    @property
    def key(self) -> tuple[str, str, str, int, str, int]:
        """What is merged together: one library, candidates, collective, process count, node layout, size class."""
        k = self.learned
        return self.library, self.candidates, k.collective, k.nprocs, k.layout, k.low

    @classmethod
    def parse(cls, line: str) -> "Evidence":
        """An evidence line (BadInput where it is not one liba2a writes)."""
        words = line.split(" ", 3)
        if len(words) != 4 or words[0] != "evidence":
            raise BadInput(f"evidence line '{line[:60]}...' is not as liba2a writes it")
        return cls(words[1], words[2], Learned.parse(words[3]))


def library_key(version: str) -> str:
    """An MPI library as the store keys it (liba2a_store.c): its family, '/', its version (the first word after its
    name that begins with a digit), spaces made '_'."""
    found = re.search(r"(?<=[ \tv:])\d[^ \t\n,]*", version)
    return f"{family(version)}/{found[0] if found else ''}".replace(" ", "_")


def evidence_file(body: str) -> str:
    """An evidence file's text: the header, its sections ('job NAME' and its lines), the end line."""
    text = HEADER + body
    return text + f"end {checksum(text.encode())}\n"


def sections_of(path: Path) -> dict[str, list[str]]:
    """A file's sections, job name to its lines ({} where it is not an evidence file whose checksum holds)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return {}
    body, _, end = text.rstrip("\n").rpartition("\n")
    if not text.startswith(HEADER) or end != f"end {checksum((body + chr(10)).encode())}":
        return {}
    sections: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in body.splitlines()[1:]:
        if line.startswith("job "):
            lines = sections.setdefault(line[4:], [])
        elif lines is not None:
            lines.append(line)
    return sections


def read_store(folder: Path) -> tuple[list[Path], dict[str, list[str]]]:
    """The evidence files of a store and every job's section once (BadInput where it is not a folder)."""
    if not folder.is_dir():
        raise BadInput(f"{folder}: not a folder; accepted: an A2A_LEARN_DIR folder of evidence files")
    files = sorted(p for p in folder.iterdir() if p.name.endswith(SUFFIX) and not p.name.startswith("."))
    jobs: dict[str, list[str]] = {}
    for path in files:
        for job, lines in sections_of(path).items():
            jobs.setdefault(job, lines)
    return files, jobs


def compact(folder: Path, name: str = "compact-bench" + SUFFIX) -> tuple[int, int]:
    """The store's files made one (every job's section, written whole, then the files read removed): how many files
    and jobs it held."""
    files, jobs = read_store(folder)
    if len(files) > 1:
        target = folder / name
        write_atomic(target, evidence_file("".join(f"job {job}\n" + "".join(f"{line}\n" for line in lines)
                                                   for job, lines in jobs.items())))
        for path in files:
            if path != target:
                path.unlink(missing_ok=True)
    return len(files), len(jobs)


def shown_store(folder: Path) -> list[str]:
    """`bench deploy --show DIR`: what the store knows per class, after compacting it."""
    files, _ = compact(folder)
    merged: dict[tuple[str, str, str, int, str, int], list[Evidence]] = {}
    jobs = read_store(folder)[1]
    for lines in jobs.values():
        for line in lines:
            found = Evidence.parse(line)
            merged.setdefault(found.key, []).append(found)
    head = (f"{folder}: the evidence of {counted(len(jobs), 'job')} from {counted(files, 'file')}"
            f"{', compacted into one' if files > 1 else ''}")
    return [head, *(described(parts) for _, parts in sorted(merged.items()))]


def class_text(collective: str, low: int, high: int) -> str:
    """A size class as the store keys it: an alltoall's bytes per peer, an alltoallv's largest block to one peer."""
    if collective == "alltoallv":
        return f"largest block to one peer {low}..{'' if high < 0 else high} B"
    return span_text(low, high)


def described(parts: list[Evidence]) -> str:
    """One class of the store: its key, the jobs' calls summed, the rounds concatenated, how the jobs ended."""
    first = parts[0].learned
    library = [t for part in parts for t in part.learned.library]
    names = parts[0].candidates.split(",")
    ratios = [[v for part in parts for v in part.learned.ratios[a][1]] for a in range(len(names))]
    evidence = ", ".join(f"{name} {math.exp(statistics.median(values)):.2f}x over {counted(len(values), 'round')}"
                         for name, values in zip(names, ratios) if values)
    ended = ", ".join(f"{state} {n}" for state, n in Counter(part.learned.state for part in parts).most_common())
    return (f"  {parts[0].library}, {first.collective} on {first.nprocs} ranks (nodes {first.layout}), "
            f"{class_text(first.collective, first.low, first.high)}, among the library's own, {', '.join(names)}: "
            f"{counted(len(parts), 'job')}, {sum(p.learned.calls for p in parts)} calls, "
            f"{sum(p.learned.explored for p in parts)} exploring, {sum(p.learned.revisited for p in parts)} "
            f"revisiting; {counted(len(library), 'round')} ({evidence or 'no rounds yet'}); the jobs ended {ended}")
