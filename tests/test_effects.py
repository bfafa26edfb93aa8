"""Run-level effects (lengen.report.effects): the run is the unit of evidence."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lengen.report import effects


def runs(accuracies, n: int = 192, lengths=(60, 80)) -> pd.DataFrame:
    """One model group: one run (seed) per accuracy, the same accuracy at every length."""
    return pd.DataFrame([{"seed": s, "length": length, "n": n, "accuracy": a}
                         for s, a in enumerate(accuracies) for length in lengths])  # fmt: skip


def test_three_agreeing_runs_give_a_verdict():
    e = effects.gap(runs([0.95, 0.96, 0.94]), runs([0.20, 0.22, 0.18]), "ppc minus ablation")
    assert e.runs == (3, 3) and e.powered
    assert e.estimate == pytest.approx(0.75, abs=5e-3)  # accuracy x 192, rounded per run
    assert effects.judge(e.low, e.high, 0.3, min(e.runs)) == "reproduced"
    assert effects.judge(e.low, e.high, 0.9, min(e.runs)) == "not reproduced"


def test_runs_that_disagree_are_inconclusive_or_underpowered():
    """The seed probes' pattern (0.83 / 0.91 / 0.31 ...): three runs that disagree give a CI
    that straddles a threshold the mean clears; two runs are underpowered whatever their CI."""
    disagree = runs([0.91, 0.31, 0.83])
    e = effects.level(disagree, "three runs")
    assert e.low < 0.5 < e.estimate < e.high  # the run-level CI is wide
    assert effects.judge(e.low, e.high, 0.5, min(e.runs)) == "inconclusive"
    # the same examples pooled as one run: a narrow CI that would have called it reproduced
    pooled = effects.level(disagree.assign(seed=0), "pooled")
    assert effects.judge(pooled.low, pooled.high, 0.6) == "reproduced"
    two = effects.level(runs([0.99, 0.98]), "two runs")
    assert effects.judge(two.low, two.high, 0.5, min(two.runs)) == effects.UNDERPOWERED
    gap = effects.gap(runs([1.0, 1.0, 1.0]), runs([0.1, 0.1]), "3 vs 2 runs")
    assert gap.runs == (3, 2) and not gap.powered


def test_the_ci_holds_runs_and_examples():
    """Runs that agree exactly leave only the examples' noise (the variance's floor); runs that
    differ widen the CI well beyond it; a table without a seed column is one run."""
    same = effects.level(runs([0.5, 0.5, 0.5], n=4000), "same")
    spread = effects.level(runs([0.2, 0.5, 0.8], n=4000), "spread")
    assert same.high - same.low < 0.03 < 0.3 < spread.high - spread.low
    assert effects.level(runs([0.5]).drop(columns="seed"), "x").runs == (1,)
    # deterministic: the same inputs give the same CI
    assert effects.level(runs([0.2, 0.5, 0.8]), "a") == effects.level(runs([0.2, 0.5, 0.8]), "a")


def test_decisive_effect_with_underpowered_arms():
    powered_fail = effects.Effect("a", 0.1, 0.05, 0.15, (3, 3), (0.0, 0.0))
    weak_pass = effects.Effect("b", 0.6, 0.5, 0.7, (2, 3), (0.1, 0.1))
    strong_pass = effects.Effect("c", 0.5, 0.4, 0.6, (3, 3), (0.1, 0.1))
    # a powered effect wholly below decides against, whatever else is underpowered
    assert effects.decisive([powered_fail, weak_pass], 0.3) is powered_fail
    # otherwise an underpowered effect keeps the rule from being decided
    assert effects.decisive([strong_pass, weak_pass], 0.3) is weak_pass
    assert effects.decisive([strong_pass], 0.3) is strong_pass


def test_runs_needed_recovers_a_known_between_run_variance():
    """Runs drawn with a known between-run sd (0.1) and many examples each: the estimated sd is
    the known one, its 95% range of runs needed brackets the t-based sample size at the known
    sd, and with 400 runs that range is narrow; with 3 runs it spans ~3 orders of magnitude."""
    rng = np.random.default_rng(0)
    a = np.clip(rng.normal(0.7, 0.1, 400), 0, 1)
    e = effects.level(runs(a, n=100_000, lengths=(60,)), "known spread")
    assert e.sds[0] == pytest.approx(0.1, rel=0.1)
    low, high = effects.runs_needed(e, 0.65)
    at_known = effects._runs_for(0.1**2, e.estimate - 0.65, 1)
    assert low <= at_known <= high and high / low < 1.5
    assert 25 <= at_known <= 45  # ~ (2.8 x 0.1 / 0.046)^2 = 37, a little more at t's df
    three = effects.runs_needed(effects.Effect("g", 0.2, 0.0, 0.4, (3, 3), (0.1, 0.1)), 0.1)
    assert three[1] / three[0] > 100  # 2 degrees of freedom per arm: the variance is barely known
    # one run in an arm: no spread to go on; agreeing runs: the minimum
    assert (
        effects.runs_needed(effects.Effect("x", 0.5, 0.4, 0.6, (1, 3), (math.nan, 0.1)), 0.3)
        is None
    )
    assert effects.runs_needed(effects.Effect("y", 0.5, 0.5, 0.5, (3,), (0.0,)), 0.3) == (3, 3)
    g = effects.Effect("g", 0.2, 0.0, 0.4, (3, 3), (0.1, 0.1))
    assert "~" in effects.needed_text([g], 0.1) and effects.needed_text([g], -1.0) == ""


def test_more_runs_at_the_same_spread_decide_an_inconclusive_effect():
    """The power estimate's promise on simulated runs: at the number it states for a known
    spread and gap (runs N(0.8, 0.08), threshold 0.7), the CI of a fresh draw of that many runs
    clears the threshold ~80% of the time; the range stated from three drawn runs holds it."""
    need = effects._runs_for(0.08**2, 0.1, 1)
    rng = np.random.default_rng(1)
    acc = np.clip(rng.normal(0.8, 0.08, (4000, need)), 0, 1)
    right = np.rint(acc * 20_000)
    _, low, _ = effects.level_interval(right, np.full_like(right, 20_000))
    assert 0.75 <= (low >= 0.7).mean() <= 0.9  # POWER, 0.8
    few = effects.level(runs(np.clip(rng.normal(0.8, 0.08, 3), 0, 1), n=20_000), "few")
    lo, hi = effects.runs_needed(few, 0.7)
    assert lo <= need <= hi


def test_the_interval_holds_its_coverage_at_three_and_five_runs():
    """Issue 64: runs' true accuracies drawn from a Beta with a given mean and between-run SD,
    each run scored on n examples (a binomial draw), 20,000 times per setting: the 95% interval
    of a level and of a gap covers the true value at least 93% of the time, at 3 and 5 runs per
    arm, SDs 0.02-0.2 at 0.5, and accuracies near 0 and 1 (0.01-0.05, 0.95-0.99) at the SDs a
    Beta allows there. A strongly skewed spread costs coverage at 3 runs (measured: 0.923 at
    mean 0.7, SD 0.2, n = 512), so those settings are held to 0.91 and reported as such in
    effects' docstring. The bootstrap this replaced covered ~0.76 at SD 0.1 (measured below)."""
    rng = np.random.default_rng(64)
    trials = 20_000

    def draw(mean, sd, r, n):
        k = mean * (1 - mean) / sd**2 - 1
        p = rng.beta(mean * k, (1 - mean) * k, (trials, r))
        return rng.binomial(n, p).astype(float), np.full((trials, r), float(n))

    settings = [(0.5, 0.02), (0.5, 0.05), (0.5, 0.1), (0.5, 0.2), (0.8, 0.1), (0.9, 0.05),
                (0.95, 0.02), (0.98, 0.01), (0.99, 0.005), (0.05, 0.02), (0.02, 0.01),
                (0.01, 0.005)]  # fmt: skip
    skewed = [(0.7, 0.2), (0.3, 0.2)]
    worst = {}
    for r in (3, 5):
        for n in (64, 512):
            for mean, sd in settings + skewed:
                right, total = draw(mean, sd, r, n)
                _, low, high = effects.level_interval(right, total)
                level = ((low <= mean) & (mean <= high)).mean()
                other = 0.5 if abs(mean - 0.5) > 0.1 else 0.2  # the other arm of a gap
                right_b, total_b = draw(other, min(sd, 0.1), r, n)
                _, low, high = effects.gap_interval(right, total, right_b, total_b)
                gap = ((low <= mean - other) & (mean - other <= high)).mean()
                worst[r, n, mean, sd] = min(level, gap)
    held = {k: v for k, v in worst.items() if k[2:] not in skewed}
    assert min(held.values()) >= 0.93, min(held.items(), key=lambda kv: kv[1])
    assert min(worst.values()) >= 0.91, min(worst.items(), key=lambda kv: kv[1])
    # what the two-stage percentile bootstrap over 3 runs gave (runs, then examples)
    right, total = draw(0.5, 0.1, 3, 512)
    idx = rng.integers(0, 3, (2000, 3))
    hits = 0
    for t in range(500):
        boot = rng.binomial(total[t][idx].astype(int), right[t][idx] / total[t][idx]).mean(1)
        low, high = np.percentile(boot / 512, [2.5, 97.5])
        hits += low <= 0.5 <= high
    assert hits / 500 < 0.85  # ~0.76: why it was replaced


def test_the_bootstrap_is_seeded_and_draws_the_stated_resamples():
    """A report is deterministic (the bootstrap's generator is seeded) and its CIs rest on
    N_RESAMPLES resamples: the statistic sees exactly that many, in batches."""
    x = np.array([0.2, 0.9, 0.4, 0.7, 0.1, 0.8])
    seen = []

    def mean(u, axis):
        seen.append(u.shape[0] if u.ndim > 1 else 0)
        return u.mean(axis=axis)

    first = effects._ci((x,), mean)
    assert sum(seen) == effects.N_RESAMPLES
    assert effects._ci((x,), mean) == first
    assert first[0] < x.mean() < first[1]


def test_paired_effects_align_their_units_and_take_booleans():
    """paired(): the units are matched by index (a unit only one side has is left out, an order
    difference is undone), a 0/1 outcome per unit works as well as a loss, and the effect of one
    model has no between-run spread (runs_needed: None)."""
    a = pd.Series([1.0, 2.0, 3.0, 10.0], index=["c1", "c2", "c3", "only_a"])
    b = pd.Series([2.0, 0.0, 1.0], index=["c3", "c1", "c2"])
    e = effects.paired(a, b, "a - b")
    assert e.estimate == pytest.approx(1.0)  # (1-0) + (2-1) + (3-2), over 3 units
    assert e.low == pytest.approx(1.0) and e.high == pytest.approx(1.0)
    assert effects.runs_needed(e, 0.0) is None
    right = pd.Series([True, True, False, True])
    wrong = pd.Series([False, True, False, False])
    assert effects.paired(right, wrong, "right - wrong").estimate == pytest.approx(0.5)


def test_an_estimate_on_the_threshold_needs_infinitely_many_runs_unless_runs_agree():
    on = effects.Effect("x", 0.3, 0.2, 0.4, (3, 3), (0.1, 0.1))
    assert effects.runs_needed(on, 0.3) == (math.inf, math.inf)
    flat = effects.Effect("y", 0.3, 0.3, 0.3, (3, 3), (0.0, 0.0))
    assert effects.runs_needed(flat, 0.3) == (effects.MIN_RUNS, effects.MIN_RUNS)
    far = effects.runs_needed(effects.Effect("z", 1.3, 1.3, 1.3, (3,), (0.1,)), 0.3)
    assert far[0] == 3


def test_verdicts_at_the_threshold_itself():
    """The rule is "every CI >= threshold": a CI whose low end is the threshold clears it; one
    whose high end is the threshold straddles it (inconclusive), and is no failing effect."""
    assert effects.judge(0.9, 1.0, 0.9, 3) == "reproduced"
    assert effects.judge(0.5, 0.9, 0.9, 3) == "inconclusive"
    assert effects.judge(0.5, 0.89, 0.9, 3) == "not reproduced"
    assert effects.judge(0.95, 1.0, 0.9, 2) == effects.UNDERPOWERED
    assert effects.judge(0.95, 1.0, 0.9, None) == "reproduced"
    edge = effects.Effect("edge", 0.8, 0.7, 0.9, (3, 3), (0.1, 0.1))
    wide = effects.Effect("wide", 0.7, 0.4, 1.0, (3, 3), (0.1, 0.1))
    assert effects.decisive([edge, wide], 0.9).name == "wide"  # lowest bound, none failing
    # what would decide it: nothing when the CI's low end is on the threshold; a run count when
    # its high end is; no run count when the estimate is the threshold
    clear = effects.Effect("clear", 0.95, 0.9, 1.0, (3, 3), (0.1, 0.1))
    assert effects.needed_text([clear], 0.9) == ""
    assert effects.needed_text([edge], 0.9) == (
        "~6-621 runs per arm would decide it, if the true effect is the one observed (the range: "
        "the between-run spread's 95% interval from 3 runs)")
    on = effects.Effect("on", 0.9, 0.8, 1.0, (3, 3), (0.1, 0.1))
    assert effects.needed_text([on], 0.9) == (
        "the estimate sits on the threshold: no number of runs decides it")


def test_between_run_spread_is_the_sample_sd_of_the_run_accuracies():
    """_sd: ddof 1 over the runs' pooled accuracies, nan for one run; a gap carries both arms'."""
    assert effects._sd(np.array([50.0, 70, 90]), np.array([100.0, 100, 100])) == pytest.approx(0.2)
    assert effects._sd(np.array([50.0, 70]), np.array([100.0, 100])) == pytest.approx(0.02**0.5)
    assert math.isnan(effects._sd(np.array([50.0]), np.array([100.0])))
    g = effects.gap(runs([0.5, 0.7, 0.9], n=100), runs([0.1, 0.1, 0.1], n=100), "g")
    assert g.sds == pytest.approx((0.2, 0.0))
    assert g.estimate == pytest.approx(0.6)
