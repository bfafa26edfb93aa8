"""Effect sizes with run-level confidence intervals, and the runs a verdict would need.

The run is the unit of evidence: whether a transformer length-generalizes is decided by its
training run (our seed probes: one recipe 0.31-0.91 over five seeds), so an interval that
resamples only test examples measures test-set noise, not the spread that decides the claim.

A group of models (PPC at one depth, jump j, k_test = 4 at K_train 10) is its runs (the `seed`
column; a table without one is one run), each with its examples over the compared lengths (the
tables hold accuracy x n correct of n per run and length). Its estimate is the mean over runs of
each run's accuracy. Its 95% CI is a t-interval on the run means (issue 64): the variance of the
mean is the runs' own spread, s^2 / r (which holds both the between-run spread and each run's
test-set noise), but never below what the runs' test examples alone give, sum p(1 - p) / n / r^2
(p: each run's accuracy with half an example added to each side, so that three runs all at 1.0
still get an interval), with r - 1 degrees of freedom. A gap between two groups is a Welch
interval (Welch-Satterthwaite degrees of freedom). A level is clipped to [0, 1], a gap to [-1, 1].

Why not the bootstrap this module used before: resampling 3 runs with replacement has only 10
distinct resamples, so a percentile bootstrap over them covers the true value ~76% of the time at
a between-run SD of 0.1 (issue 64's simulation; tests/test_effects.py measures both). The t
quantile at 2 degrees of freedom (4.30) is what 3 runs honestly allow. Simulated coverage
(tests/test_effects.py): >= 0.93 at 3 and 5 runs per arm, between-run SDs 0.02-0.2 at 0.5 and
accuracies near 0 and 1; a strongly skewed spread costs some (0.923 at 3 runs, mean 0.7, SD
0.2). With fewer than MIN_RUNS runs in an arm such an effect is *underpowered*: its estimate is
shown, never a verdict.

`runs_needed` states how many runs per arm would decide an undecided effect, as a range over the
between-run spread its few runs allow (docs/rules.md, "How many runs a verdict needs").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

N_RESAMPLES = 2000  # bootstrap resamples (seeded: a report is deterministic)
SEED = 0
MIN_RUNS = 3  # runs per compared arm below which a comparison reads "underpowered"
ALPHA, POWER = 0.05, 0.8  # runs_needed: a two-sided 95% CI clearing the threshold, 80% power
UNDERPOWERED = "underpowered"


def runs_of(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(examples right, examples scored) per run (the `seed` column; one run without it), pooled
    over the rows' cells (lengths, k_test)."""
    n = rows.n.to_numpy(dtype=float)
    per = pd.DataFrame({
        "run": rows.seed.to_numpy() if "seed" in rows else np.zeros(len(rows), dtype=int),
        "right": np.rint(rows.accuracy.to_numpy(dtype=float) * n),
        "n": n,
    }).groupby("run")[["right", "n"]].sum()  # fmt: skip
    return per.right.to_numpy(), per.n.to_numpy()


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
    (mean_a, var_a), (mean_b, var_b) = mean_and_variance(right_a, n_a), mean_and_variance(
        right_b, n_b)  # fmt: skip
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

    @property
    def powered(self) -> bool:
        """Every arm has at least MIN_RUNS runs."""
        return min(self.runs) >= MIN_RUNS

    def __str__(self) -> str:
        runs = "/".join(map(str, self.runs))
        return f"{self.name} {self.estimate:+.3f} [{self.low:+.3f}, {self.high:+.3f}] ({runs} runs)"


def gap(better: pd.DataFrame, worse: pd.DataFrame, name: str) -> Effect:
    """Run-mean accuracy of `better` minus `worse`, with its Welch t-interval (gap_interval)."""
    (right_a, n_a), (right_b, n_b) = runs_of(better), runs_of(worse)
    estimate, low, high = map(float, gap_interval(right_a, n_a, right_b, n_b))
    return Effect(name, estimate, low, high, (len(n_a), len(n_b)),
                  (_sd(right_a, n_a), _sd(right_b, n_b)))  # fmt: skip


def level(rows: pd.DataFrame, name: str) -> Effect:
    """Run-mean accuracy of the rows, with its t-interval (level_interval)."""
    right, n = runs_of(rows)
    estimate, low, high = map(float, level_interval(right, n))
    return Effect(name, estimate, low, high, (len(n),), (_sd(right, n),))


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


def decisive(effects: list[Effect], threshold: float) -> Effect:
    """The effect a rule "every effect >= threshold" is judged on: a powered effect whose whole
    CI is below the threshold if any (the claim fails there); else, if any effect is
    underpowered, the underpowered one with the lowest CI bound (nothing is decided); else the
    one with the lowest CI bound."""
    failing = [e for e in effects if e.powered and e.high < threshold]
    if failing:
        return min(failing, key=lambda e: (e.high, e.low))
    weak = [e for e in effects if not e.powered]
    return min(weak or effects, key=lambda e: (e.low, e.high))


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


def _runs_for(variance: float, distance: float, arms: int) -> float:
    """Runs per arm at which a t-interval of that between-run variance (summed over the arms)
    clears a threshold `distance` away with POWER: the smallest n >= MIN_RUNS with
    (t_{1-ALPHA/2} + t_{POWER})^2 x variance / distance^2 <= n at arms x (n - 1) degrees of
    freedom (fixed-point iteration from the normal approximation)."""
    if variance == 0:
        return MIN_RUNS
    if distance == 0:
        return math.inf
    n = float(MIN_RUNS)
    for _ in range(50):
        df = arms * (max(n, 2) - 1)
        t = stats.t.ppf(1 - ALPHA / 2, df) + stats.t.ppf(POWER, df)
        new = max(float(MIN_RUNS), t**2 * variance / distance**2)
        if abs(new - n) < 0.5:
            break
        n = new
    return math.ceil(n)


def runs_needed(effect: Effect, threshold: float) -> tuple[float, float] | None:
    """Runs per arm at which the effect's 95% t-interval would clear `threshold` (on the side
    its estimate is) with 80% power, assuming the true effect is the observed one: a range, from
    the low to the high end of the between-run variance's 95% interval (chi-square, r - 1
    degrees of freedom per arm: with 3 runs the variance is known within a factor of ~1,000, and
    so is the number). None when an arm has one run (no spread to go on); infinite when the
    estimate sits on the threshold and the runs differ."""
    if any(math.isnan(s) for s in effect.sds):
        return None
    distance = abs(effect.estimate - threshold)
    lows, highs = [], []
    for sd, runs in zip(effect.sds, effect.runs, strict=True):
        df = runs - 1
        lows.append(sd**2 * df / stats.chi2.ppf(1 - ALPHA / 2, df))
        highs.append(sd**2 * df / stats.chi2.ppf(ALPHA / 2, df))
    arms = len(effect.sds)
    return _runs_for(sum(lows), distance, arms), _runs_for(sum(highs), distance, arms)


def needed_text(effects: list[Effect], threshold: float) -> str:
    """What would decide the undecided effects (underpowered, or a CI straddling the threshold):
    the range of runs per arm the most demanding of them needs (runs_needed), with its
    assumption, or what is missing to estimate it."""
    undecided = [e for e in effects if not e.powered or e.low < threshold <= e.high]
    if not undecided:
        return ""
    needs = [runs_needed(e, threshold) for e in undecided]
    if None in needs:
        return f"an arm has one run: >= {MIN_RUNS} runs per arm to measure the between-run spread"
    low, high = max(n[0] for n in needs), max(n[1] for n in needs)
    if math.isinf(low):
        return "the estimate sits on the threshold: no number of runs decides it"
    fewest = min(min(e.runs) for e in undecided)
    span = f"~{low:,}" if low == high else f"~{low:,}-{high:,}" if math.isfinite(high) else (
        f"{low:,} or more")  # fmt: skip
    return (f"{span} runs per arm would decide it, if the true effect is the one observed (the "
            f"range: the between-run spread's 95% interval from {fewest} runs)")  # fmt: skip
