"""Run-level effects (lengen.report.effects): the run is the unit of evidence."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lengen.report import effects


def runs(accuracies, n: int = 192, lengths=(60, 80)) -> pd.DataFrame:
    """One model group: one run (seed) per accuracy, the same accuracy at every length."""
    return pd.DataFrame(
        [
            {"seed": s, "length": length, "n": n, "accuracy": a}
            for s, a in enumerate(accuracies)
            for length in lengths
        ]
    )


def test_each_run_is_judged_and_the_row_needs_every_group_to_usually_pass():
    """A row is decided on its runs: reproduced when every group's runs pass often enough to
    show a pass rate above 1/2 (5 of 5), not reproduced when the runs are shown to pass less,
    mixed (k of n) otherwise; a run passes only if no cell shows it below the threshold; fewer
    than 5 runs in an arm: underpowered."""
    agree = effects.gap(
        runs([0.95, 0.96, 0.94, 0.97, 0.95]),
        runs([0.2, 0.22, 0.18, 0.2, 0.1]),
        "ppc minus ablation",
    )
    assert agree.runs == (5, 5) and agree.powered
    assert agree.estimate == pytest.approx(0.774, abs=5e-3)  # accuracy x 192, rounded per run
    assert [round(v, 2) for _, v in agree.per_run] == [0.75, 0.74, 0.76, 0.77, 0.85]
    assert effects.judge_runs(effects.run_outcomes([agree], 0.3), True) == "reproduced"
    assert effects.judge_runs(effects.run_outcomes([agree], 0.9), True) == "not reproduced"
    # the seed probes' pattern: runs that generalize or fail give a mixed row, whatever the mean
    disagree = effects.level(runs([0.91, 0.31, 0.83, 0.95, 0.2]), "five runs")
    outcomes = effects.run_outcomes([disagree], 0.5)
    assert [o.passed for o in outcomes] == [True, False, True, True, False]
    assert effects.judge_runs(outcomes, True) == "mixed (3 of 5 runs)"
    assert effects.leaning(outcomes) == ""
    # 4 of 5 passing cannot show "usually" (P(>= 4 of 5 | 1/2) = 0.19): mixed, not reproduced
    four = effects.run_outcomes([effects.level(runs([0.95] * 4 + [0.2]), "four")], 0.9)
    assert effects.judge_runs(four, True) == "mixed (4 of 5 runs)"
    # a run must pass in every cell: seed 1 is shown below the threshold at one length only
    at_60 = effects.level(runs([0.95] * 5, lengths=(60,)), "2l = 60", "model")
    at_80 = effects.level(runs([0.95, 0.5, 0.95, 0.95, 0.95], lengths=(80,)), "2l = 80", "model")
    both = effects.run_outcomes([at_60, at_80], 0.9)
    assert [(o.run, o.passed) for o in both][:3] == [("0", True), ("1", False), ("2", True)]
    assert both[1].value == pytest.approx(0.5, abs=1e-2)  # its worst cell
    three = effects.level(runs([0.99, 0.98, 0.99]), "three runs")
    assert not three.powered
    assert effects.judge_runs(effects.run_outcomes([three], 0.5), three.powered) == (
        effects.UNDERPOWERED
    )
    assert effects.leaning(effects.run_outcomes([three], 0.5)) == "for"
    assert effects.leaning(effects.run_outcomes([three], 0.9999)) == "against"
    gap = effects.gap(runs([1.0] * 5), runs([0.1] * 4), "5 vs 4 runs")
    assert gap.runs == (5, 4) and not gap.powered and len(gap.per_run) == 4


def test_a_run_truly_at_the_threshold_fails_from_sampling_alone_at_most_5_percent():
    """A run's pass accounts for its test-set noise: drawn at its true accuracy in every one of
    up to 30 cells of 192-512 examples (a level) or at a true gap exactly at the threshold (two
    cells of one run, or two models), it fails in <= 5% of redraws; the earlier rule (its
    observed worst cell) failed such a run most of the time. A run far below still fails."""
    rng = np.random.default_rng(3)
    trials = 400
    for truth, threshold, cells, n in (
        (0.92, 0.9, 30, 192),
        (0.9, 0.9, 30, 192),
        (0.9, 0.9, 1, 512),
        (1.0, 0.9, 30, 192),
        (0.32, 0.3, 12, 192),
    ):
        right = rng.binomial(n, truth, size=(trials, cells))
        failed = observed_failed = 0
        for row in right:
            found = [
                effects.Effect(
                    f"c{i}", 0, 0, 0, (1,), (0,), (("r", k / n),), "g", ((float(k), float(n)),)
                )
                for i, k in enumerate(row)
            ]
            (o,) = effects.run_outcomes(found, threshold)
            failed += not o.passed
            observed_failed += not o.observed
        assert failed / trials <= 0.05, (truth, cells, n)
        if cells == 30 and truth == 0.92:
            assert observed_failed / trials > 0.5  # the rule of EARLIER: 76% in the issue
    for true_a, true_b, threshold, n in (
        (0.95, 0.65, 0.3, 192),
        (1.0, 0.7, 0.3, 256),
        (0.55, 0.5, 0.05, 512),
        (0.3, 0.0, 0.3, 192),
    ):
        ka, kb = rng.binomial(n, true_a, trials), rng.binomial(n, true_b, trials)
        failed = sum(
            effects.run_upper((a, n, b, n), effects.ALPHA) < threshold
            for a, b in zip(ka, kb, strict=True)
        )
        assert failed / trials <= 0.05, (true_a, true_b)
    far = effects.level(runs([0.6] * 5, n=192), "far below")
    assert not any(o.passed for o in effects.run_outcomes([far], 0.9))


@pytest.mark.parametrize("sizes", [(5,), (5, 5), (5, 5, 5), (6, 6, 6), (5, 5, 5, 5), (8, 5)])
def test_the_rows_error_rates_are_exact_and_at_most_5_percent_at_a_coin_flip(sizes):
    """error_rates is exact (a simulation of the verdicts agrees) and symmetric at the line it
    draws: a recipe whose runs pass half the time reads reproduced <= 5% and not reproduced
    <= 5% of the time, for any group count; the earlier rule read a coin flip not reproduced
    33% of the time on a 3-group row of 3 runs."""
    rng = np.random.default_rng(sum(sizes))
    rates = effects.error_rates(sizes)
    for p, (rep, refuted) in rates.items():
        k = rng.binomial(sizes, p, size=(4000, len(sizes)))
        found = [effects.group_verdict(list(zip(row, sizes, strict=True))) for row in k]
        assert np.mean([v == "reproduced" for v in found]) == pytest.approx(rep, abs=0.025)
        assert np.mean([v == "not reproduced" for v in found]) == pytest.approx(refuted, abs=0.025)
    assert rates[0.5][0] <= effects.ALPHA and rates[0.5][1] <= effects.ALPHA
    # monotone: the rates that matter are largest at the line (pass rate 1/2) itself
    assert effects.error_rates(sizes, (0.3,))[0.3][0] <= rates[0.5][0]
    assert effects.error_rates(sizes, (0.7,))[0.7][1] <= rates[0.5][1]
    assert effects.error_rates((3, 3, 3), earlier=True)[0.5][1] == pytest.approx(0.33, abs=0.005)
    # a row with fewer than 5 runs in a group is underpowered: never decided, and its stated
    # rates are those of 5 runs a group
    assert set(effects.error_rates((5, 3)).values()) == {(0.0, 0.0)}
    assert effects.error_text((5, 3)).startswith("at 5 runs per group")
    assert effects.error_text((5, 3)).endswith(effects.error_text((5, 5)))


def test_arms_are_compared_by_boschloo_on_their_generalize_counts():
    """A sentence comparing arms: Boschloo's one-sided exact test on each arm's runs that
    generalize; 5 of 5 against 0 of 5 is significant; worse arms shown to generalize more often
    than not, one of them as often as its better arm, refute the sentence (one such arm of two
    at 5 runs is not shown: 1/32 > 0.05 / 4); the exact error rates agree with a simulation,
    and a worse arm as good as the better reads reproduced <= 5%."""
    assert effects.boschloo((5, 5), (0, 5)) == pytest.approx(0.000977, abs=1e-5)
    assert effects.boschloo((3, 3), (0, 3)) == pytest.approx(0.0156, abs=1e-3)
    assert effects.boschloo((0, 5), (5, 5)) == 1.0
    test = lambda b, w: effects.ArmTest("c", "c", b, w, effects.boschloo(b, w))  # noqa: E731
    assert effects.judge_arms([test((5, 5), (0, 5)), test((5, 5), (1, 5))], True) == "reproduced"
    assert effects.judge_arms([test((5, 5), (4, 5)), test((5, 5), (5, 5))], True) == (
        "not reproduced"
    )
    assert effects.judge_arms([test((5, 5), (0, 5)), test((5, 5), (5, 5))], True) == (effects.MIXED)
    assert effects.judge_arms([test((5, 5), (5, 5))], True) == "not reproduced"
    assert effects.judge_arms([test((5, 5), (3, 5))], True) == effects.MIXED
    assert effects.judge_arms([test((3, 3), (0, 3))], True) == effects.UNDERPOWERED
    assert effects.arm_leaning([test((3, 3), (0, 3))]) == "for"
    sizes = ((5, 5), (5, 5))
    rates = effects.arm_error_rates(sizes)
    rng = np.random.default_rng(8)
    for (pb, pw), (rep, refuted) in rates.items():
        k = rng.binomial([5, 5, 5, 5], [pb, pw, pb, pw], size=(1500, 4))
        found = [
            effects.arm_verdict([test((a, 5), (b, 5)), test((c, 5), (d, 5))]) for a, b, c, d in k
        ]
        assert np.mean([v == "reproduced" for v in found]) == pytest.approx(rep, abs=0.03)
        assert np.mean([v == "not reproduced" for v in found]) == pytest.approx(refuted, abs=0.03)
    for p in (0.1, 0.5, 0.9):  # no difference between the arms: Boschloo's level holds
        assert effects.arm_error_rates(((5, 5),), ((p, p),))[(p, p)][0] <= effects.ALPHA
    assert rates[(0.9, 0.1)][1] <= effects.ALPHA  # a real harm is not refuted


def test_gaps_pair_runs_with_themselves_within_a_model_and_by_seed_across_models():
    """Two cells of one model (k_test 4 vs 8): each run's gap is its own; two models: run pairs
    by seed, a seed only one arm has is dropped; a level's runs are its run ids."""

    def model(name, accs, k_test=None):
        d = runs(accs, lengths=(60,)).assign(run=lambda d: [f"{name}/seed{s}" for s in d.seed])
        return d if k_test is None else d.assign(k_test=k_test)

    own = effects.gap(model("K8", [0.9, 0.8, 1.0]), model("K8", [0.5, 0.7, 0.4]), "k4 - k8")
    assert [r for r, _ in own.per_run] == ["K8/seed0", "K8/seed1", "K8/seed2"]
    assert [round(v, 2) for _, v in own.per_run] == [0.4, 0.1, 0.6]
    other = model("abl", [0.1, 0.2, 0.3, 0.4])
    cross = effects.gap(model("ppc", [1.0, 1.0, 1.0]), other[other.seed != 1], "ppc - abl")
    assert [r for r, _ in cross.per_run] == ["ppc/seed0 - abl/seed0", "ppc/seed2 - abl/seed2"]
    assert [r for r, _ in effects.level(model("ppc", [1.0, 0.5]), "x").per_run] == [
        "ppc/seed0",
        "ppc/seed1",
    ]


def test_the_share_of_runs_that_pass_has_an_exact_interval():
    """Clopper-Pearson: 3 of 3 passing still leaves the share as low as 0.29; 0 of 3 as high as
    0.71; the bounds are scipy's exact ones."""
    assert effects.share_interval(3, 3) == pytest.approx((0.2924, 1.0), abs=1e-4)
    assert effects.share_interval(0, 3) == pytest.approx((0.0, 0.7076), abs=1e-4)
    assert effects.share_interval(2, 3) == pytest.approx((0.0943, 0.9916), abs=1e-4)


def test_more_evidence_says_more_runs_only_where_runs_are_what_is_missing():
    few = effects.level(runs([0.9]), "one run")
    assert effects.more_evidence(effects.UNDERPOWERED, [few]).startswith("1 run in an arm")
    assert "the runs disagree" in effects.more_evidence("mixed (1 of 5 runs)", [few])
    assert effects.more_evidence("reproduced", [few]) == ""


def test_the_t_interval_fails_on_runs_like_ours_and_the_share_interval_holds():
    """lengen.report.coverage on reference/default's cells (>= 3 runs, SD >= 0.02): drawing runs
    from each cell's own run outcomes (they either generalize or fail), the t-interval on 3 run
    means covers the mean far below 95% in many cells (why the report no longer decides on it),
    and the generic mixtures at 3 runs cover ~0.67; the exact interval on the share of runs that
    pass 0.9 holds >= 0.93 in every model at 3 and 5 runs (its coverage is >= 0.95 by
    construction; 0.93 leaves the simulation's noise). A smooth Beta spread of the same cells
    keeps the t-interval near 95% in most cells: the mixture is what breaks it."""
    from pathlib import Path

    from lengen.report import coverage

    rng = np.random.default_rng(75)
    found = coverage.cells(Path(__file__).parents[1] / "reference" / "default")
    assert len(found) >= 200  # the committed run's cells of >= 3 runs that differ
    emp = np.array([coverage.t_coverage("runs", c, 3, c.n, 1000, rng) for c in found])
    assert emp.min() < 0.75 and (emp < 0.93).mean() > 0.3
    smooth = np.array([coverage.t_coverage("smooth", c, 3, c.n, 1000, rng) for c in found])
    assert np.median(smooth) >= 0.94
    mixtures = [coverage.t_coverage("mixture", m, 3, 192, 4000, rng) for m in coverage.MIXTURES]
    assert max(mixtures) < 0.9
    worst = 1.0
    for r in (3, 5):
        for c in found[::4]:  # every fourth cell keeps the default run fast
            for model in ("runs", "smooth"):
                worst = min(worst, coverage.share_coverage(model, c, r, c.n, 0.9, 1000, rng))
        for m in coverage.MIXTURES:
            worst = min(worst, coverage.share_coverage("mixture", m, r, 192, 0.9, 4000, rng))
    assert worst >= 0.93


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
    model has no per-run values (it is judged on its CI)."""
    a = pd.Series([1.0, 2.0, 3.0, 10.0], index=["c1", "c2", "c3", "only_a"])
    b = pd.Series([2.0, 0.0, 1.0], index=["c3", "c1", "c2"])
    e = effects.paired(a, b, "a - b")
    assert e.estimate == pytest.approx(1.0)  # (1-0) + (2-1) + (3-2), over 3 units
    assert e.low == pytest.approx(1.0) and e.high == pytest.approx(1.0)
    assert e.per_run == () and e.runs == (1,)
    right = pd.Series([True, True, False, True])
    wrong = pd.Series([False, True, False, False])
    assert effects.paired(right, wrong, "right - wrong").estimate == pytest.approx(0.5)


def test_verdicts_at_the_threshold_itself():
    """One model's CI rule is "whole CI >= threshold": a CI whose low end is the threshold clears
    it; one whose high end is the threshold straddles it. A run exactly at the threshold passes."""
    assert effects.judge(0.9, 1.0, 0.9, 5) == "reproduced"
    assert effects.judge(0.5, 0.9, 0.9, 5) == "inconclusive"
    assert effects.judge(0.5, 0.89, 0.9, 5) == "not reproduced"
    assert effects.judge(0.95, 1.0, 0.9, 4) == effects.UNDERPOWERED
    assert effects.judge(0.95, 1.0, 0.9, None) == "reproduced"
    e = effects.level(runs([0.9, 0.95, 1.0], n=200), "edge")
    assert [o.passed for o in effects.run_outcomes([e], 0.9)] == [True, True, True]


def test_between_run_spread_is_the_sample_sd_of_the_run_accuracies():
    """_sd: ddof 1 over the runs' pooled accuracies, nan for one run; a gap carries both arms'."""
    assert effects._sd(np.array([50.0, 70, 90]), np.array([100.0, 100, 100])) == pytest.approx(0.2)
    assert effects._sd(np.array([50.0, 70]), np.array([100.0, 100])) == pytest.approx(0.02**0.5)
    assert math.isnan(effects._sd(np.array([50.0]), np.array([100.0])))
    g = effects.gap(runs([0.5, 0.7, 0.9], n=100), runs([0.1, 0.1, 0.1], n=100), "g")
    assert g.sds == pytest.approx((0.2, 0.0))
    assert g.estimate == pytest.approx(0.6)


def test_error_rates_hold_on_outcome_models_fitted_to_the_committed_cells():
    """On the data's own outcome models (lengen.report.coverage: each run one of a committed
    cell's run accuracies, scored on the cell's examples, passing unless its test set shows it
    below the threshold): a cell whose runs pass at most half the time reads reproduced, and one
    whose runs pass at least half the time reads not reproduced, <= 5% of the time at five runs
    in each of three groups; two arms drawn from the same cell (no difference) read reproduced
    by Boschloo <= 5% of the time. The probabilities are exact given each cell's pass rate, which
    is simulated."""
    from pathlib import Path

    from scipy import stats

    from lengen.report import coverage

    rng = np.random.default_rng(83)
    found = coverage.cells(Path(__file__).parents[1] / "reference" / "default")
    assert len(found) >= 100
    seen = set()
    for c in found[::5]:
        right = rng.binomial(c.n, rng.choice(c.accuracies, size=2000))
        upper = np.where(
            right >= c.n, 1.0, stats.beta.ppf(1 - effects.ALPHA, right + 1, c.n - right)
        )
        for threshold in (0.9, 0.8, 0.5):  # near-perfect, generalizes well, a coin
            p = float((upper >= threshold).mean())
            rep, refuted = effects.error_rates((5, 5, 5), (p,))[p]
            if p <= effects.USUALLY:
                assert rep <= effects.ALPHA, (c.name, threshold, p)
            if p >= effects.USUALLY:
                assert refuted <= effects.ALPHA, (c.name, threshold, p)
            q = round(p, 2)
            if q not in seen:  # Boschloo's level on this cell's rate, both arms alike
                seen.add(q)
                assert effects.arm_error_rates(((5, 5),), ((q, q),))[(q, q)][0] <= effects.ALPHA
