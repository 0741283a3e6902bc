"""What every exporter shares: a decision table translated into the library's choices per byte range.

Each algorithm names its twins in the libraries in its own file (register's `twins`); a cell
whose algorithm has none in a library gets the best measured algorithm that has one, with a
warning that names the cell and its cost. Cells then merge into byte ranges again.
"""
from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.algos.facts import library_own, shown, twin
from a2a.algos.registry import with_defaults
from a2a.errors import BadInput
from a2a.mpilib import tuning_file
from a2a.record.decision import Cell, Contender, Decision, Range, as_decision, lower_bounds, parse_options
from a2a.record.results import NATIVE

Counterpart = Callable[[str, dict[str, str], int], Hashable | None]  # (algorithm, options, nprocs) -> target


def counterpart(library: str, collective: str = "alltoall") -> Counterpart:
    """The library's own algorithm for one of ours: the twin its file names (None: it has none)."""
    return lambda algorithm, options, nprocs: twin(algorithm, collective, library, options, nprocs)


@dataclass
class Exported:
    """A tuning file's text, the environment that applies it, and what was lost on the way."""

    text: str
    environment: Callable[[str], dict[str, str]]  # file path -> variables that apply the file
    warnings: list[str] = field(default_factory=list)
    note: str = ""  # how else to apply it, or what the variables also change

    def apply(self, path: str | None) -> str:
        """The shell line that applies the file at `path` (and the note, if any); None: a file not written, whose
        variables do not name it (the note that needs its path left out)."""
        variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.environment(path or "").items())
        note = self.note if path is not None or "{path}" not in self.note else ""
        return f"export {variables}" + (f"\n  {note.format(path=path)}" if note else "")


@dataclass(frozen=True)
class Segment:
    """Bytes per peer from `low` to `high` (None: no limit) use the library's `target`."""

    low: int
    high: int | None
    target: Hashable


def translate(document: Decision | Mapping[str, Any], counterpart: Counterpart, library: str
              ) -> tuple[list[tuple[int, list[Segment]]], list[str]]:
    """Per process count, the library's choice for every byte range; plus the warnings."""
    document = as_decision(document)
    _check_context(document)
    warnings: list[str] = []
    tables = []
    for table in sorted(document.tables, key=lambda t: t.nprocs):
        nprocs = table.nprocs
        units = [unit for row in table.ranges for unit in _units(row)]
        targets = [(low, _target(cell, nprocs, counterpart, library, warnings, document.metric)) for low, cell in units]
        tables.append((nprocs, _segments(targets)))
    return tables, warnings


def collective_of(document: Decision, fmt: str) -> str:
    """The table's one collective (ialltoall for an overlap record's); BadInput if the tuning file of format `fmt`
    does not select it."""
    _check_context(document)
    first = document.tables[0]
    collective = first.column("collective")
    if first.column("timing") == "overlap":
        collective = f"i{collective}"
    profile, file = tuning_file(fmt)
    if collective not in file.collectives:
        why = f"; {profile.no_ialltoall}" if collective.startswith("i") and profile.no_ialltoall else ""
        raise BadInput(f"the table decides {collective}; this {profile.name} export covers "
                       f"{' and '.join(file.collectives)} (--format {fmt}{why})")
    return collective


def translate_by_comm_size(document: Decision, counterpart: Counterpart, library: str
                           ) -> tuple[list[tuple[int, tuple]], list[str]]:
    """One choice per process count, for libraries that pick alltoallv by communicator size alone.

    The choice is the one most measured sizes of that count made; a warning names the others.
    """
    tables, warnings = translate(document, counterpart, library)
    chosen = []
    for (nprocs, segments), table in zip(tables, sorted(document.tables, key=lambda t: t.nprocs)):
        sizes = [low for row in table.ranges for low, _ in _units(row)]
        votes = Counter(next(s.target for s in reversed(segments) if s.low <= size) for size in sizes)
        target = max(votes, key=lambda t: votes[t])
        assert isinstance(target, tuple)  # MPICH's and Open MPI's twins are (algorithm, its parameters...)
        if len(votes) > 1:
            used = "its own selection ('ignore')" if target[0] in ("ignore", 0) else f"its {target[0]}"
            warnings.append(f"{nprocs} ranks: {library} picks its alltoallv algorithm by communicator size "
                            f"only; using {used} (the choice at {votes[target]} of {len(sizes)} "
                            "measured sizes) at every size")
        chosen.append((nprocs, target))
    return chosen, warnings


def _units(row: Range) -> list[tuple[int, Cell]]:
    """(first byte, cell) for each measured cell of a range; a range without cells is one unit."""
    cells = row.cells or (Cell(row.bytes_min, row.algorithm, row.options, 0.0),)
    lows = [row.bytes_min] + lower_bounds([c.bytes_per_peer for c in cells])[1:]
    return list(zip(lows, cells))


def _target(cell: Cell, nprocs: int, counterpart: Counterpart, library: str, warnings: list[str],
            metric: str) -> Hashable:
    found = counterpart(cell.algorithm, with_defaults(cell.algorithm, parse_options(cell.options)), nprocs)
    if found is not None:
        return found
    where = f"{nprocs} ranks, {cell.bytes_per_peer} B/peer"
    for candidate in cell.candidates:
        options = with_defaults(candidate.algorithm, parse_options(candidate.options))
        found = counterpart(candidate.algorithm, options, nprocs)
        if found is not None:
            warnings.append(f"{where}: {shown(cell.algorithm, cell.options)} has no {library} counterpart; "
                            f"{_substitution(cell, candidate, metric)}")
            return found
    warnings.append(f"{where}: no measured algorithm has a {library} counterpart; "
                    f"leaving it to {library}'s default")
    return counterpart(NATIVE, {}, nprocs)


def _substitution(cell: Cell, substitute: Contender, metric: str) -> str:
    """What taking `substitute` for the cell's choice costs: its time over the choice's as the verdicts measured it
    (the choice rests on them, not on the metric over all calls, which one stalled round can swamp), and both times
    in the metric."""
    chosen, instead = shown(cell.algorithm, cell.options), shown(substitute.algorithm, substitute.options)
    judged = _judged_ratio(cell, substitute)
    if judged is not None:
        ratio, basis = judged, "median of per-round ratios; "
    else:
        ratio, basis = (substitute.value_us / cell.value_us if cell.value_us > 0 else 1.0), ""
    against = f"{ratio:.2f}x slower than" if ratio >= 1 else f"{1 / ratio:.2f}x faster than"
    what = "predicted" if cell.predicted else f"{metric} over all calls"
    return (f"using {instead} instead, {against} {chosen} ({basis}{what}: {instead} {substitute.value_us:.1f} us, "
            f"{chosen} {cell.value_us:.1f} us)")


def _judged_ratio(cell: Cell, substitute: Contender) -> float | None:
    """The substitute's time over the choice's from their verdicts against the cell's best, the one candidate
    without one (medians of per-round ratios; exact where the choice is the best); None for a cell not judged by
    them (no interleaved rounds: a record made before them, a table of schema /1 or predicted)."""
    chosen = [c for c in cell.candidates if (c.algorithm, c.options) == (cell.algorithm, cell.options)]
    if not cell.rounds or len(chosen) != 1 or sum(c.vs_best is None for c in cell.candidates) != 1:
        return None
    substitute_ratio, chosen_ratio = (1.0 if c.vs_best is None else c.vs_best.ratio for c in (substitute, chosen[0]))
    return substitute_ratio / chosen_ratio


def library_only(document: Decision | Mapping[str, Any]) -> bool:
    """Whether a decision leaves every size range of every process count to the library's own all-to-all."""
    return all(library_own(row.algorithm, row.options, table.column("timing"))
               for table in as_decision(document).tables for row in table.ranges)


def _segments(targets: list[tuple[int, Hashable]]) -> list[Segment]:
    merged: list[list[Any]] = []
    for low, target in targets:
        if merged and merged[-1][2] == target:
            continue
        if merged:
            merged[-1][1] = low - 1
        merged.append([low, None, target])
    return [Segment(*m) for m in merged]


def _check_context(document: Decision) -> None:
    for column in document.context_columns:
        if column == "nprocs":
            continue
        values = sorted({t.column(column) for t in document.tables})
        if len(values) > 1:
            raise BadInput(f"the table has several {column} values ({values}); MPI libraries choose by "
                           f"process count and size only: decide one {column} at a time "
                           f"(bench decide --where {column}=VALUE)")
