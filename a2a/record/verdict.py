"""Verdicts: whether one algorithm is faster than another, judged on the unit the machine varies by. Imports numpy.

The sweep measures a cell's candidates in interleaved rounds: each round visits every candidate once, in a fresh
order, so load that comes and goes falls on every candidate of a round alike. Hence:

- a candidate's per-round value is the metric (mean, median, p90, p99, max) over its samples of one (launch, round);
- two candidates are compared by the log of the ratio of their per-round values, paired within (launch, round); the
  effect is the median of those log ratios (a burst that hits one visit moves it little), reported as a ratio with
  an interval from a two-stage bootstrap: launches with replacement, then rounds within each drawn launch (with
  one launch, rounds only: the interval then holds for that launch);
- a difference counts only beyond the margin (5 % by default) or the cell's noise floor, whichever is larger (the
  floor: what `control`, the library's own under a second name, differs from `native` by);
- a cell's comparisons (every candidate against the cell's best and against native) are one family, corrected
  with Holm: a comparison's p is the bootstrap mass that does not clear the margin (twice the smaller side's),
  and "faster" or "slower" needs its Holm-adjusted p below alpha and its interval, at its Holm level, wholly
  beyond the margin; anything else is a tie;
- fewer than 3 paired rounds (a record written before rounds has none: each launch is one block) is untested;
- across launches (compare, tune's verification), a launch is the unit, since a launch is what a tuning changes:
  fewer than 3 launches a side is described and untested, launches that ran in pairs of neighbours are paired
  and judged by the exact sign test (6 pairs or more at alpha 0.05; compare --launches runs half the pairs tuned
  side first, so load in step with the launches favours neither);
- 0 B, and times below the timer's floor, are shown and never judged.

Hoefler and Belli, SC'15; Hunold and Carpen-Amarie (ReproMPI); Holm, 1979. docs/decide.md has the rules.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import combinations
from typing import Any, TypeVar

import numpy as np

METRICS = ("mean", "median", "p90", "p99", "max")
MARGIN = 0.05  # the smallest difference worth a verdict
ALPHA = 0.05  # the family-wise error rate of a cell's verdicts
RESAMPLES = 2000  # bootstrap resamples of each comparison
SEED = 65  # of the resampling: the same record always gets the same verdicts
MIN_ROUNDS = 3  # paired rounds below which a comparison is untested
RESOLUTION = 1e-9  # seconds: the least per-round value, a time no timer resolves
MIN_LAUNCHES = 3  # launches a side below which a comparison across launches is described, not judged
FASTER, SLOWER, TIE, UNTESTED = "faster", "slower", "tie", "untested"
NOT_JUDGED = "not judged"  # shown, never judged: 0 B, or times below the timer's floor (unjudged_why)
ROUNDS, LAUNCHES = "rounds", "launches"  # units of a comparison across launches
LAUNCH_PAIRS = "launch pairs"  # the unit of launches that alternated: each with its neighbour

Sample = tuple[str, int, float]  # (launch, round, seconds); round -1: a record written before rounds
Unit = tuple[str, int]  # (launch, round)
Values = dict[Unit, float]  # a candidate's per-round values
K = TypeVar("K", bound=Hashable)  # what names a comparison of a family


def metric_of(seconds: np.ndarray, metric: str) -> float:
    """mean, median, p90, p99 or max of samples."""
    if metric == "mean":
        return float(seconds.mean())
    if metric == "max":
        return float(seconds.max())
    return float(np.percentile(seconds, {"median": 50, "p90": 90, "p99": 99}[metric]))


def per_round(samples: Iterable[Sample], metric: str) -> Values:
    """The metric over each (launch, round)'s samples, at least RESOLUTION (an overlap point's exposed time, overall
    less compute, can be 0 or below, and a ratio needs a positive time)."""
    grouped: dict[Unit, list[float]] = {}
    for launch, round_, seconds in samples:
        grouped.setdefault((launch, round_), []).append(seconds)
    return {unit: max(metric_of(np.asarray(found), metric), RESOLUTION) for unit, found in grouped.items()}


def level(values: Values) -> float:
    """Where a candidate stands in its cell: the median of its per-round values (the best has the lowest)."""
    return float(np.median(list(values.values()))) if values else math.nan


@dataclass(frozen=True)
class Comparison:
    """One candidate against another: its time over the other's (`ratio`, below 1: faster), the interval, the p of
    a difference beyond the margin (Holm-adjusted within a cell), the verdict, and what it rests on."""

    ratio: float
    low: float | None
    high: float | None
    p: float | None
    verdict: str
    rounds: int
    launches: int

    def flipped(self) -> Comparison:
        """The other candidate against this one."""
        swapped = {FASTER: SLOWER, SLOWER: FASTER}.get(self.verdict, self.verdict)
        return replace(self, ratio=1 / self.ratio, low=_inverse(self.high), high=_inverse(self.low), verdict=swapped)

    def as_dict(self) -> dict[str, Any]:
        """ratio, low, high, verdict, p, six significant digits."""
        return {"ratio": _six(self.ratio), "low": _six(self.low), "high": _six(self.high), "verdict": self.verdict,
                "p": _six(self.p)}


def _inverse(value: float | None) -> float | None:
    return None if value is None else 1 / value


def _six(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(f"{value:.6g}")


@dataclass(frozen=True)
class Evidence:
    """A paired comparison before any verdict: the median log ratio and its bootstrap resamples."""

    estimate: float
    resampled: np.ndarray
    rounds: int
    launches: int


def evidence(a: Values, b: Values, draws: Callable[[tuple[Unit, ...]], np.ndarray] | None = None) -> Evidence | None:
    """a against b, paired within the (launch, round)s both have, resampled by `draws` (of those units; default:
    RESAMPLES two-stage draws); None below MIN_ROUNDS paired rounds."""
    units, logs = paired_logs(a, b)
    if len(units) < MIN_ROUNDS:
        return None
    resampled = resampled_medians(logs, (draws or two_stage_draws)(units))
    return Evidence(float(np.median(logs)), resampled, len(units), len({u[0] for u in units}))


def paired_logs(a: Values, b: Values) -> tuple[tuple[Unit, ...], np.ndarray]:
    """The (launch, round)s both have (rounds only, not blocks), and the log of a's value over b's in each."""
    units = tuple(sorted(u for u in a.keys() & b.keys() if u[1] >= 0))
    return units, np.log([a[u] / b[u] for u in units])


def two_stage_draws(units: tuple[Unit, ...], resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """Bootstrap resamples of units in two stages, launches with replacement, then as many rounds as each drawn
    launch has, with replacement within it (one launch: its rounds alone), as how often each unit is drawn in each
    resample (resamples x units)."""
    rng = np.random.default_rng(seed)
    _, launch_of = np.unique([u[0] for u in units], return_inverse=True)
    sizes = np.bincount(launch_of)
    if sizes.size == 1:
        picked = rng.integers(0, len(units), (resamples, len(units)))
    else:
        members = np.full((sizes.size, sizes.max() + 1), -1)  # each launch's units, padded; the last column stays -1
        for g in range(sizes.size):
            members[g, :sizes[g]] = np.flatnonzero(launch_of == g)
        drawn = rng.integers(0, sizes.size, (resamples, sizes.size))
        counts = sizes[drawn][..., None]
        position = (rng.random((*drawn.shape, sizes.max())) * counts).astype(int)
        position[np.arange(sizes.max()) >= counts] = sizes.max()  # past a smaller launch's rounds: no draw
        picked = members[drawn[..., None], position].reshape(resamples, -1)
    flat = (picked + len(units) * np.arange(resamples)[:, None])[picked >= 0]
    return np.bincount(flat, minlength=resamples * len(units)).reshape(resamples, len(units))


def resampled_medians(values: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """The median of each resample of `values`, given as how often each value is drawn (two_stage_draws): read off
    the running counts in the values' order, without sorting each resample."""
    order = np.argsort(values, kind="stable")
    running = np.cumsum(drawn[:, order], axis=1)
    total = running[:, -1:]
    low, high = ((running <= middle).sum(axis=1) for middle in ((total - 1) // 2, total // 2))
    return (values[order][low] + values[order][high]) / 2


def p_beyond(resampled: np.ndarray, bound: float) -> float:
    """Two-sided p of a log ratio beyond +-bound: twice the smaller mass that does not clear it, at most 1."""
    return min(1.0, 2 * min(float(np.mean(resampled <= bound)), float(np.mean(resampled >= -bound))))


def holm(ps: list[float], alpha: float = ALPHA) -> tuple[list[float], list[float]]:
    """Holm's step-down adjustment of a family's p-values, and each test's level (alpha over the tests not yet
    rejected when it is reached)."""
    order = np.argsort(ps, kind="stable")
    adjusted, levels, running = [1.0] * len(ps), [alpha] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        adjusted[i], levels[i] = running, alpha / (len(ps) - rank)
    return adjusted, levels


def judged(found: Evidence, p: float, test_level: float, bound: float, alpha: float = ALPHA) -> Comparison:
    """The verdict on evidence: faster or slower when the adjusted p is below alpha and the interval at the test's
    level lies wholly beyond the bound (a log ratio); a tie otherwise."""
    low, high = np.quantile(found.resampled, [test_level / 2, 1 - test_level / 2])
    verdict = TIE if p >= alpha else FASTER if high < -bound else SLOWER if low > bound else TIE
    return Comparison(math.exp(found.estimate), math.exp(low), math.exp(high), p, verdict, found.rounds,
                      found.launches)


def untested(a: Values, b: Values) -> Comparison:
    """No verdict: the ratio of the two levels, no interval."""
    paired = sum(u in b for u in a if u[1] >= 0)
    return Comparison(level(a) / level(b), None, None, None, UNTESTED, paired, len({u[0] for u in (*a, *b)}))


def bound_of(margin: float, floor: float | None) -> float:
    """The log ratio a verdict must clear: the margin's, or the noise floor's where that is larger."""
    return max(math.log1p(margin), abs(math.log(floor)) if floor else 0.0)


def family(pairs: dict[K, tuple[Values, Values]], bound: float, alpha: float = ALPHA) -> dict[K, Comparison]:
    """Judge a family of comparisons (name -> (a, b)) with Holm's correction over those tested."""
    drawn: dict[tuple[Unit, ...], np.ndarray] = {}  # the same units draw the same resamples: drawn once

    def draws(units: tuple[Unit, ...]) -> np.ndarray:
        return drawn[units] if units in drawn else drawn.setdefault(units, two_stage_draws(units))

    found = {name: evidence(a, b, draws) for name, (a, b) in pairs.items()}
    tested = {name: e for name, e in found.items() if e is not None}
    adjusted, levels = holm([p_beyond(e.resampled, bound) for e in tested.values()], alpha)
    judged_ = {name: judged(e, p, at, bound, alpha) for (name, e), p, at in zip(tested.items(), adjusted, levels)}
    return {name: judged_.get(name) or untested(*pairs[name]) for name in pairs}


def noise_floor(control: Values | None, native: Values | None) -> float | None:
    """control's time over native's, the median of their paired per-round ratios (None below MIN_ROUNDS)."""
    units, logs = paired_logs(control or {}, native or {})
    return math.exp(float(np.median(logs))) if len(units) >= MIN_ROUNDS else None


@dataclass(frozen=True)
class CellVerdict:
    """A cell judged: its best, its choice and what the choice is within noise of, every candidate against the best
    and against native, the noise floor, and the rounds every candidate shares and the launches."""

    best: Hashable
    choice: Hashable
    tied_with: list[Hashable]
    vs_best: dict[Hashable, Comparison]
    vs_native: dict[Hashable, Comparison]
    floor: float | None
    rounds: int
    launches: int


def judge_cell(values: dict[Hashable, Values], native: Hashable | None, prefer: Callable[[Hashable], Any],
               control: Values | None = None, margin: float = MARGIN, alpha: float = ALPHA) -> CellVerdict:
    """Choose among a cell's candidates (name -> per-round values): native unless some candidate is faster than it;
    then, of those faster than native and not slower than the best, the first by `prefer` (ties keep the simplest)."""
    best = min(values, key=lambda k: (level(values[k]), prefer(k)))
    floor = noise_floor(control, values.get(native)) if native is not None else None
    wanted = [(k, best) for k in values if k != best] + [(k, native) for k in values if native not in (None, k)]
    pairs = {}
    for a, b in wanted:
        if (b, a) not in pairs:
            pairs[a, b] = (values[a], values[b])
    judged_ = family(pairs, bound_of(margin, floor), alpha)

    def against(a: Hashable, b: Hashable) -> Comparison:
        return judged_[a, b] if (a, b) in judged_ else judged_[b, a].flipped()

    vs_best = {k: against(k, best) for k in values if k != best}
    vs_native = {k: against(k, native) for k in values if native not in (None, k)}
    choice, tied = chosen(values, best, native, vs_best, vs_native, prefer)
    shared = set.intersection(*({u for u in v if u[1] >= 0} for v in values.values()))
    return CellVerdict(best, choice, tied, vs_best, vs_native, floor, len(shared),
                       len({u[0] for v in values.values() for u in v}))


def chosen(values: dict[Hashable, Values], best: Hashable, native: Hashable | None, vs_best: dict[Hashable, Comparison],
           vs_native: dict[Hashable, Comparison], prefer: Callable[[Hashable], Any]) -> tuple[Hashable, list[Hashable]]:
    """The cell's choice and the candidates within noise of it (tested ties only)."""
    faster = [k for k, c in vs_native.items() if c.verdict == FASTER] if native is not None else list(values)
    if not faster:
        return native, [k for k, c in vs_native.items() if c.verdict == TIE]
    near = [k for k in faster if k == best or vs_best[k].verdict == TIE]
    if not near:  # the best is not among them and none ties it: the fastest of them
        return min(faster, key=lambda k: (level(values[k]), prefer(k))), []
    choice = min(near, key=prefer)
    return choice, [k for k in near if k != choice]


def twins_called_different(twins: dict[Hashable, Values], margin: float = MARGIN, alpha: float = ALPHA,
                           floor: float | None = None) -> tuple[int, int]:
    """The A/A self-check of one cell: of the tested pairs of twins (one schedule under several names), how many
    are called faster or slower, Holm over the cell's twin pairs; (called, tested)."""
    pairs = {(a, b): (twins[a], twins[b]) for a, b in combinations(sorted(twins, key=str), 2)}
    found = family(pairs, bound_of(margin, floor), alpha).values()
    return sum(c.verdict in (FASTER, SLOWER) for c in found), sum(c.verdict != UNTESTED for c in found)


def across_launches(before: Values, after: Values, margin: float = MARGIN, alpha: float = ALPHA,
                    resamples: int = RESAMPLES, seed: int = SEED) -> tuple[Comparison, str, str]:
    """One algorithm across two sets of launches, after against before: the comparison, the unit compared, and why it
    carries no verdict ('' where it may). A launch is what a tuning changes, so it is the unit: with MIN_LAUNCHES or
    more a side, pairs of neighbouring launches where they ran so (their stamps say), judged by the sign test
    (paired_launches), else the launches of each side unpaired (a launch's value: the median of its per-round
    values); with fewer, the ratio and interval over rounds, described and untested."""
    names = [launches_of(side) for side in (before, after)]
    if min(len(found) for found in names) < MIN_LAUNCHES:
        return described(before, after, resamples, seed), ROUNDS, too_few_launches(min(map(len, names)))
    levels = [{name: level({u: v for u, v in side.items() if u[0] == name}) for name in found}
              for side, found in zip((before, after), names)]
    pairs = alternated(names[0], names[1])
    if pairs:
        logs = np.log([levels[1][new] / levels[0][old] for old, new in pairs])
        found = paired_launches(logs, bound_of(margin, None), alpha)
        why = "" if found.verdict != UNTESTED else too_few_pairs(len(pairs), alpha)
        return found, LAUNCH_PAIRS, why
    evidence_ = _bootstrapped([np.array(list(side.values())) for side in levels], resamples, seed)
    bound = bound_of(margin, None)
    return replace(judged(evidence_, p_beyond(evidence_.resampled, bound), alpha, bound, alpha),
                   launches=sum(map(len, names))), LAUNCHES, ""


def paired_launches(logs: np.ndarray, bound: float, alpha: float = ALPHA) -> Comparison:
    """Pairs of launches judged by the sign test, exact and free of any distribution (a launch's time has heavy
    tails: on a shared machine one launch of a pair may run 1000x slower): the median log ratio, the interval of
    order statistics that covers the median with at least 1 - alpha, and the two-sided binomial p of the pairs
    beyond the bound on one side; faster or slower where that interval lies wholly beyond the bound. Fewer pairs
    than least_pairs(alpha) can never show a difference: untested, the interval their range."""
    ordered, n = np.sort(logs), logs.size
    k = _covering_rank(n, alpha)
    if k == 0:
        return Comparison(math.exp(float(np.median(logs))), math.exp(ordered[0]), math.exp(ordered[-1]), None,
                          UNTESTED, n, 2 * n)
    low, high = float(ordered[k - 1]), float(ordered[n - k])
    beyond = max(int(np.sum(logs > bound)), int(np.sum(logs < -bound)))
    p = min(1.0, 2 * sum(math.comb(n, j) for j in range(beyond, n + 1)) / 2 ** n)
    verdict = SLOWER if low > bound else FASTER if high < -bound else TIE
    return Comparison(math.exp(float(np.median(logs))), math.exp(low), math.exp(high), p, verdict, n, 2 * n)


def _covering_rank(n: int, alpha: float) -> int:
    """The largest k with 2 P(Binomial(n, 1/2) < k) <= alpha: the k-th smallest and k-th largest of n values bound
    their median with at least 1 - alpha; 0 where no k does."""
    k, tail = 0, 0.0
    while k < n and 2 * (tail + math.comb(n, k) / 2 ** n) <= alpha:
        tail, k = tail + math.comb(n, k) / 2 ** n, k + 1
    return k


def least_pairs(alpha: float = ALPHA) -> int:
    """The fewest pairs of launches the sign test can call different at alpha (6 at 0.05)."""
    return next(n for n in range(1, 64) if _covering_rank(n, alpha) > 0)


def too_few_pairs(pairs: int, alpha: float = ALPHA) -> str:
    """Why pairs of launches are untested, in words."""
    return (f"{pairs} pairs of launches: fewer than {least_pairs(alpha)} cannot show a difference at alpha {alpha:g} "
            f"by the sign test; run {least_pairs(alpha)} or more")


def launches_of(values: Values) -> list[str]:
    """The launches a side's values come from, in order."""
    return sorted({u[0] for u in values})


def alternated(before: list[str], after: list[str]) -> list[tuple[str, str]]:
    """Where launches stamped with their start times ran in pairs of neighbours (as many a side; in time order the
    1st and 2nd are one of each side, the 3rd and 4th, ..., either side first), those pairs as (before's, after's);
    [] where they did not or a name is not a time."""
    try:
        timed = sorted([(datetime.fromisoformat(n), 0, n) for n in before]
                       + [(datetime.fromisoformat(n), 1, n) for n in after])
    except (TypeError, ValueError):
        return []
    neighbours = [sorted((timed[k][1:], timed[k + 1][1:])) for k in range(0, len(timed) - 1, 2)]
    if len(before) != len(after) or any(x[0] == y[0] for x, y in neighbours):
        return []
    return [(x[1], y[1]) for x, y in neighbours]


def pair_orders(pairs: int, seed: int = SEED) -> list[bool]:
    """For alternating launches in pairs, whether the k-th pair runs the tuned side first: half the pairs each way,
    in a seeded order, so that load which comes and goes in step with the launches favours neither side."""
    firsts = [k < pairs // 2 for k in range(pairs)]
    return [firsts[k] for k in np.random.default_rng(seed).permutation(pairs)]


def described(before: Values, after: Values, resamples: int = RESAMPLES, seed: int = SEED) -> Comparison:
    """Too few launches a side for a verdict: the ratio of the medians of the rounds, with an interval from
    resampling the rounds of each side (it holds for these launches only), untested; without rounds, no interval."""
    sides = [np.array([v for u, v in side.items() if u[1] >= 0]) for side in (before, after)]
    if min(s.size for s in sides) < MIN_ROUNDS:
        return untested(after, before)
    found = _bootstrapped(sides, resamples, seed)
    low, high = np.quantile(found.resampled, [ALPHA / 2, 1 - ALPHA / 2])
    return Comparison(math.exp(found.estimate), math.exp(low), math.exp(high), None, UNTESTED, found.rounds,
                      len({u[0] for u in (*before, *after)}))


def _bootstrapped(sides: list[np.ndarray], resamples: int, seed: int) -> Evidence:
    """The second side's median over the first's, as a log, with each side's values resampled apart."""
    rng = np.random.default_rng(seed)
    logs = [np.log(s) for s in sides]
    medians = [np.median(v[rng.integers(0, v.size, (resamples, v.size))], axis=1) for v in logs]
    return Evidence(float(np.median(logs[1]) - np.median(logs[0])), medians[1] - medians[0],
                    min(s.size for s in sides), 0)


def too_few_launches(launches: int) -> str:
    """Why a comparison across launches is untested, in words."""
    said = "one launch" if launches == 1 else f"{launches} launches"
    return (f"{said} a side: a launch is the unit a tuning changes; run {MIN_LAUNCHES} or more a side, "
            "alternating")


def unjudged_why(bytes_per_peer: int, times: Iterable[float], floor: float = 0.0) -> str:
    """Why a size is shown and never judged ('' where it is judged): 0 B moves nothing and always goes to the
    library; a time (seconds) below the floor (the timer's resolution, or what an empty timed call took) is the
    timer's, not the call's."""
    if bytes_per_peer == 0:
        return "0 B: always the library's"
    least = min(times, default=math.inf)
    if least < max(floor, RESOLUTION):
        return f"{least * 1e6:.3g} us: below the timer's floor of {max(floor, RESOLUTION) * 1e6:.3g} us a call"
    return ""


def not_judged(found: Comparison) -> Comparison:
    """The comparison shown, its verdict withheld."""
    return replace(found, p=None, verdict=NOT_JUDGED)


def statistic(metric: str, alpha: float = ALPHA, margin: float = MARGIN, launches: int = 2, unit: str = "") -> str:
    """What every verdict printed rests on, in one line: paired (decide), or across launches on `unit` (compare)."""
    confidence, least = f"{100 * (1 - alpha):g} %", f"margin {100 * margin:g} %"
    if unit == LAUNCH_PAIRS:
        return (f"median of the ratios of neighbouring launches in pairs (each launch's median of its per-round "
                f"{metric}s), an interval of order statistics covering it with {confidence} or more and the sign "
                f"test's p, {least}")
    if unit == LAUNCHES:
        return f"ratio of the medians of per-launch {metric}s, {confidence} interval (bootstrap over launches), {least}"
    if unit:
        return (f"ratio of the medians of per-round {metric}s, {100 * (1 - ALPHA):g} % interval (bootstrap over "
                f"rounds), described only: fewer than {MIN_LAUNCHES} launches a side carry no verdict")
    where = "" if launches > 1 else "; one launch: the interval holds for this launch only"
    return (f"median of per-round {metric} ratios, {confidence} interval (two-stage bootstrap, Holm), {least} or the "
            f"cell's noise floor, whichever is larger{where}")
