"""Effect sizes with run-level confidence intervals, and the runs a verdict would need.

The run is the unit of evidence: whether a transformer length-generalizes is decided by its
training run (our seed probes: one recipe 0.31-0.91 over five seeds), so an interval that
resamples only test examples measures test-set noise, not the spread that decides the claim.

A group of models (PPC at one depth, jump j, k_test = 4 at K_train 10) is its runs (the `seed`
column; a table without one is one run), each with its examples over the compared lengths (the
tables hold accuracy x n correct of n per run and length). Its estimate is the mean over runs of
each run's accuracy. Its 95% CI is a two-stage (hierarchical) percentile bootstrap: resample the
runs with replacement, then each drawn run's examples with replacement, and take the mean; a gap
between two groups resamples each group so, independently. With 0/1 outcomes the second stage is
a binomial draw at the run's accuracy, which is what `numpy.random.Generator.binomial` does
(seeded, so a report is deterministic). With fewer than MIN_RUNS runs in an arm the first stage
has nothing to resample, so such an effect is *underpowered*: its estimate is shown, never a
verdict.

`runs_needed` states how many runs per arm would decide an undecided effect at the observed
between-run spread (docs/rules.md, "How many runs a verdict needs").
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


def _boot(right: np.ndarray, n: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """N_RESAMPLES two-stage bootstrap means: runs drawn with replacement, then each drawn run's
    examples (a binomial draw at its accuracy), averaged over the drawn runs."""
    idx = rng.integers(0, len(n), size=(N_RESAMPLES, len(n)))
    draws = rng.binomial(n[idx].astype(np.int64), right[idx] / n[idx]) / n[idx]
    return draws.mean(axis=1)


def _sd(right: np.ndarray, n: np.ndarray) -> float:
    """Between-run standard deviation of the runs' accuracies (nan with one run)."""
    return float(np.std(right / n, ddof=1)) if len(n) > 1 else math.nan


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


def _arm(rows: pd.DataFrame, rng: np.random.Generator):
    """One compared group: its run-mean accuracy, its bootstrap means, its runs and their
    between-run standard deviation."""
    right, n = runs_of(rows)
    return float((right / n).mean()), _boot(right, n, rng), len(n), _sd(right, n)


def gap(better: pd.DataFrame, worse: pd.DataFrame, name: str) -> Effect:
    """Run-mean accuracy of `better` minus `worse`, with its hierarchical bootstrap CI."""
    rng = np.random.default_rng(SEED)
    (mean_a, boot_a, runs_a, sd_a), (mean_b, boot_b, runs_b, sd_b) = (
        _arm(better, rng), _arm(worse, rng))  # fmt: skip
    low, high = np.percentile(boot_a - boot_b, [2.5, 97.5])
    return Effect(name, mean_a - mean_b, float(low), float(high), (runs_a, runs_b), (sd_a, sd_b))


def level(rows: pd.DataFrame, name: str) -> Effect:
    """Run-mean accuracy of the rows, with its hierarchical bootstrap CI."""
    mean, boot, runs, sd = _arm(rows, np.random.default_rng(SEED))
    low, high = np.percentile(boot, [2.5, 97.5])
    return Effect(name, mean, float(low), float(high), (runs,), (sd,))


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


def runs_needed(effect: Effect, threshold: float) -> int | None:
    """Runs per arm at which the effect's 95% CI would clear `threshold` (on the side its
    estimate is) with 80% power, at the observed between-run spread: the normal approximation
    n = (z_0.975 + z_0.8)^2 x (sum of the arms' between-run variances) / (estimate -
    threshold)^2, at least MIN_RUNS. None when an arm has one run (no spread to go on); a very
    large number when the estimate sits on the threshold."""
    if any(math.isnan(s) for s in effect.sds):
        return None
    distance = abs(effect.estimate - threshold)
    variance = sum(s**2 for s in effect.sds)
    if distance == 0:
        return math.inf if variance > 0 else MIN_RUNS
    z = stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER)
    return max(MIN_RUNS, math.ceil(z**2 * variance / distance**2))


def needed_text(effects: list[Effect], threshold: float) -> str:
    """What would decide the undecided effects (underpowered, or a CI straddling the threshold):
    the most runs per arm any of them needs, or what is missing to estimate it."""
    undecided = [e for e in effects if not e.powered or e.low < threshold <= e.high]
    if not undecided:
        return ""
    needs = [runs_needed(e, threshold) for e in undecided]
    if None in needs:
        return f"an arm has one run: >= {MIN_RUNS} runs per arm to measure the between-run spread"
    most = max(needs)
    if math.isinf(most):
        return "the estimate sits on the threshold: no number of runs decides it"
    return f"~{most:,} runs per arm would decide it at the observed between-run spread"
