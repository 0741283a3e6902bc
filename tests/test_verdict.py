"""a2a.record.verdict: the A/A test the old rule failed, power, Holm, the margin, the noise floor, the bootstrap."""
from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np
import pytest

from a2a.analysis.decide import mann_whitney_p
from a2a.record import verdict

BASE = 100e-6  # seconds
Cells = dict[Hashable, verdict.Values]  # a cell's candidates' per-round values


def load(rng: np.random.Generator, slots: int, per_round: int) -> np.ndarray:
    """The machine's load over `slots` visits in order: a slow drift, bursts that move whole rounds of `per_round`
    visits (a contiguous block of the old design sees them as one candidate's), and a rare burst on one visit."""
    drift = np.exp(np.linspace(0.0, rng.normal(0.0, 0.4), slots))
    rounds = slots // per_round
    whole = np.repeat(np.where(rng.random(rounds) < 0.2, rng.uniform(1.3, 2.0, rounds), 1.0), per_round)
    visit = np.where(rng.random(slots) < 0.05, rng.uniform(1.5, 3.0, slots), 1.0)
    return drift * whole * visit


def interleaved(rng: np.random.Generator, speeds: list[float], rounds: int = 10, samples: int = 3,
                noise: float = 0.05, loaded: bool = True) -> Cells:
    """Per-round mean times of candidates (their time factors `speeds`) visited in rounds, each in a fresh order."""
    n = len(speeds)
    machine = load(rng, rounds * n, n) if loaded else np.ones(rounds * n)
    values: Cells = {c: {} for c in range(n)}
    for r in range(rounds):
        for slot, c in enumerate(rng.permutation(n)):
            seconds = BASE * speeds[c] * machine[r * n + slot] * np.exp(rng.normal(0.0, noise, samples))
            values[c]["launch", r] = float(seconds.mean())
    return values


def blocks(rng: np.random.Generator, speeds: list[float], rounds: int = 10, samples: int = 3,
           noise: float = 0.05) -> list[np.ndarray]:
    """The same machine measured the old way: each candidate's iterations in one contiguous block."""
    n = len(speeds)
    machine = load(rng, rounds * n, n)
    return [np.concatenate([BASE * speeds[c] * machine[c * rounds + r] * np.exp(rng.normal(0.0, noise, samples))
                            for r in range(rounds)]) for c in range(n)]


def test_an_aa_test_of_three_twins_under_drift_and_bursts_passes_where_pooling_iterations_fails():
    """Three names for one schedule, 200 cells: the paired per-round verdict calls at most 5 % of twin pairs
    different; Mann-Whitney on the iterations of contiguous blocks (the old rule) calls most of them different."""
    rng = np.random.default_rng(2026)
    called = tested = old = 0
    for _ in range(200):
        k, n = verdict.twins_called_different(interleaved(rng, [1.0, 1.0, 1.0]))
        called, tested = called + k, tested + n
        timed = blocks(rng, [1.0, 1.0, 1.0])
        old += sum(mann_whitney_p(timed[a], timed[b]) < 0.05 for a, b in ((0, 1), (0, 2), (1, 2)))
    assert tested == 600 and called <= 0.05 * tested, called
    assert old >= 0.3 * 600, old  # pooling the iterations of blocks takes the load for the algorithm


def test_a_twin_made_1_3x_slower_is_found_slower_and_never_faster():
    """10 rounds of 2-3 samples with 5-10 % noise and a drift: the slow twin is slower in at least 90 % of cells."""
    rng = np.random.default_rng(13)
    found = []
    for _ in range(200):
        values = interleaved(rng, [1.0, 1.3], samples=int(rng.integers(2, 4)), noise=rng.uniform(0.05, 0.1),
                             loaded=False)
        for unit in values[0]:  # a drift moves both visits of a round alike
            drift = math.exp(0.4 * unit[1] / 10)
            values[0][unit] *= drift
            values[1][unit] *= drift
        cell = verdict.judge_cell(values, 0, lambda name: name)
        found.append(cell.vs_native[1].verdict)
    assert found.count(verdict.SLOWER) >= 0.9 * len(found), found.count(verdict.SLOWER)
    assert verdict.FASTER not in found


def test_holm_keeps_a_family_of_true_ties_from_calling_any():
    """Families of 20 comparisons of identical twins (30 rounds), no margin: with Holm no family calls any; the same
    comparisons each at alpha, uncorrected, call one in most families."""
    rng = np.random.default_rng(7)
    corrected = uncorrected = 0
    for _ in range(15):
        pairs = {}
        for i in range(20):
            twins = interleaved(rng, [1.0, 1.0], rounds=30, loaded=False)
            pairs[i] = (twins[0], twins[1])
        judged = verdict.family(pairs, bound=0.0)
        corrected += any(c.verdict != verdict.TIE for c in judged.values())
        alone = [verdict.family({i: pair}, bound=0.0)[i] for i, pair in pairs.items()]
        uncorrected += any(c.verdict != verdict.TIE for c in alone)
    assert corrected == 0 and uncorrected >= 5, (corrected, uncorrected)


def test_holm_adjusts_step_down():
    adjusted, levels = verdict.holm([0.01, 0.04, 0.03], alpha=0.05)
    assert adjusted == pytest.approx([0.03, 0.06, 0.06]) and levels == pytest.approx([0.05 / 3, 0.05, 0.025])


def quiet(rng: np.random.Generator, speeds: list[float]) -> Cells:
    return interleaved(rng, speeds, rounds=10, samples=3, noise=0.01, loaded=False)


def test_a_true_difference_below_the_margin_is_a_tie():
    """2 % faster, measured precisely: a tie at the 5 % margin; without a margin it is found."""
    values = quiet(np.random.default_rng(3), [1.0, 0.98])
    assert verdict.judge_cell(values, 0, lambda k: k).vs_native[1].verdict == verdict.TIE
    without = verdict.judge_cell(values, 0, lambda k: k, margin=0.0)
    assert without.vs_native[1].verdict == verdict.FASTER and without.choice == 1


def test_a_difference_within_the_noise_floor_is_a_tie():
    """1.08x faster is beyond the 5 % margin, but the control differed from native by 1.10x today: a tie, native
    kept; with a quiet control the same difference is a verdict."""
    rng = np.random.default_rng(5)
    values = quiet(rng, [1.0, 1 / 1.08, 1.10])
    candidates: Cells = {0: values[0], 1: values[1]}
    noisy_control = values[2]
    cell = verdict.judge_cell(candidates, 0, lambda k: k, control=noisy_control)
    assert cell.floor == pytest.approx(1.10, rel=0.02)
    assert (cell.vs_native[1].verdict, cell.choice) == (verdict.TIE, 0)
    calm = verdict.judge_cell(candidates, 0, lambda k: k, control={u: v * 1.01 for u, v in values[0].items()})
    assert (calm.vs_native[1].verdict, calm.choice) == (verdict.FASTER, 1)


def test_records_without_rounds_are_untested():
    """Each launch of an old record is one block: no pairs, no verdict, native stays."""
    blocks_: Cells = {0: {("a", -1): 2.0, ("b", -1): 2.0}, 1: {("a", -1): 1.0, ("b", -1): 1.0}}
    cell = verdict.judge_cell(blocks_, 0, lambda k: k)
    assert cell.vs_native[1].verdict == verdict.UNTESTED and cell.vs_native[1].ratio == 0.5
    assert (cell.choice, cell.tied_with, cell.rounds, cell.launches) == (0, [], 0, 2)
    two: Cells = {c: {("a", r): v for r in range(2)} for c, v in ((0, 2.0), (1, 1.0))}
    assert verdict.judge_cell(two, 0, lambda k: k).vs_native[1].verdict == verdict.UNTESTED


def test_the_choice_is_the_simplest_of_those_faster_than_native_and_not_slower_than_the_best():
    """1 and 2 tie as the fastest, 3 is faster than native but slower than them: the preferred of 1 and 2 (2)."""
    values = quiet(np.random.default_rng(9), [1.0, 0.50, 0.505, 0.7])
    order: dict[Hashable, int] = {2: 0, 1: 1, 3: 2, 0: 3}
    cell = verdict.judge_cell(values, 0, lambda k: order[k])
    assert (cell.choice, cell.tied_with) == (2, [1])
    assert cell.vs_best[3].verdict == verdict.SLOWER and cell.vs_native[3].verdict == verdict.FASTER


def test_the_two_stage_bootstrap_resamples_launches_then_their_rounds():
    """Every resample draws as many launches as there are, and from each drawn launch as many rounds as it has;
    the resampled medians are the medians of those draws."""
    units = tuple((launch, r) for launch, n in (("a", 3), ("b", 5), ("c", 4)) for r in range(n))
    drawn = verdict.two_stage_draws(units, resamples=300)
    assert drawn.shape == (300, 12) and set(drawn.sum(axis=1)) <= {9, 10, 11, 12, 13, 14, 15}
    assert len(set(drawn.sum(axis=1))) > 1  # launches of different sizes drawn
    values = np.random.default_rng(1).normal(size=12)
    assert np.allclose(verdict.resampled_medians(values, drawn),
                       [np.median(np.repeat(values, row)) for row in drawn])
    assert (verdict.two_stage_draws(units) == verdict.two_stage_draws(units)).all()  # seeded: reproducible


def test_launch_to_launch_swings_widen_the_interval_of_several_launches():
    """A candidate 1.2x faster in one launch and 1.0x in another: the interval over launches spans both, wider than
    one launch's rounds give."""
    rng = np.random.default_rng(4)
    a, b = {}, {}
    for launch, gain in (("x", 1.2), ("y", 1.0), ("z", 1.1)):
        for r in range(10):
            b[launch, r] = 1.0 * math.exp(rng.normal(0, 0.02))
            a[launch, r] = b[launch, r] / gain * math.exp(rng.normal(0, 0.02))
    both = verdict.family({"ab": (a, b)}, bound=0.0)["ab"]
    one = verdict.family({"ab": ({u: v for u, v in a.items() if u[0] == "x"}, b)}, bound=0.0)["ab"]
    assert both.high is not None and both.low is not None and one.high is not None and one.low is not None
    assert (both.high - both.low) > 2 * (one.high - one.low) and both.launches == 3 and one.launches == 1


def test_across_launches_the_launch_is_the_unit_and_fewer_than_3_a_side_are_described():
    rng = np.random.default_rng(8)

    def side(factor: float, launches: int, names: str = "L") -> verdict.Values:
        return {(f"{names}{i}", r): factor * math.exp(rng.normal(0, 0.03)) for i in range(launches) for r in range(5)}

    judged, unit, why = verdict.across_launches(side(1.0, 4), side(1.5, 4))
    assert (unit, judged.verdict) == ("launches", verdict.SLOWER) and judged.ratio == pytest.approx(1.5, rel=0.05)
    judged, unit, why = verdict.across_launches(side(1.0, 1), side(3.0, 1))  # one launch a side: 3x, and no verdict
    assert (unit, judged.verdict, judged.p) == ("rounds", verdict.UNTESTED, None) and why.startswith("one launch")
    assert judged.low is not None and judged.high is not None and judged.low < judged.ratio < judged.high
    judged, unit, why = verdict.across_launches(side(1.0, 2), side(3.0, 2))
    assert (unit, judged.verdict) == ("rounds", verdict.UNTESTED)
    judged, unit, why = verdict.across_launches({("a", -1): 1.0}, {("b", -1): 2.0})
    assert judged.verdict == verdict.UNTESTED and judged.ratio == 2.0 and judged.low is None
    assert "described only" in verdict.statistic("median", unit="rounds")
    assert "described" not in verdict.statistic("median", unit="launches")
    assert verdict.too_few_launches(1).startswith("one launch a side: a launch is the unit a tuning changes")


def test_launches_stamped_in_turns_are_paired_with_their_neighbours():
    t = [f"2026-12-07T08:00:{k:02d}+00:00" for k in range(8)]
    assert verdict.alternated(t[0:8:2], t[1:8:2]) == [(t[0], t[1]), (t[2], t[3]), (t[4], t[5]), (t[6], t[7])]
    assert verdict.alternated(t[1:8:2], t[0:8:2]) == [(t[1], t[0]), (t[3], t[2]), (t[5], t[4]), (t[7], t[6])]
    assert verdict.alternated(t[:4], t[4:]) == []  # one side after the other
    assert verdict.alternated([t[0], t[3]], [t[1], t[2]]) == [(t[0], t[1]), (t[3], t[2])]  # either side first
    assert verdict.alternated([t[0], t[1]], [t[2], t[3]]) == []
    assert [sum(verdict.pair_orders(n)) for n in (3, 6, 7)] == [1, 3, 3]  # half the pairs the tuned side first
    assert verdict.alternated(["b1", "b2", "b3"], ["a1", "a2", "a3"]) == []  # not stamps: not known to alternate
    # a slow drift over the launches moves both sides of a pair alike: the pairs see the 1.2x
    t = [f"2026-12-07T08:00:{k:02d}+00:00" for k in range(12)]
    before = {(t[2 * k], r): 1.0 + k for k in range(6) for r in range(5)}
    after = {(t[2 * k + 1], r): (1.0 + k) * 1.2 for k in range(6) for r in range(5)}
    judged, unit, why = verdict.across_launches(before, after)
    assert (unit, judged.verdict, why) == ("launch pairs", verdict.SLOWER, "") and judged.ratio == pytest.approx(1.2)
    judged, unit, why = verdict.across_launches({u: v for u, v in before.items() if u[0] < t[10]},
                                                {u: v for u, v in after.items() if u[0] < t[10]})
    assert judged.verdict == verdict.UNTESTED and why.startswith("5 pairs of launches: fewer than 6 cannot show")


def test_pairs_of_launches_are_judged_by_the_sign_test():
    """An A/A on a shared machine (measured: 6 pairs at 1 KiB, docs/findings/compare-on-the-launch.md): one launch of
    a pair now and then runs 1000x slower, so 5 pairs of 6 can lean one way by chance (p = 0.22); the bootstrap over
    the 6 pairs called that slower, the sign test does not."""
    bound = verdict.bound_of(verdict.MARGIN, None)
    leaning = np.log([4830.72, 0.74, 1779.71, 2.31, 5.75, 1.96])
    assert verdict.paired_launches(leaning, bound).verdict == verdict.TIE
    assert verdict.paired_launches(leaning, bound).p == pytest.approx(14 / 64)
    bootstrap = verdict.family({"x": ({("", k): float(v) for k, v in enumerate(np.exp(leaning))},
                                      {("", k): 1.0 for k in range(6)})}, bound)["x"]
    assert bootstrap.verdict == verdict.SLOWER  # what the bootstrap over 6 pairs made of it
    slower = verdict.paired_launches(np.log([1.3, 1.25, 1.5, 1.35, 2.0, 1.28]), bound)
    assert (slower.verdict, slower.p, slower.low) == (verdict.SLOWER, 2 / 64, pytest.approx(1.25))
    assert verdict.least_pairs(0.05) == 6 and verdict.least_pairs(0.01) == 8
    assert verdict.paired_launches(np.log([1.3] * 5), bound).verdict == verdict.UNTESTED


def test_0_bytes_and_times_below_the_floor_are_never_judged():
    assert verdict.unjudged_why(0, [1.0, 1.0]) == "0 B: always the library's"
    assert verdict.unjudged_why(8, [5e-6, 50e-6], floor=1e-6) == ""
    assert "below the timer's floor of 10 us" in verdict.unjudged_why(8, [5e-6, 50e-6], floor=10e-6)
    assert verdict.unjudged_why(8, [5e-10, 1.0]) != ""  # below any timer's resolution
    shown = verdict.not_judged(verdict.Comparison(3.0, 2.5, 3.5, 0.001, verdict.SLOWER, 10, 6))
    assert (shown.ratio, shown.low, shown.verdict, shown.p) == (3.0, 2.5, verdict.NOT_JUDGED, None)


def test_a_comparison_flips_and_reads_as_a_document():
    found = verdict.Comparison(0.5, 0.4, 0.625, 0.001, verdict.FASTER, 10, 1)
    assert found.flipped() == verdict.Comparison(2.0, 1.6, 2.5, 0.001, verdict.SLOWER, 10, 1)
    assert found.as_dict() == {"ratio": 0.5, "low": 0.4, "high": 0.625, "verdict": "faster", "p": 0.001}


def test_the_statistic_is_one_line_that_names_what_a_verdict_rests_on():
    said = verdict.statistic("p90", alpha=0.01, margin=0.03, launches=1)
    assert said.startswith("median of per-round p90 ratios, 99 % interval (two-stage bootstrap, Holm), margin 3 %")
    assert "this launch only" in said and "this launch" not in verdict.statistic("mean", launches=3)


def test_times_at_or_below_zero_still_compare():
    """An overlap point's exposed time (overall less compute) can be 0 or below: it counts as the least time a timer
    resolves, and the comparison stays finite."""
    values = verdict.per_round([("l", r, t) for r in range(5) for t in (-1e-6, 0.0)], "mean")
    assert set(values.values()) == {verdict.RESOLUTION}
    other = {u: 1e-6 for u in values}
    judged = verdict.family({"x": (values, other)}, bound=verdict.bound_of(verdict.MARGIN, None))["x"]
    assert judged.verdict == verdict.FASTER and math.isfinite(judged.ratio) and judged.as_dict()["ratio"] == 0.001
    assert verdict.across_launches(other, values)[0].as_dict()["ratio"] == 0.001
