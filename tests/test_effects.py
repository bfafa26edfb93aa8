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


def test_the_ci_resamples_runs_then_examples():
    """The two stages: runs that agree exactly leave only the examples' noise; runs that
    differ widen the CI well beyond it; a table without a seed column is one run."""
    same = effects.level(runs([0.5, 0.5, 0.5], n=4000), "same")
    spread = effects.level(runs([0.2, 0.5, 0.8], n=4000), "spread")
    assert same.high - same.low < 0.03 < 0.3 < spread.high - spread.low
    assert effects.level(runs([0.5]).drop(columns="seed"), "x").runs == (1,)
    # seeded: the same inputs give the same CI
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
    the known one, and runs_needed is the normal-approximation sample size for it."""
    rng = np.random.default_rng(0)
    a = np.clip(rng.normal(0.7, 0.1, 400), 0, 1)
    e = effects.level(runs(a, n=100_000, lengths=(60,)), "known spread")
    assert e.sds[0] == pytest.approx(0.1, rel=0.1)
    z = 1.959964 + 0.841621  # z_0.975 + z_0.8
    expected = math.ceil(z**2 * e.sds[0] ** 2 / (e.estimate - 0.65) ** 2)
    assert effects.runs_needed(e, 0.65) == expected
    assert 20 <= expected <= 40  # ~ (2.8 x 0.1 / 0.05)^2 = 31
    # a gap: both arms' variances add
    g = effects.Effect("g", 0.2, 0.0, 0.4, (3, 3), (0.1, 0.1))
    assert effects.runs_needed(g, 0.1) == math.ceil(z**2 * 0.02 / 0.01)
    # one run in an arm: no spread to go on; agreeing runs: the minimum
    assert (
        effects.runs_needed(effects.Effect("x", 0.5, 0.4, 0.6, (1, 3), (math.nan, 0.1)), 0.3)
        is None
    )
    assert effects.runs_needed(effects.Effect("y", 0.5, 0.5, 0.5, (3,), (0.0,)), 0.3) == 3
    assert "~" in effects.needed_text([g], 0.1) and effects.needed_text([g], -1.0) == ""


def test_more_runs_at_the_same_spread_decide_an_inconclusive_effect():
    """The power estimate's promise on simulated runs: at the number it states, the CI of a
    fresh draw of that many runs clears the threshold."""
    rng = np.random.default_rng(1)
    few = np.clip(rng.normal(0.8, 0.08, 3), 0, 1)
    e = effects.level(runs(few, n=20_000), "few")
    need = effects.runs_needed(e, 0.7)
    assert need is not None and need >= 3
    cleared = 0
    for trial in range(20):
        many = np.clip(np.random.default_rng(100 + trial).normal(0.8, 0.08, max(need, 3)), 0, 1)
        m = effects.level(runs(many, n=20_000), "many")
        cleared += m.low >= 0.7
    assert cleared >= 12  # 80% power, give or take the spread's estimate from three runs
