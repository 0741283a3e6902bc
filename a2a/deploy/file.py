"""The deploy file: a decision's winners as the executor's schedule data, for the PMPI library (liba2a) to run.

A text file, written here and read by a2a/deploy/c/liba2a.c:

    a2a-deploy 1
    library MPICH                                    the MPI library it is made for (liba2a refuses another)
    from ...                                         where it came from (decision, records, commits), for people
    entry COLLECTIVE NPROCS LAYOUT LOW HIGH SCHEDULE
    learn alltoall NPROCS LAYOUT LOW HIGH CANDIDATE,...   learn among these schedules and the library's own, over
                                                     the program's calls (-1: the library's own under another
                                                     name, a control; bench deploy --learn, docs/deploy.md)
    unverified NPROCS MEASURED                       entries for a process count the decision never measured, made
                                                     from its table of MEASURED ranks (bench deploy --extrapolate)
    verified ...                                     how the file was verified, and each verdict (bench tune --deploy)
    learned ...                                      what a run learned for a size class, with its evidence
                                                     (liba2a writes them to A2A_LEARN_OUT; a later run starts there)
    schedule INDEX NAME LENGTH                       then LENGTH bytes: an a2a-schedule file (a2a.schedules.program)
    end CHECKSUM

An entry serves a collective on communicators of NPROCS ranks whose blocks hold LOW to HIGH bytes (-1: no
limit) with schedule SCHEDULE (-1: the MPI library's own choice). LAYOUT is `*` where the schedule is the same
whatever the ranks' nodes, else each rank's node numbered in order of first appearance (0,0,1,1). An alltoallv
entry serves every size: its ranks cannot know the call's size without talking, so one schedule per process
count and layout, the one most of the measured sizes chose. CHECKSUM is FNV-1a over the bytes before the end line.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a.algos.facts import shown
from a2a.algos.nodes import virtual_nodes
from a2a.algos.options import schedule_options
from a2a.algos.registry import get
from a2a.analysis.decide import decide
from a2a.errors import A2AError, BadInput
from a2a.mpi import library_version
from a2a.mpilib import profile_of
from a2a.record.decision import Decision, Table, as_decision, parse_options, read_decision
from a2a.record.results import NATIVE, OVERLAP, write_atomic
from a2a.schedules.program import checksum, dumps
from a2a.schedules.tracer import NotExact, traced
from a2a.units import counted

MAGIC, VERSION = "a2a-deploy", 1


def family(version: str) -> str:
    """The MPI library a version text names, as liba2a.c names it."""
    return profile_of(version).name


@dataclass
class Deployment:
    """What a deploy file holds: entries, the schedules' texts, and what could not be compiled."""

    library: str
    origin: list[str]
    entries: list[tuple[str, int, str, int, int, int]] = field(default_factory=list)
    schedules: list[tuple[str, str]] = field(default_factory=list)  # (name, schedule text)
    kept: list[str] = field(default_factory=list)  # the ranges left to the library, and why
    unverified: list[tuple[int, int]] = field(default_factory=list)  # (process count, the count whose table it took)
    verification: list[str] = field(default_factory=list)  # the `verified` lines, without the word
    learning: list[tuple[str, int, str, int, int, tuple[int, ...]]] = field(default_factory=list)  # learn lines
    learned: list[str] = field(default_factory=list)  # the `learned` lines, without the word, as liba2a wrote them

    def text(self) -> str:
        """The file's text."""
        lines = [f"{MAGIC} {VERSION}", f"library {self.library}", *(f"from {o}" for o in self.origin)]
        lines += [" ".join(map(str, e)) for e in (("entry", *e) for e in self.entries)]
        lines += [f"learn {c} {p} {layout} {low} {high} {','.join(map(str, candidates))}"
                  for c, p, layout, low, high, candidates in self.learning]
        lines += [f"unverified {p} {measured}" for p, measured in self.unverified]
        lines += [f"verified {line}" for line in self.verification]
        lines += [f"learned {line}" for line in self.learned]
        body = "\n".join(lines) + "\n"
        body += "".join(f"schedule {i} {name} {len(data.encode())}\n{data}" for i, (name, data)
                        in enumerate(self.schedules))
        return body + f"end {checksum(body.encode())}\n"

    @classmethod
    def read(cls, path: Path) -> "Deployment":
        """A deploy file read back (BadInput naming what is wrong: not one, or altered since written)."""
        try:
            text = Path(path).read_bytes().decode()
        except (OSError, UnicodeDecodeError) as why:
            raise BadInput(f"deploy file {path}: {why}") from None
        body, _, end = text.rpartition("end ")
        if not text.startswith(f"{MAGIC} ") or end.strip() != checksum(body.encode()):
            raise BadInput(f"{path} is not a deploy file, or it was altered or cut after it was written")
        head, _, rest = body.partition("\nschedule ")
        made = cls("", [])
        for line in head.splitlines()[1:]:
            word, _, value = line.partition(" ")
            if word == "library":
                made.library = value
            elif word == "from":
                made.origin.append(value)
            elif word == "entry":
                c, p, layout, low, high, k = value.split()
                made.entries.append((c, int(p), layout, int(low), int(high), int(k)))
            elif word == "unverified":
                count, measured = map(int, value.split())
                made.unverified.append((count, measured))
            elif word == "verified":
                made.verification.append(value)
            elif word == "learn":
                c, p, layout, low, high, candidates = value.split()
                made.learning.append((c, int(p), layout, int(low), int(high),
                                      tuple(int(k) for k in candidates.split(","))))
            elif word == "learned":
                made.learned.append(value)
        rest = f"schedule {rest}" if rest else ""
        while rest:
            header, _, rest = rest.partition("\n")
            _, _, name, length = header.split()
            data, rest = rest.encode()[: int(length)].decode(), rest.encode()[int(length):].decode()
            made.schedules.append((name, data))
        return made

    def give_back(self, collective: str, nprocs: int, low: int, high: int) -> None:
        """Give the sizes low..high (high -1: no limit) of a collective on `nprocs` ranks back to the library."""
        entries = []
        for c, p, layout, lo, hi, k in self.entries:
            end = hi if hi >= 0 else 1 << 62
            top = high if high >= 0 else 1 << 62
            if (c, p) != (collective, nprocs) or k < 0 or top < lo or low > end:
                entries.append((c, p, layout, lo, hi, k))
                continue
            if lo < low:
                entries.append((c, p, layout, lo, low - 1, k))
            entries.append((c, p, layout, max(lo, low), min(end, top) if min(end, top) < 1 << 62 else -1, -1))
            if top < end:
                entries.append((c, p, layout, top + 1, hi, k))
        self.entries = _merged(entries)

    def serves(self) -> bool:
        """Whether any entry runs a schedule (not the library's choice)."""
        return any(k >= 0 for *_, k in self.entries)

    def schedule_for(self, name: str, data: str) -> int:
        """The index of this schedule text, added if new."""
        if (name, data) not in self.schedules:
            self.schedules.append((name, data))
        return self.schedules.index((name, data))


def _merged(entries: list[tuple[str, int, str, int, int, int]]) -> list[tuple[str, int, str, int, int, int]]:
    """Neighbouring entries of one collective, process count and layout that run the same schedule, as one."""
    merged: list[tuple[str, int, str, int, int, int]] = []
    for entry in entries:
        c, p, layout, low, high, k = entry
        if merged and merged[-1][:3] == (c, p, layout) and merged[-1][5] == k and merged[-1][4] == low - 1:
            merged[-1] = (c, p, layout, merged[-1][3], high, k)
        else:
            merged.append(entry)
    return merged


def layout_text(nodes: list[list[int]], nprocs: int) -> str:
    """'0,0,1,1': each rank's node, numbered by the nodes' lowest ranks."""
    node_of = [0] * nprocs
    for index, members in enumerate(sorted(nodes, key=min)):
        for rank in members:
            node_of[rank] = index
    return ",".join(map(str, node_of))


def schedule_of(algorithm: str, options: str, nprocs: int, nodes: list[list[int]], collective: str
             ) -> tuple[str, str, bool]:
    """(name, schedule text, whether it depends on the ranks' nodes) of a decision's choice; NotExact if it is not
    exact data."""
    found = get(algorithm)
    chosen = tuple(sorted(schedule_options(found.resolve(parse_options(options))).items()))
    data = traced(found, chosen, nprocs, tuple(map(tuple, nodes)), collective)
    if collective == "alltoallv" and not data.direct:
        raise NotExact(f"{algorithm}'s alltoallv forwards blocks through a temporary buffer")
    alone = traced(found, chosen, nprocs, tuple((r,) for r in range(nprocs)), collective)
    text = dumps(data)
    return shown(algorithm, options).replace(" ", ""), text, dumps(alone) != text


def deployment(document: Decision | Mapping[str, Any], nprocs: list[int], ranks_per_node: int, library: str,
               origin: list[str], extrapolate: bool = True) -> Deployment:
    """The deploy file for `document`'s blocking all-to-all choices on jobs of these process counts; a count the
    decision did not measure takes the table of the nearest count below, marked unverified, or (not `extrapolate`)
    is refused."""
    return _served(as_decision(document).tables, nprocs, ranks_per_node, library, origin, extrapolate)


def _served(every: Sequence[Table], nprocs: list[int], ranks_per_node: int, library: str, origin: list[str],
            extrapolate: bool) -> Deployment:
    """deployment() of tables gathered from one or more decisions."""
    tables = [t for t in every if t.column("timing") != OVERLAP]
    if not tables:
        raise BadInput("the decision ranks non-blocking exchanges (an overlap record); liba2a serves MPI_Alltoall "
                       "and MPI_Alltoallv: decide a record of blocking timing")
    made = Deployment(library, origin)
    for collective in sorted({t.column("collective") for t in tables}):
        for p in nprocs:
            fitting = [t for t in tables if t.column("collective") == collective and t.nprocs <= p]
            if not fitting:
                made.kept.append(f"{collective} on {p} ranks: the decision has no table at or below {p} ranks")
                continue
            table = max(fitting, key=lambda t: t.nprocs)
            if table.nprocs != p:
                if not extrapolate:
                    measured = ", ".join(map(str, sorted({t.nprocs for t in tables})))
                    raise BadInput(f"--nprocs {p}: the decision measured {collective} on {measured} ranks, not {p}; "
                                   "measure it there, or give --extrapolate to serve it with the table of the nearest "
                                   "count below (marked unverified in the file and in liba2a's report)")
                if (p, table.nprocs) not in made.unverified:
                    made.unverified.append((p, table.nprocs))
            nodes = virtual_nodes(p, ranks_per_node or p, "block")
            for low, high, algorithm, options in _ranges(table, collective):
                _add(made, collective, p, nodes, low, high, algorithm, options)
    return made


def _ranges(table: Table, collective: str) -> list[tuple[int, int, str, str]]:
    """(low, high, algorithm, options) per range; alltoallv: one range, the choice of most measured sizes (of the
    ranges', where they keep no cells)."""
    rows = table.ranges
    if collective == "alltoall":
        return [(r.bytes_min, -1 if r.bytes_max is None else r.bytes_max, r.algorithm, r.options) for r in rows]
    votes = Counter((c.algorithm, c.options) for r in rows for c in r.cells or [r])
    (algorithm, options), _ = votes.most_common(1)[0]
    return [(0, -1, algorithm, options)]


def _add(made: Deployment, collective: str, p: int, nodes: list[list[int]], low: int, high: int, algorithm: str,
         options: str) -> None:
    where = f"{collective} on {p} ranks, {span_text(low, high)}"
    schedule, layout = -1, "*"
    if algorithm != NATIVE:  # the library's own, in whichever form: its choice
        try:
            name, text, by_node = schedule_of(algorithm, options, p, nodes, collective)
            schedule, layout = made.schedule_for(name, text), layout_text(nodes, p) if by_node else "*"
        except (NotExact, A2AError) as why:
            made.kept.append(f"{where}: {shown(algorithm, options)} is not exact data ({why}); the library's "
                             "choice is kept")
    made.entries.append((collective, p, layout, low, high, schedule))


def span_text(low: int, high: int) -> str:
    """'100..999 B per peer', 'every size'."""
    return "every size" if (low, high) == (0, -1) else f"{low}..{'' if high < 0 else high} B per peer"


def origin_of(document: Decision, path: str) -> list[str]:
    """The 'from' lines: the decision and each record it read (commit, library)."""
    lines = [f"decision {path} (metric {document.metric}, created {document.created})"]
    for source in document.sources:
        library = (source.get("mpi_library") or "").splitlines()[:1]
        lines.append(f"record {source.get('directory')} (commit {source.get('git_commit')}, "
                     f"{library[0].strip() if library else 'library unknown'})")
    return lines


def written(made: Deployment, output: Path) -> list[str]:
    """Write the deploy file; what it serves, what it keeps for the library, and how to apply it."""
    write_atomic(Path(output), made.text())
    names = dict(enumerate(name for name, _ in made.schedules))
    lines = [f"{c} on {p} ranks{'' if layout == '*' else f' (nodes {layout})'}, {span_text(low, high)}: "
             f"{names.get(k, 'the library')}" for c, p, layout, low, high, k in made.entries]
    lines += [f"kept: {k}" for k in made.kept]
    lines += [f"unverified: {p} ranks, which the decision never measured: the table of {measured} ranks serves them"
              for p, measured in made.unverified]
    entries = f"{len(made.entries)} {'entry' if len(made.entries) == 1 else 'entries'}"
    entries += f", {counted(len(made.learning), 'learn line')}" if made.learning else ""
    return lines + [f"wrote {output} ({counted(len(made.schedules), 'schedule')}, {entries}, for {made.library})"]


def this_library() -> str:
    """The MPI library mpi4py runs on, as a deploy file names it."""
    return family(library_version())


def deploy(decisions: list[Path], nprocs: list[int], ranks_per_node: int, output: Path,
           extrapolate: bool = False) -> list[str]:
    """`bench deploy`: the deploy file for decision tables (bench decide -o), or records' decisions, on jobs of
    these process counts; each collective and process count decided once among them."""
    if ranks_per_node < 0:
        raise BadInput(f"--ranks-per-node {ranks_per_node}; accepted: 0 (all ranks on one node) or K >= 1")
    if not Path(output).resolve().parent.is_dir():
        raise BadInput(f"--output {output}: its directory does not exist")
    tables: list[Table] = []
    origin: list[str] = []
    libraries: dict[str, str] = {}
    for path in map(Path, decisions):
        document = decide([path]) if path.is_dir() else read_decision(path)
        tables += document.tables
        origin += origin_of(document, str(path))
        libraries.update((name, str(path)) for name in families(document) if name not in libraries)
    _check_once(tables)
    library, said = _one_library(libraries)
    counts = nprocs or sorted({t.nprocs for t in tables})
    return said + written(_served(tables, counts, ranks_per_node, library, origin, extrapolate), output)


def families(document: Decision) -> list[str]:
    """The MPI library families the decision was measured with, as liba2a names them (its own `mpi_library` and each
    record's); none where it names no library (a decision made by hand)."""
    texts = document.mpi_library if isinstance(document.mpi_library, list) else [document.mpi_library or ""]
    texts += [source.get("mpi_library") or "" for source in document.sources]
    return sorted({family(text) for text in texts if text.strip()})


def _one_library(libraries: dict[str, str]) -> tuple[str, list[str]]:
    """The family the file is for (the decisions' own; none named: this Python's, said in a line); BadInput for two."""
    if len(libraries) > 1:
        (one, there), (other, here) = sorted(libraries.items())[:2]
        raise BadInput(f"{there} was measured with {one}, but {here} with {other}: a deploy file serves the programs "
                       "of one MPI library (liba2a refuses another); deploy each library's decisions in a file of "
                       "its own")
    mine = this_library()
    if not libraries:
        return mine, [f"the decisions name no MPI library: the file is for this Python's, {mine}"]
    theirs = next(iter(libraries))
    return theirs, [] if theirs == mine else [
        f"the file is for {theirs}, whose programs need liba2a built by its compiler wrapper (python -m bench deploy "
        f"--library --mpicc PATH); this Python runs {mine}"]


def _check_once(tables: list[Table]) -> None:
    """BadInput if two tables decide the same blocking collective at the same process count."""
    keys = Counter((t.column("collective"), t.nprocs) for t in tables if t.column("timing") != OVERLAP)
    twice = [f"{c} on {p} ranks" for (c, p), n in sorted(keys.items()) if n > 1]
    if twice:
        raise BadInput(f"more than one table decides {', '.join(twice)} (another workload, mesh or source): give "
                       "one decision per collective and process count (bench decide --where COLUMN=VALUE)")


@dataclass(frozen=True)
class Learned:
    """A learned line: what liba2a's learner of one size class found (learn.h), as a run left it."""

    collective: str
    nprocs: int
    layout: str
    low: int
    high: int
    state: str  # exploring, chosen, kept, undecided, given-back
    choice: int  # the arm serving: 0 the library's own, k the learn line's k-th candidate
    calls: int
    explored: int  # calls that explored
    revisited: int  # calls that revisited the library after a choice (drift)
    cost: float  # seconds exploring cost beyond the library's time
    library: tuple[float, ...]  # the library's time per round (the slowest rank's)
    ratios: tuple[tuple[bool, tuple[float, ...]], ...]  # per candidate: still live, log(its time / library's)

    @classmethod
    def parse(cls, line: str) -> "Learned":
        """A learned line without its word (BadInput where it is not one liba2a writes)."""
        try:
            c, p, layout, low, high, state, choice, calls, explored, revisited, cost, *series = line.split()
            arms = [(word.split(":")[0] == "live", _values(word.split(":")[1])) for word in series]
            return cls(c, int(p), layout, int(low), int(high), state, int(choice), int(calls), int(explored),
                       int(revisited), float(cost), arms[0][1], tuple(arms[1:]))
        except (ValueError, IndexError):
            raise BadInput(f"learned line '{line[:60]}...' is not as liba2a writes it") from None

    def described(self, candidates: list[str]) -> str:
        """One line: the class, what serves it, what exploring cost, and the evidence for the choice."""
        library = statistics.median(self.library) if self.library else 0.0
        cost = (f"cost {self.cost / (library * self.calls):.1%} of the library's time" if library and self.calls else
                "cost not known yet (the library's own not timed in this class)")
        serving = "the library's own" if self.choice == 0 else candidates[self.choice - 1]
        evidence = ", ".join(f"{name} {math.exp(statistics.median(values)):.2f}x over {counted(len(values), 'round')}"
                             f"{'' if live else ' (dropped)'}" for name, (live, values)
                             in zip(candidates, self.ratios) if values)
        return (f"{self.collective} on {self.nprocs} ranks, {span_text(self.low, self.high)}: {self.state}, "
                f"{serving} serves; {self.calls} calls, {self.explored} exploring, {self.revisited} revisiting, "
                f"{cost} ({evidence or 'no rounds yet'})")


def _values(text: str) -> tuple[float, ...]:
    return () if text == "-" else tuple(float(v) for v in text.split(","))


def shown_file(path: Path) -> list[str]:
    """`bench deploy --show`: what a deploy file serves, learns and learned, where it came from, how verified."""
    made = Deployment.read(path)
    names = dict(enumerate(name for name, _ in made.schedules))
    lines = [f"{path}: for {made.library}", *(f"  from {o}" for o in made.origin)]
    lines += [f"  {c} on {p} ranks{'' if layout == '*' else f' (nodes {layout})'}, {span_text(low, high)}: "
              f"{names.get(k, 'the library')}" for c, p, layout, low, high, k in made.entries]
    for c, p, layout, low, high, candidates in made.learning:
        named = [names.get(k, "control") for k in candidates]
        lines.append(f"  {c} on {p} ranks{'' if layout == '*' else f' (nodes {layout})'}, {span_text(low, high)}: "
                     f"learns among the library's own, {', '.join(named)}")
        lines += [f"    learned: {found.described(named)}" for found in map(Learned.parse, made.learned)
                  if (found.collective, found.nprocs, found.layout) == (c, p, layout) and low <= found.low
                  and (high < 0 or found.low <= high)]
    lines += [f"  unverified: {p} ranks (the table of {measured} ranks)" for p, measured in made.unverified]
    if not made.verification:
        return [*lines, "  not verified (bench tune --deploy verifies a file on this machine before use)"]
    return [*lines, "verification:", *(f"  {line}" for line in made.verification)]


def served_by(made: Deployment, collective: str, nprocs: int, size: int) -> str:
    """What the file runs for a call of `size` bytes per peer: a schedule's name, or 'the library'."""
    for c, p, _, low, high, k in made.entries:
        if (c, p) == (collective, nprocs) and low <= size and (high < 0 or size <= high):
            return made.schedules[k][0] if k >= 0 else "the library"
    return "the library"
