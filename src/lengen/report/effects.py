"""Effect sizes, each run's own outcome, and the verdict the runs give.

The run is the unit of evidence: whether a transformer length-generalizes is decided by its
training run, and runs like ours either generalize or fail (one recipe's five seeds: 0.31-0.91 at
2l = 500, one of them 0.055 at 2l = 200). So a verdict is read off the runs themselves: each run
passes or fails the sentence's own per-run criterion (its accuracy, or its gap to the paired run
of the compared arm, against the rule's threshold, in every cell the rule names), and the row is
*reproduced* only when every run passes, *not reproduced* when every run fails, *mixed (k of n
runs)* otherwise, with an exact (Clopper-Pearson) 95% interval on the share of runs that pass;
*underpowered* with fewer than MIN_RUNS runs in a compared arm (its runs' leaning is said).

Why not an interval on the run means: fitted to this data's cells (lengen.report.coverage: the
runs drawn from each committed cell's own run outcomes, a generalize-or-fail mixture, and a
smooth Beta spread), the t-interval on 3 run means covers the true mean as little as 0.65 of the
time (median 0.93, over half the cells below 0.93), 0.83 at 5 runs, and no run count up to 100
makes it hold >= 0.93 in every such model (skewed cells near 1.0 stay below). So the run mean is
shown without an interval; the exact interval on the share of runs that pass holds >= 0.95 in
every model (tests/test_effects.py measures both).

How the per-run values pair up: a level's runs are its rows' `run` ids (the seed without one); a
gap between two cells of one model (k_test 4 vs 8 of the same run) pairs each run with itself; a
gap between two models pairs their runs by seed (independent runs, so any pairing gives
independent paired draws; by seed makes it reproducible).

The t-interval (a level: s^2 / r, at least the examples' binomial variance, r - 1 degrees of
freedom; a gap: Welch) stays as the tool for the one-run, many-example effects of the language
models (`paired`: a bootstrap over held-out chunks) and for the coverage study.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from lengen.core.claims import RunOutcome

N_RESAMPLES = 2000  # bootstrap resamples (seeded: a report is deterministic)
SEED = 0
MIN_RUNS = 3  # runs per compared arm below which a comparison reads "underpowered"
ALPHA = 0.05  # two-sided 95% intervals
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


def run_accuracies(rows: pd.DataFrame) -> dict[str, float]:
    """Each run's accuracy pooled over the rows' cells, by run id (the `run` column; the seed
    without one; a single run "run" without either)."""
    key = (rows.run.astype(str).to_numpy() if "run" in rows
           else rows.seed.astype(str).to_numpy() if "seed" in rows
           else np.full(len(rows), "run"))  # fmt: skip
    per = _pooled(rows, key)
    return {str(k): float(v) for k, v in (per.right / per.n).items()}


def _seed_of(rows: pd.DataFrame) -> dict[str, str]:
    """run id -> seed (as text) for the rows' runs (run_accuracies' ids)."""
    if "run" not in rows:
        return {}
    seeds = rows.seed if "seed" in rows else pd.Series("0", index=rows.index)
    return {str(r): str(s) for r, s in zip(rows.run, seeds, strict=True)}


def paired_runs(better: pd.DataFrame, worse: pd.DataFrame) -> tuple[tuple[str, float], ...]:
    """Each run's own gap, better minus worse: the same run ids in both (two cells of one model)
    pair with themselves; otherwise runs pair by seed (module docstring); unpaired runs drop."""
    a, b = run_accuracies(better), run_accuracies(worse)
    if set(a) & set(b):
        return tuple((r, a[r] - b[r]) for r in sorted(set(a) & set(b)))
    seed_a, seed_b = _seed_of(better), _seed_of(worse)
    by_seed_b = {seed_b.get(r, r): r for r in b}
    out = []
    for r in sorted(a):
        other = by_seed_b.get(seed_a.get(r, r))
        if other is not None:
            out.append((f"{r} - {other}", a[r] - b[other]))
    return tuple(out)


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
    # each run's own value (a level: its accuracy; a gap: its paired gap), by run id
    per_run: tuple[tuple[str, float], ...] = ()
    # the model group the sentence quantifies over ("K_train 8", "jump 1 minus 2"; "": the
    # effect's name): its runs are judged together (judge_runs)
    group: str = ""

    @property
    def powered(self) -> bool:
        """Every arm has at least MIN_RUNS runs."""
        return min(self.runs) >= MIN_RUNS

    def __str__(self) -> str:
        """'name +mean (runs: v1, v2, v3)' for an effect of runs; 'name +estimate [CI] (n runs)'
        for one without per-run values (a paired effect of one model)."""
        if self.per_run:
            return f"{self.name} {self.estimate:+.3f} (runs: " + ", ".join(
                f"{v:+.2f}" for _, v in self.per_run) + ")"  # fmt: skip
        runs = "/".join(map(str, self.runs))
        return f"{self.name} {self.estimate:+.3f} [{self.low:+.3f}, {self.high:+.3f}] ({runs} runs)"


def gap(better: pd.DataFrame, worse: pd.DataFrame, name: str, group: str = "") -> Effect:
    """Run-mean accuracy of `better` minus `worse`, with its Welch t-interval (gap_interval)
    and each run's paired gap (paired_runs); `group`: the model group it belongs to."""
    (right_a, n_a), (right_b, n_b) = runs_of(better), runs_of(worse)
    estimate, low, high = map(float, gap_interval(right_a, n_a, right_b, n_b))
    return Effect(name, estimate, low, high, (len(n_a), len(n_b)),
                  (_sd(right_a, n_a), _sd(right_b, n_b)),
                  paired_runs(better, worse), group or name)  # fmt: skip


def level(rows: pd.DataFrame, name: str, group: str = "") -> Effect:
    """Run-mean accuracy of the rows, with its t-interval (level_interval) and each run's
    accuracy; `group`: the model group it belongs to."""
    right, n = runs_of(rows)
    estimate, low, high = map(float, level_interval(right, n))
    return Effect(name, estimate, low, high, (len(n),), (_sd(right, n),),
                  tuple(sorted(run_accuracies(rows).items())), group or name)


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


def run_outcomes(found: list[Effect], threshold: float) -> list[RunOutcome]:
    """Each run's outcome over the effects (its per-run values), per model group: it passes
    when every value it has is >= threshold (the sentence holds in every cell for that run)."""
    worst: dict[str, dict[str, float]] = {}  # group (in the effects' order) -> run -> value
    for e in found:
        runs = worst.setdefault(e.group or e.name, {})
        for run, value in e.per_run:
            runs[run] = min(value, runs.get(run, math.inf))
    return [RunOutcome(r, v, v >= threshold, g)
            for g, runs in worst.items() for r, v in sorted(runs.items())]  # fmt: skip


def share_interval(passed: int, runs: int) -> tuple[float, float]:
    """Exact (Clopper-Pearson) 95% interval on the share of runs that pass, `passed` of
    `runs`: its coverage is >= 0.95 whatever the share (scipy.stats.binomtest)."""
    ci = stats.binomtest(passed, runs).proportion_ci(1 - ALPHA, method="exact")
    return float(ci.low), float(ci.high)


def judge_runs(outcomes: list[RunOutcome], powered: bool) -> str:
    """The runs' verdict on a sentence that quantifies over model groups ("for K_train <= 8",
    "for each jump pair"): underpowered unless every compared arm has MIN_RUNS runs (`powered`);
    not reproduced when every run of some group fails (the sentence fails for that group, its
    runs agreeing); reproduced when every run of every group passes; "mixed (k of n runs)"
    otherwise (some group's runs disagree)."""
    n, k = len(outcomes), sum(o.passed for o in outcomes)
    if not powered or n < MIN_RUNS:
        return UNDERPOWERED
    groups: dict[str, list[bool]] = {}
    for o in outcomes:
        groups.setdefault(o.group, []).append(o.passed)
    if any(not any(g) for g in groups.values()):
        return "not reproduced"
    if k == n:
        return "reproduced"
    return f"{MIXED} ({k} of {n} runs)"


def leaning(outcomes: list[RunOutcome]) -> str:
    """Where every run of an underpowered row lies on one side: "for" (all pass) or "against"
    (all fail) the paper's reading; "" when they disagree or there are none."""
    if outcomes and all(o.passed for o in outcomes):
        return "for"
    if outcomes and not any(o.passed for o in outcomes):
        return "against"
    return ""


def more_evidence(verdict: str, found: list[Effect]) -> str:
    """One plain sentence of what more evidence would decide an undecided row ("" when decided):
    more runs where arms have fewer than MIN_RUNS, or where the runs disagree (the share that
    passes is what is unknown)."""
    if verdict == UNDERPOWERED:
        fewest = min(min(e.runs) for e in found)
        return (f"{fewest} run{'s' if fewest != 1 else ''} in an arm: {MIN_RUNS} or more runs per "
                "arm would give each run's outcome a verdict")  # fmt: skip
    if verdict.startswith(MIXED):
        return ("the runs disagree: more runs per arm would measure the share of runs that "
                "pass, not the mean")
    return ""
