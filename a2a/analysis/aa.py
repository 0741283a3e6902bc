"""The A/A self-check: one schedule under several names (an algorithm and its controls) must not be called
different. `bench run --aa` sweeps native and pairwise beside twins of themselves and prints this check."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from a2a.analysis.decide import Candidate, gather
from a2a.record import verdict
from a2a.record.decision import controls_native, parse_options
from a2a.record.results import CONTROL, NATIVE, label


@dataclass(frozen=True)
class AACheck:
    """How many twin comparisons the verdicts called different, of how many they could test, in how many cells."""

    called: int
    tested: int
    cells: int

    @property
    def passed(self) -> bool:
        """At most 5 % of the tested comparisons called different (the family-wise rate the verdicts promise)."""
        return self.called <= 0.05 * self.tested

    def line(self) -> str:
        """The check in words."""
        share = f" ({100 * self.called / self.tested:.0f} %)" if self.tested else ""
        said = "passed" if self.passed else "FAILED: this machine's noise is beyond what the statistics assume"
        return (f"A/A: {self.called} of {self.tested} comparisons of one schedule under two names called different"
                f"{share} in {self.cells} cells; at most 5 % allowed: {said}")


def schedule_of(point: Candidate) -> tuple[str, str]:
    """What a point runs, whatever its name: (algorithm, native's form), a control's `of` for its algorithm."""
    options = parse_options(point.options)
    runs = options.get("of", NATIVE) if point.algorithm == CONTROL else point.algorithm
    return runs, options.get("form", "") if runs == NATIVE else ""


def aa_check(directories: list[Path], metric: str = "mean", margin: float = verdict.MARGIN,
             alpha: float = verdict.ALPHA) -> AACheck:
    """The A/A self-check of the records: in every cell, each set of twins of an algorithm judged as a decision
    judges its candidates (verdict.twins_called_different, against the larger of the margin and the cell's noise
    floor); native and its control are that floor, not a test of it."""
    points, _, _ = gather(directories)
    cells: dict[tuple, dict[tuple[str, str], list[Candidate]]] = {}
    for point in points.values():
        cells.setdefault((point.context, point.bytes_per_peer), {}).setdefault(schedule_of(point), []).append(point)
    called = tested = judged = 0
    for groups in cells.values():
        floor = _floor(groups, metric)
        twins = [group for runs, group in groups.items() if len(group) > 1 and runs[0] != NATIVE]
        for group in twins:
            found = verdict.twins_called_different({label(p.algorithm, p.options): p.per_round(metric)
                                                    for p in group}, margin, alpha, floor)
            called, tested = called + found[0], tested + found[1]
        judged += bool(twins)
    return AACheck(called, tested, judged)


def _floor(groups: dict[tuple[str, str], list[Candidate]], metric: str) -> float | None:
    """The cell's noise floor: its control of native against native (None without both)."""
    points = [p for group in groups.values() for p in group]
    native = next((p for p in points if p.algorithm == NATIVE), None)
    if native is None:
        return None
    control = next((p for p in points if controls_native(p.algorithm, p.options, native.options)), None)
    return verdict.noise_floor(control.per_round(metric), native.per_round(metric)) if control else None
