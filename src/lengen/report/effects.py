"""Effect sizes, each run's own outcome, and the verdict the runs give.

The run is the unit of evidence: whether a transformer length-generalizes is decided by its
training run, and runs like ours either generalize or fail (one recipe's five seeds: 0.31-0.91 at
2l = 500, one of them 0.055 at 2l = 200). So a verdict is read off the runs themselves, in three
steps, each with its error rate stated (docs/rules.md, "How a verdict is made"):

1. **A run passes or fails** the sentence's own criterion (its accuracy, or its gap to the
   paired run of the compared arm, against the rule's threshold, in every cell the rule names),
   with its test-set noise accounted for: it fails only where some cell is shown below the
   threshold by an exact one-sided bound at level ALPHA / m over its m cells (run_upper), so a
   run truly at or above the threshold everywhere fails from sampling alone with probability
   <= ALPHA.
2. **A group of runs** (the model group the sentence quantifies over: "K_train 8", "jump 1
   minus 2") *usually passes* when an exact one-sided binomial test shows its pass rate above
   USUALLY at ALPHA, and *rarely passes* when one shows it below USUALLY at ALPHA / G (G: the
   row's groups).
3. **The row** is *reproduced* when every group usually passes (an intersection of tests, each
   at ALPHA: P(reproduced) <= ALPHA when some group's pass rate is USUALLY or less), *not
   reproduced* when some group rarely passes (Bonferroni over the G groups: P(not reproduced)
   <= ALPHA when every group's pass rate is USUALLY or more), *mixed (k of n runs)* otherwise,
   and *underpowered* with fewer than MIN_RUNS runs in a compared arm (its runs' leaning is
   said). error_rates gives both probabilities exactly for a row's group sizes.

A sentence comparing arms ("significantly harm", "significantly worse") is judged on the runs'
generalize / fail counts per arm (judge_arms): Boschloo's exact unconditional test of the
difference in each comparison, beside the runs' paired gaps.

Why not an interval on the run means: fitted to this data's cells (lengen.report.coverage: the
runs drawn from each committed cell's own run outcomes, a generalize-or-fail mixture, and a
smooth Beta spread), the t-interval on 3 run means covers the true mean as little as 0.65 of the
time (median 0.93, over half the cells below 0.93), 0.83 at 5 runs, and no run count up to 100
makes it hold >= 0.93 in every such model (skewed cells near 1.0 stay below). So the run mean is
shown without an interval; the exact interval on each group's share of runs that pass holds
>= 0.95 in every model (tests/test_effects.py measures both).

How the per-run values pair up: a level's runs are its rows' `run` ids (the seed without one); a
gap between two cells of one model (k_test 4 vs 8 of the same run) pairs each run with itself; a
gap between two models pairs their runs by seed (independent runs, so any pairing gives
independent paired draws; by seed makes it reproducible).

The t-interval (a level: s^2 / r, at least the examples' binomial variance, r - 1 degrees of
freedom; a gap: Welch) stays as the tool for the one-run, many-example effects of the language
models (`paired`: a bootstrap over held-out chunks) and for the coverage study.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from lengen.core.claims import ArmTest, GroupShare, RunOutcome

N_RESAMPLES = 2000  # bootstrap resamples (seeded: a report is deterministic)
SEED = 0
# runs per compared arm below which a comparison reads "underpowered": with fewer, even runs that
# all agree cannot show a group's pass rate above USUALLY at ALPHA (0.5^4 = 0.063 > 0.05)
MIN_RUNS = 5
ALPHA = 0.05  # two-sided 95% intervals; every one-sided test's level
# a group "usually" passes when its runs' pass rate is shown above this, "rarely" when below: the
# line between a recipe that generalizes and a coin flip (docs/rules.md)
USUALLY = 0.5
# the rule of 2026-12-02 (REPORT.md prints its verdict beside today's, docs/rules.md History):
# a run passed on its observed worst value, a row was decided from 3 runs per arm
EARLIER = "2026-12-02"
EARLIER_MIN_RUNS = 3
UNDERPOWERED = "underpowered"
MIXED = "mixed"  # the verdict's word where the runs disagree: "mixed (k of n runs)"


def _pooled(rows: pd.DataFrame, key: np.ndarray) -> pd.DataFrame:
    """Examples right and scored per value of `key` (one per row), pooled over the rows' cells
    (lengths, k_test)."""
    n = rows.n.to_numpy(dtype=float)
    right = np.rint(rows.accuracy.to_numpy(dtype=float) * n)
    return pd.DataFrame({"run": key, "right": right, "n": n}).groupby("run")[["right", "n"]].sum()


def runs_of(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(examples right, examples scored) per run (the `seed` column; one run without it), pooled
    over the rows' cells (lengths, k_test)."""
    per = _pooled(rows, rows.seed.to_numpy() if "seed" in rows else np.zeros(len(rows), int))
    return per.right.to_numpy(), per.n.to_numpy()


def run_counts(rows: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Each run's (examples right, examples scored) pooled over the rows' cells, by run id (the
    `run` column; the seed without one; a single run "run" without either)."""
    key = (
        rows.run.astype(str).to_numpy()
        if "run" in rows
        else rows.seed.astype(str).to_numpy()
        if "seed" in rows
        else np.full(len(rows), "run")
    )
    per = _pooled(rows, key)
    return {
        str(k): (float(r), float(n)) for k, r, n in zip(per.index, per.right, per.n, strict=True)
    }


def _seed_of(rows: pd.DataFrame) -> dict[str, str]:
    """run id -> seed (as text) for the rows' runs (run_counts' ids)."""
    if "run" not in rows:
        return {}
    seeds = rows.seed if "seed" in rows else pd.Series("0", index=rows.index)
    return {str(r): str(s) for r, s in zip(rows.run, seeds, strict=True)}


def _paired_counts(better: pd.DataFrame, worse: pd.DataFrame) -> list[tuple[str, tuple, tuple]]:
    """(name, the better run's counts, the worse run's counts) per pair (run_counts): the same
    run ids in both (two cells of one model) pair with themselves; otherwise runs pair by seed
    (module docstring); unpaired runs drop."""
    a, b = run_counts(better), run_counts(worse)
    if set(a) & set(b):
        return [(r, a[r], b[r]) for r in sorted(set(a) & set(b))]
    seed_a, seed_b = _seed_of(better), _seed_of(worse)
    by_seed_b = {seed_b.get(r, r): r for r in b}
    return [
        (f"{r} - {other}", a[r], b[other])
        for r in sorted(a)
        if (other := by_seed_b.get(seed_a.get(r, r))) is not None
    ]


def _sd(right: np.ndarray, n: np.ndarray) -> float:
    """Between-run standard deviation of the runs' accuracies (nan with one run)."""
    return float(np.std(right / n, ddof=1)) if len(n) > 1 else math.nan


def _df(runs: int) -> float:
    """Degrees of freedom of one arm's variance: r - 1 (one run: its examples', normal), also
    where the binomial floor below is the larger (taking the floor as known, normal, covered
    0.90 at 3 runs near an accuracy of 0.99: three runs that happen to agree say little about
    the spread)."""
    return runs - 1 if runs > 1 else math.inf


def mean_and_variance(right: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An arm's run-mean accuracy and the variance of that mean, over the last axis (the runs;
    any leading axes are a batch, as the coverage simulation in tests/test_effects.py draws
    them): the runs' spread s^2 / r, at least the runs' test-set variance sum p(1 - p) / n / r^2
    (p with half an example added to each side); _df(r) degrees of freedom."""
    right, n = np.asarray(right, dtype=float), np.asarray(n, dtype=float)
    r = right.shape[-1]
    acc = right / n
    p = (right + 0.5) / (n + 1)
    sampling = np.sum(p * (1 - p) / n, axis=-1) / r**2
    spread = np.var(acc, axis=-1, ddof=1) / r if r > 1 else np.zeros_like(sampling)
    return acc.mean(axis=-1), np.maximum(spread, sampling)


def level_interval(right: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, ...]:
    """An arm's run mean and its 95% t-interval (mean_and_variance), clipped to [0, 1];
    batched over leading axes."""
    mean, var = mean_and_variance(right, n)
    half = stats.t.ppf(1 - ALPHA / 2, _df(np.shape(right)[-1])) * np.sqrt(var)
    return mean, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1)


def gap_interval(right_a, n_a, right_b, n_b) -> tuple[np.ndarray, ...]:
    """Arm a's run mean minus arm b's and its 95% Welch t-interval (Welch-Satterthwaite
    degrees of freedom), clipped to [-1, 1]; batched over leading axes."""
    (mean_a, var_a), (mean_b, var_b) = (
        mean_and_variance(right_a, n_a),
        mean_and_variance(right_b, n_b),
    )
    df_a, df_b = _df(np.shape(right_a)[-1]), _df(np.shape(right_b)[-1])
    var = var_a + var_b
    with np.errstate(divide="ignore"):  # one run in each arm: known variances, normal
        df = var**2 / (var_a**2 / df_a + var_b**2 / df_b)
    half = stats.t.ppf(1 - ALPHA / 2, df) * np.sqrt(var)
    estimate = mean_a - mean_b
    return estimate, np.clip(estimate - half, -1, 1), np.clip(estimate + half, -1, 1)


@dataclass(frozen=True)
class Effect:
    """A named effect: its estimate, its 95% CI, the runs in each arm and each arm's between-run
    standard deviation (nan for an arm of one run)."""

    name: str
    estimate: float
    low: float
    high: float
    runs: tuple[int, ...] = (1,)
    sds: tuple[float, ...] = (math.nan,)
    # each run's own value (a level: its accuracy; a gap: its paired gap), by run id
    per_run: tuple[tuple[str, float], ...] = ()
    # the model group the sentence quantifies over ("K_train 8", "jump 1 minus 2"; "": the
    # effect's name): its runs are judged together (judge_runs)
    group: str = ""
    # each run's test-set counts, in per_run's order: (right, n) for a level, (right, n of the
    # better cell, right, n of the worse) for a gap; what run_upper bounds its value with
    counts: tuple[tuple[float, ...], ...] = ()

    @property
    def powered(self) -> bool:
        """Every arm has at least MIN_RUNS runs."""
        return min(self.runs) >= MIN_RUNS

    def __str__(self) -> str:
        """'name +mean (runs: v1, v2, v3)' for an effect of runs; 'name +estimate [CI] (n runs)'
        for one without per-run values (a paired effect of one model)."""
        if self.per_run:
            return (
                f"{self.name} {self.estimate:+.3f} (runs: "
                + ", ".join(f"{v:+.2f}" for _, v in self.per_run)
                + ")"
            )
        runs = "/".join(map(str, self.runs))
        return f"{self.name} {self.estimate:+.3f} [{self.low:+.3f}, {self.high:+.3f}] ({runs} runs)"


def gap(better: pd.DataFrame, worse: pd.DataFrame, name: str, group: str = "") -> Effect:
    """Run-mean accuracy of `better` minus `worse`, with its Welch t-interval (gap_interval)
    and each run's paired gap (runs paired by _paired_counts); `group`: the model group it
    belongs to."""
    (right_a, n_a), (right_b, n_b) = runs_of(better), runs_of(worse)
    estimate, low, high = map(float, gap_interval(right_a, n_a, right_b, n_b))
    counts = tuple((name_, (*a, *b)) for name_, a, b in _paired_counts(better, worse))
    return Effect(
        name,
        estimate,
        low,
        high,
        (len(n_a), len(n_b)),
        (_sd(right_a, n_a), _sd(right_b, n_b)),
        tuple((r, c[0] / c[1] - c[2] / c[3]) for r, c in counts),
        group or name,
        tuple(c for _, c in counts),
    )


def level(rows: pd.DataFrame, name: str, group: str = "") -> Effect:
    """Run-mean accuracy of the rows, with its t-interval (level_interval) and each run's
    accuracy; `group`: the model group it belongs to."""
    right, n = runs_of(rows)
    estimate, low, high = map(float, level_interval(right, n))
    counts = sorted(run_counts(rows).items())
    return Effect(
        name,
        estimate,
        low,
        high,
        (len(n),),
        (_sd(right, n),),
        tuple((r, k / m) for r, (k, m) in counts),
        group or name,
        tuple(c for _, c in counts),
    )


def _ci(samples: tuple[np.ndarray, ...], statistic, paired: bool = False) -> tuple[float, float]:
    """95% percentile bootstrap CI of statistic over independently resampled samples (`paired`:
    resampled together; scipy.stats.bootstrap); a sample without spread gives a CI of width 0."""
    res = stats.bootstrap(
        samples,
        statistic,
        paired=paired,
        n_resamples=N_RESAMPLES,
        method="percentile",
        vectorized=True,
        batch=250,
        rng=np.random.default_rng(SEED),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def paired(a: pd.Series, b: pd.Series, name: str, runs: int = 1) -> Effect:
    """Mean of a - b over paired units of one model (the same held-out chunks, aligned by index),
    with a paired bootstrap CI (the units are resampled together). `runs`: the models behind it
    (one: the CI is over units, and the effect is underpowered)."""
    a, b = a.align(b, join="inner")
    x, y = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
    low, high = _ci((x, y), lambda u, v, axis: (u - v).mean(axis=axis), paired=True)
    return Effect(name, float((x - y).mean()), low, high, (runs,), (math.nan,))


def decisive(effects: list[Effect]) -> Effect:
    """The effect a rule "every effect >= threshold" is shown by: the one with the lowest run
    mean (its worst cell; the first by name on a tie)."""
    return min(effects, key=lambda e: (e.estimate, e.name))


def judge(low: float, high: float, threshold: float, runs: int | None = None) -> str:
    """underpowered with fewer than MIN_RUNS runs in an arm (`runs`: the fewest; None: not a
    run-level measurement); else reproduced when the whole CI clears the threshold, not
    reproduced when the whole CI is below it, inconclusive when it straddles (a resample of the
    same runs could flip it)."""
    if runs is not None and runs < MIN_RUNS:
        return UNDERPOWERED
    if low >= threshold:
        return "reproduced"
    if high < threshold:
        return "not reproduced"
    return "inconclusive"


# --- step 1: a run's outcome, its test-set noise accounted for ---------------------------------


def _cp_upper(right: float, n: float, alpha: float) -> float:
    """Clopper-Pearson one-sided upper (1 - alpha) bound on a proportion, right of n."""
    return 1.0 if right >= n else float(stats.beta.ppf(1 - alpha, right + 1, n - right))


def _cp_lower(right: float, n: float, alpha: float) -> float:
    """Clopper-Pearson one-sided lower (1 - alpha) bound on a proportion, right of n."""
    return 0.0 if right <= 0 else float(stats.beta.ppf(alpha, right, n - right + 1))


def run_upper(counts: tuple[float, ...], alpha: float) -> float:
    """An exact one-sided upper (1 - alpha) confidence bound on a run's true value from its
    test-set counts: a level (right, n) by Clopper-Pearson; a gap (right, n of the better cell,
    right, n of the worse) by the better cell's upper bound minus the worse cell's lower bound,
    each at alpha / 2 (so the bound falls below the truth with probability <= alpha whatever
    the two accuracies: a normal approximation undercovers near 0 and 1, where our runs are)."""
    if len(counts) == 2:
        return _cp_upper(*counts, alpha)
    right_a, n_a, right_b, n_b = counts
    return _cp_upper(right_a, n_a, alpha / 2) - _cp_lower(right_b, n_b, alpha / 2)


def run_outcomes(found: list[Effect], threshold: float) -> list[RunOutcome]:
    """Each run's outcome over the effects (its per-run values), per model group. A run fails
    only where the test set shows it below the threshold: some cell's exact upper bound
    (run_upper at ALPHA / m over the run's m cells) is below it; so a run truly at or above the
    threshold in every cell fails from sampling alone with probability <= ALPHA (Bonferroni).
    `observed`: whether its worst observed value clears the threshold (the rule of EARLIER)."""
    cells: dict[str, dict[str, list]] = {}  # group (in the effects' order) -> run -> cells
    for e in found:
        runs = cells.setdefault(e.group or e.name, {})
        counts = e.counts or (None,) * len(e.per_run)
        for (run, value), c in zip(e.per_run, counts, strict=True):
            runs.setdefault(run, []).append((value, c))
    out = []
    for g, runs in cells.items():
        for r, values in sorted(runs.items()):
            worst = min(v for v, _ in values)
            alpha = ALPHA / len(values)
            passed = all((v if c is None else run_upper(c, alpha)) >= threshold for v, c in values)
            out.append(RunOutcome(r, worst, passed, g, worst >= threshold))
    return out


# --- steps 2 and 3: a group's runs, then the row ------------------------------------------------


def share_interval(passed: int, runs: int) -> tuple[float, float]:
    """Exact (Clopper-Pearson) 95% interval on the share of runs that pass, `passed` of
    `runs`: its coverage is >= 0.95 whatever the share (scipy.stats.binomtest)."""
    ci = stats.binomtest(passed, runs).proportion_ci(1 - ALPHA, method="exact")
    return float(ci.low), float(ci.high)


def group_counts(outcomes: list[RunOutcome], observed: bool = False) -> dict[str, tuple[int, int]]:
    """(runs that pass, runs) per model group, in the outcomes' order (`observed`: passing by
    the rule of EARLIER)."""
    groups: dict[str, list[bool]] = {}
    for o in outcomes:
        groups.setdefault(o.group, []).append(o.observed if observed else o.passed)
    return {g: (sum(v), len(v)) for g, v in groups.items()}


def group_shares(outcomes: list[RunOutcome]) -> tuple[GroupShare, ...]:
    """Each group's runs that pass with the exact 95% interval on its share (never pooled over
    groups: they may pass at different rates)."""
    return tuple(
        GroupShare(g, k, n, *share_interval(k, n)) for g, (k, n) in group_counts(outcomes).items()
    )


def usually(passed, runs):
    """A group usually passes: the exact one-sided binomial test shows its pass rate above
    USUALLY at ALPHA (P(at least `passed` of `runs` | rate USUALLY) <= ALPHA); vectorized."""
    return stats.binom.sf(np.asarray(passed) - 1, runs, USUALLY) <= ALPHA + 1e-12


def _single_level(groups: int) -> float:
    """shown_below's level for one group alone: ALPHA / (2 G), or ALPHA for a single group."""
    return ALPHA if groups == 1 else ALPHA / (2 * groups)


def _pooled_below(total, runs, groups: int):
    """shown_below's pooled test (none for a single group: its own test is the pooled one);
    vectorized."""
    return (groups > 1) & (stats.binom.cdf(total, runs, USUALLY) <= ALPHA / 2 + 1e-12)


def shown_below(passed, runs) -> np.ndarray:
    """Some group's pass rate is shown below USUALLY: the groups' pooled count by an exact one-
    sided binomial test at ALPHA / 2, or one group's at ALPHA / (2 G) (G groups; one group: its
    own test at ALPHA). `passed`, `runs`: one entry per group on the last axis (leading axes a
    batch). Valid whatever the rates: if every group passes at USUALLY or more, the pooled count
    is no smaller than a Binomial(runs, USUALLY) one, so this happens with probability
    <= ALPHA (the region is monotone: its chance is largest when every rate is USUALLY)."""
    passed, runs = np.asarray(passed), np.asarray(runs)
    g = passed.shape[-1]
    one = (stats.binom.cdf(passed, runs, USUALLY) <= _single_level(g) + 1e-12).any(-1)
    return one | _pooled_below(passed.sum(-1), runs.sum(-1), g)


def group_verdict(counts: list[tuple[int, int]]) -> str:
    """The row from its groups' (passed, runs): not reproduced when some group's pass rate is
    shown below USUALLY (shown_below), reproduced when every group usually passes, else mixed
    (without its counts)."""
    passed, runs = np.array(counts).T
    if shown_below(passed, runs):
        return "not reproduced"
    if all(usually(k, n) for k, n in counts):
        return "reproduced"
    return MIXED


def judge_runs(outcomes: list[RunOutcome], powered: bool) -> str:
    """The runs' verdict on a sentence that quantifies over model groups ("for K_train <= 8",
    "for each jump pair"): underpowered unless every compared arm has MIN_RUNS runs (`powered`)
    and every group as many; else group_verdict, "mixed (k of n runs)" with the runs' counts."""
    n, k = len(outcomes), sum(o.passed for o in outcomes)
    counts = list(group_counts(outcomes).values())
    if not powered or not counts or min(m for _, m in counts) < MIN_RUNS:
        return UNDERPOWERED
    found = group_verdict(counts)
    return f"{MIXED} ({k} of {n} runs)" if found == MIXED else found


def judge_runs_earlier(outcomes: list[RunOutcome], fewest: int | None) -> str:
    """The verdict by the rule of EARLIER, printed beside today's: a run passed on its observed
    worst value; not reproduced when every run of some group failed, reproduced when every run
    passed, mixed otherwise; underpowered below EARLIER_MIN_RUNS runs in an arm (`fewest`)."""
    n = len(outcomes)
    k = sum(o.observed for o in outcomes)
    if (fewest is not None and fewest < EARLIER_MIN_RUNS) or n < EARLIER_MIN_RUNS:
        return UNDERPOWERED
    if any(p == 0 for p, _ in group_counts(outcomes, observed=True).values()):
        return "not reproduced"
    return "reproduced" if k == n else f"{MIXED} ({k} of {n} runs)"


RATES = (0.5, 0.7, 0.9)  # the pass rates at which REPORT.md states each row's error rates


def _sum_states(parts: list[list[tuple[float, int, tuple[bool, ...]]]]) -> dict:
    """The distribution of (summed count, each flag or-ed / and-ed over the parts) over
    independent parts, each a list of (probability, count, flags): flags[0:2] combine by "any",
    the rest by "all". A dynamic programme over the parts: exact, and linear in their number
    where enumerating every joint outcome is exponential."""
    states: dict[tuple, float] = {(0, False, False, True): 1.0}
    for part in parts:
        nxt: dict[tuple, float] = {}
        for (total, any0, any1, all2), p in states.items():
            for q, count, flags in part:
                key = (total + count, any0 or flags[0], any1 or flags[1], all2 and flags[2])
                nxt[key] = nxt.get(key, 0.0) + p * q
        states = nxt
    return states


def error_rates(sizes: tuple[int, ...], rates=RATES, earlier: bool = False) -> dict:
    """Exactly, for a row of groups of `sizes` runs, every run passing with the same probability
    p (each of `rates`): p -> (P(reproduced), P(not reproduced)) under group_verdict (groups are
    independent binomials; _sum_states sums over their joint outcomes); a row with fewer than
    MIN_RUNS runs in a group is underpowered, never decided. `earlier`: under the rule of
    EARLIER (reproduced when every run passes, not reproduced when every run of some group
    fails; EARLIER_MIN_RUNS runs)."""
    g, total_runs = len(sizes), sum(sizes)
    if min(sizes) < (EARLIER_MIN_RUNS if earlier else MIN_RUNS):  # underpowered: never decided
        return {p: (0.0, 0.0) for p in rates}
    out = {}
    for p in rates:
        parts = []
        for n in sizes:
            k = np.arange(n + 1)
            single = (
                k == 0 if earlier else (stats.binom.cdf(k, n, USUALLY) <= _single_level(g) + 1e-12)
            )
            holds = k == n if earlier else usually(k, n)
            parts.append(
                [
                    (float(q), int(i), (bool(s1), False, bool(h)))
                    for q, i, s1, h in zip(stats.binom.pmf(k, n, p), k, single, holds, strict=True)
                ]
            )
        rep = refuted = 0.0
        for (total, single, _, holds), q in _sum_states(parts).items():
            below = single or (not earlier and _pooled_below(total, total_runs, g))
            refuted += q * below
            rep += q * (holds and not below)
        out[p] = (float(rep), float(refuted))
    return out


def judged_sizes(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The group sizes a row's error rates are stated at: its own, MIN_RUNS where it has fewer
    (such a row reads underpowered: its rates are those of the runs that would decide it)."""
    return tuple(max(n, MIN_RUNS) for n in sizes)


def error_text(sizes: tuple[int, ...]) -> str:
    """A row's error rates in words: "if each run passes with probability 0.5: P(reproduced)
    0.002, P(not reproduced) 0.031; 0.7: ...; 0.9: ..." for its group sizes (judged_sizes)."""
    at = judged_sizes(sizes)
    rates = error_rates(at)
    fewer = (
        f"at {MIN_RUNS} runs per group (this row's fewer read underpowered), "
        if at != tuple(sizes)
        else ""
    )
    return (
        fewer
        + "if each run passes with probability "
        + "; ".join(
            f"{p:g}: P(reproduced) {a:.3f}, P(not reproduced) {b:.3f}"
            for p, (a, b) in rates.items()
        )
    )


# --- sentences comparing arms: Boschloo on the runs' generalize / fail counts -----------------


def boschloo(better: tuple[int, int], worse: tuple[int, int]) -> float:
    """One-sided p of Boschloo's exact unconditional test that the first arm's runs generalize
    more often than the second's: (runs that generalize, runs) per arm
    (scipy.stats.boschloo_exact)."""
    return _boschloo(*better, *worse)


@functools.lru_cache(maxsize=4096)
def _boschloo(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    table = np.array([[k_a, k_b], [n_a - k_a, n_b - k_b]])
    if k_a * (n_b - k_b) <= k_b * (n_a - k_a):  # the first arm's share is not above: p = 1
        return 1.0
    return float(stats.boschloo_exact(table, alternative="greater").pvalue)


def arm_verdict(tests: list[ArmTest]) -> str:
    """The row from its comparisons (each: the arm the paper says generalizes better, the arm it
    says is worse): reproduced when every comparison's Boschloo p <= ALPHA (an intersection of
    tests: P(reproduced) <= ALPHA when some worse arm generalizes as often); not reproduced when
    the worse arms are shown to generalize more often than not (shown_below on their fail
    counts) and one that generalizes at least as often as its better arm is among them (no
    harm seen); else mixed."""
    fails = np.array([(t.worse[1] - t.worse[0], t.worse[1]) for t in tests])
    no_harm = [t.worse[0] * t.better[1] >= t.better[0] * t.worse[1] for t in tests]
    if any(no_harm) and shown_below(fails[:, 0], fails[:, 1]):
        return "not reproduced"
    if all(t.p <= ALPHA for t in tests):
        return "reproduced"
    return MIXED


def judge_arms(tests: list[ArmTest], powered: bool) -> str:
    """arm_verdict, underpowered unless every arm has MIN_RUNS runs (`powered`)."""
    if not powered or not tests or min(min(t.better[1], t.worse[1]) for t in tests) < MIN_RUNS:
        return UNDERPOWERED
    return arm_verdict(tests)


ARM_RATES = ((0.9, 0.1), (0.9, 0.5), (0.9, 0.9), (0.5, 0.5))  # (better, worse) pass rates


def arm_error_rates(sizes: tuple[tuple[int, int], ...], rates=ARM_RATES) -> dict:
    """Exactly, for a row of comparisons of (better, worse) arms of `sizes` runs, the runs of
    each arm generalizing with probability (p_better, p_worse) (each of `rates`, every
    comparison alike): rates -> (P(reproduced), P(not reproduced)) under arm_verdict, summed
    over every joint outcome (the comparisons' arms independent; _sum_states)."""
    g = len(sizes)
    worse_runs = sum(nw for _, nw in sizes)
    out = {}
    for pb, pw in rates:
        parts = []
        for nb, nw in sizes:
            part = []
            for kb in range(nb + 1):
                for kw in range(nw + 1):
                    q = stats.binom.pmf(kb, nb, pb) * stats.binom.pmf(kw, nw, pw)
                    fails = nw - kw
                    single = stats.binom.cdf(fails, nw, USUALLY) <= _single_level(g) + 1e-12
                    no_harm = kw * nb >= kb * nw
                    significant = boschloo((kb, nb), (kw, nw)) <= ALPHA
                    part.append((float(q), fails, (bool(single), no_harm, significant)))
            parts.append(part)
        rep = refuted = 0.0
        for (fails, single, no_harm, significant), q in _sum_states(parts).items():
            below = no_harm and (single or _pooled_below(fails, worse_runs, g))
            refuted += q * below
            rep += q * (significant and not below)
        out[(pb, pw)] = (float(rep), float(refuted))
    return out


def arm_error_text(sizes: tuple[tuple[int, int], ...]) -> str:
    """A compared row's error rates in words (arm_error_rates), at MIN_RUNS runs per arm where
    it has fewer (judged_sizes)."""
    at = tuple((max(b, MIN_RUNS), max(w, MIN_RUNS)) for b, w in sizes)
    fewer = (
        f"at {MIN_RUNS} runs per arm (this row's fewer read underpowered), "
        if at != tuple(sizes)
        else ""
    )
    rates = "; ".join(
        f"({pb:g}, {pw:g}): P(reproduced) {a:.3f}, P(not reproduced) {b:.3f}"
        for (pb, pw), (a, b) in arm_error_rates(at).items()
    )
    return f"{fewer}if the runs generalize with probability (paper's better arm, worse arm) {rates}"


def leaning(outcomes: list[RunOutcome], observed: bool = False) -> str:
    """Where every run of an underpowered row lies on one side: "for" (all pass) or "against"
    (all fail) the paper's reading; "" when they disagree or there are none (`observed`: passing
    by the rule of EARLIER)."""
    passed = [o.observed if observed else o.passed for o in outcomes]
    if passed and all(passed):
        return "for"
    if passed and not any(passed):
        return "against"
    return ""


def arm_leaning(tests: list[ArmTest]) -> str:
    """Where an underpowered comparison of arms lies: "for" when in every comparison every run of
    the better arm generalizes and none of the worse arm's does; "against" when in every one the
    worse arm generalizes at least as often; "" otherwise."""
    if tests and all(t.better[0] == t.better[1] and t.worse[0] == 0 for t in tests):
        return "for"
    if tests and all(t.worse[0] * t.better[1] >= t.better[0] * t.worse[1] for t in tests):
        return "against"
    return ""


def more_evidence(verdict: str, found: list[Effect]) -> str:
    """One plain sentence of what more evidence would decide an undecided row ("" when decided):
    more runs where arms have fewer than MIN_RUNS, or where the runs disagree (the share that
    passes is what is unknown)."""
    if verdict == UNDERPOWERED:
        fewest = min(min(e.runs) for e in found)
        return (
            f"{fewest} run{'s' if fewest != 1 else ''} in an arm: {MIN_RUNS} or more runs per "
            "arm would let the runs' outcomes decide it"
        )
    if verdict.startswith(MIXED):
        return (
            'the runs disagree, or too few agree to tell "usually" from "sometimes": '
            "more runs per arm would measure each group's share of runs that pass"
        )
    return ""
