"""Effect sizes with bootstrap confidence intervals, for the report's comparative rules.

A comparison of two groups of models (PPC against an ablation at one depth, jump j against jump
j + 1, k_test = 4 against k_test = K_train) is the difference of their mean exact match (or
accuracy) over the lengths compared, with a 95% percentile bootstrap CI from
`scipy.stats.bootstrap`: each group's test examples (every run's, at every compared length; the
tables hold accuracy x n correct of n per run and length) are resampled independently. Runs are
pooled, not resampled as clusters: with the 2-3 runs per setting of the CPU tiers a cluster
bootstrap over runs would be degenerate, so the CI reflects test-example noise and, through the
pooling, the runs' spread only in part. A rule then asks the whole CI to clear a minimum effect
stated next to the claim; a CI that straddles it is "inconclusive".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

N_RESAMPLES = 2000  # bootstrap resamples (seeded: a report is deterministic)
SEED = 0


def outcomes(rows: pd.DataFrame) -> np.ndarray:
    """Per-example 0/1 outcomes of a table's rows: round(accuracy x n) ones and the rest zeros
    per row, pooled over the rows."""
    right = np.rint(rows.accuracy.to_numpy() * rows.n.to_numpy()).astype(int)
    total = rows.n.to_numpy().astype(int)
    cells = [np.repeat([1.0, 0.0], [r, t - r]) for r, t in zip(right, total, strict=True)]
    return np.concatenate(cells)


@dataclass(frozen=True)
class Effect:
    """A named effect: its estimate and 95% CI."""

    name: str
    estimate: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.name} {self.estimate:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def _ci(samples: tuple[np.ndarray, ...], statistic, paired: bool = False) -> tuple[float, float]:
    """95% percentile bootstrap CI of statistic over independently resampled samples (`paired`:
    resampled together); a sample without spread (all right or all wrong) gives a CI of width 0
    on its side."""
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


def gap(better: pd.DataFrame, worse: pd.DataFrame, name: str) -> Effect:
    """Mean of `better`'s examples minus mean of `worse`'s, with its bootstrap CI."""
    x, y = outcomes(better), outcomes(worse)
    low, high = _ci((x, y), lambda a, b, axis: a.mean(axis=axis) - b.mean(axis=axis))
    return Effect(name, float(x.mean() - y.mean()), low, high)


def paired(a: pd.Series, b: pd.Series, name: str) -> Effect:
    """Mean of a - b over paired units (the same held-out chunks, aligned by index), with a
    paired bootstrap CI (the units are resampled together)."""
    a, b = a.align(b, join="inner")
    x, y = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
    low, high = _ci((x, y), lambda u, v, axis: (u - v).mean(axis=axis), paired=True)
    return Effect(name, float((x - y).mean()), low, high)


def level(rows: pd.DataFrame, name: str) -> Effect:
    """Mean of the rows' examples, with its bootstrap CI."""
    x = outcomes(rows)
    low, high = _ci((x,), lambda a, axis: a.mean(axis=axis))
    return Effect(name, float(x.mean()), low, high)


def decisive(effects: list[Effect], threshold: float) -> Effect:
    """The effect a rule "every effect >= threshold" is judged on: one whose whole CI is below
    the threshold if any (the claim fails there), else the one with the lowest CI bound."""
    failing = [e for e in effects if e.high < threshold]
    return min(failing or effects, key=lambda e: (e.high, e.low) if failing else (e.low, e.high))


def judge(estimate_low: float, estimate_high: float, threshold: float) -> str:
    """reproduced when the whole CI clears the threshold, not reproduced when the whole CI is
    below it, inconclusive when it straddles (a resample of the same data could flip it)."""
    if estimate_low >= threshold:
        return "reproduced"
    if estimate_high < threshold:
        return "not reproduced"
    return "inconclusive"
