"""How often the report's intervals cover the truth on runs like ours: outcome models fitted to
the committed cells, and the coverage of an interval method drawn from them.

    python -m lengen.report.coverage --tables reference/default --runs 3 5 30

A cell is one (model, tested length, ...) of a committed table with >= 3 runs whose run
accuracies differ (SD >= 0.02). Each cell gives two outcome models, each scored on the cell's
number of examples (a binomial draw per run):

- **runs**: each run's true accuracy is one of the cell's own run accuracies, drawn uniformly:
  the data's generalize-or-fail mixture as it is (0.97, 0.95, 0.31 stays three runs that either
  generalized or did not);
- **smooth**: a Beta with the cell's mean and SD (the smooth spread the t-interval assumes).

and the generic mixtures of MIXTURES (runs that generalize near 0.97 or fail near 0.5 or 0.1).
The true value is the model's mean (a level), or, for the share of runs passing a threshold,
the model's probability that a run passes. lengen.report.effects reads the result: the
t-interval on run means does not hold in every model at any run count up to 100, so the report
decides on each run's outcome, with an exact interval on the share that pass (its coverage is
>= 0.95 in every model by construction; tests/test_effects.py measures both).

No workflow job imports this module: it is the study behind the verdict rule, run by
tests/test_effects.py and by hand (docs/rules.md) when the rule or the committed data change.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from lengen.core.cli import KnownError, command_parser, one_line_errors
from lengen.report import effects

# the tables a tier's cells come from, with the columns naming one cell (beside seed and run)
CELL_KEYS = {
    "sparse_parity_accuracy.csv": ["variant", "k_train", "k_test", "length"],
    "parity_scratchpad_accuracy.csv": ["variant", "jump", "length"],
    "variable_assignment_accuracy.csv": ["variant", "depth", "length"],
    "majority_accuracy.csv": ["variant", "train_max_len", "length"],
}
MIN_SD = 0.02  # cells whose runs agree closer than this are left out (every method covers them)
MIN_CELL_RUNS = 3  # a cell's runs: the fewest a committed cell needs to give an outcome model
# (success level, failure level, share of runs that succeed): runs that either generalize or fail
MIXTURES = [(0.97, 0.5, 2 / 3), (0.97, 0.5, 1 / 3), (0.97, 0.1, 2 / 3), (0.97, 0.1, 1 / 3)]


class NoCells(KnownError, ValueError):
    """A folder without a committed table of >= 3 runs a cell."""


@dataclass(frozen=True)
class Cell:
    """One committed cell: its name, its runs' accuracies and the examples each run is scored
    on."""

    name: str
    accuracies: np.ndarray
    n: int


def cells(folder: Path) -> list[Cell]:
    """The cells of a tier's committed tables with >= MIN_CELL_RUNS runs and a between-run
    SD >= MIN_SD."""
    found = []
    for table, keys in CELL_KEYS.items():
        path = Path(folder) / table
        if not path.is_file():
            continue
        d = pd.read_csv(path)
        for key, g in d.groupby(keys):
            acc = g.accuracy.to_numpy(dtype=float)
            if g.seed.nunique() >= MIN_CELL_RUNS and np.std(acc, ddof=1) >= MIN_SD:
                name = table.removesuffix("_accuracy.csv") + " " + "/".join(map(str, key))
                found.append(Cell(name, acc, int(g.n.iloc[0])))
    return found


def draw(model: str, cell: Cell | tuple, runs: int, trials: int, rng) -> np.ndarray:
    """Run accuracies, shape (trials, runs), from one outcome model: "runs" or "smooth" of a
    Cell, or "mixture" of a MIXTURES entry."""
    if model == "runs":
        return rng.choice(cell.accuracies, size=(trials, runs))
    if model == "smooth":
        mean, sd = cell.accuracies.mean(), cell.accuracies.std(ddof=1)
        sd = min(sd, 0.99 * np.sqrt(mean * (1 - mean)))  # the widest Beta of that mean
        k = mean * (1 - mean) / sd**2 - 1
        return rng.beta(mean * k, (1 - mean) * k, (trials, runs))
    success, failure, share = cell
    return np.where(rng.random((trials, runs)) < share, success, failure)


def truth(model: str, cell: Cell | tuple) -> float:
    """The model's mean run accuracy."""
    if model == "mixture":
        success, failure, share = cell
        return share * success + (1 - share) * failure
    return float(cell.accuracies.mean())


def t_coverage(model: str, cell, runs: int, n: int, trials: int, rng) -> float:
    """How often the t-interval on run means (effects.level_interval) covers the model's mean."""
    right = rng.binomial(n, draw(model, cell, runs, trials, rng)).astype(float)
    _, low, high = effects.level_interval(right, np.full_like(right, n))
    mean = truth(model, cell)
    return float(((low <= mean) & (mean <= high)).mean())


def pass_probability(model: str, cell, n: int, threshold: float, rng) -> float:
    """The model's probability that a run's measured accuracy (k of n examples) is >= threshold:
    exact for "runs" and "mixture" (binomial tails), from 20,000 draws for "smooth"."""
    need = np.ceil(threshold * n - 1e-9)  # the fewest examples right that pass
    if model == "smooth":
        acc = rng.binomial(n, draw(model, cell, 1, 20_000, rng)) / n
        return float((acc >= threshold).mean())
    if model == "runs":
        levels, weights = cell.accuracies, np.full(len(cell.accuracies), 1 / len(cell.accuracies))
    else:
        success, failure, share = cell
        levels, weights = np.array([success, failure]), np.array([share, 1 - share])
    return float((weights * stats.binom.sf(need - 1, n, levels)).sum())


def share_coverage(
    model: str, cell, runs: int, n: int, threshold: float, trials: int, rng
) -> float:
    """How often the exact interval on the share of runs >= threshold (effects.share_interval)
    covers the model's probability that a run passes (each run's examples drawn, as the report
    judges the run on its measured accuracy)."""
    acc = rng.binomial(n, draw(model, cell, runs, trials, rng)) / n
    passed = (acc >= threshold).sum(axis=1)
    p = pass_probability(model, cell, n, threshold, rng)
    intervals = {k: effects.share_interval(k, runs) for k in range(runs + 1)}
    low = np.array([intervals[k][0] for k in passed])
    high = np.array([intervals[k][1] for k in passed])
    return float(((low <= p) & (p <= high)).mean())


def study(folder: Path, runs: list[int], trials: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The t-interval's coverage per cell, model and run count (one row each), and the
    mixtures'."""
    rng = np.random.default_rng(seed)
    rows = []
    for cell in cells(folder):
        for model in ("runs", "smooth"):
            for r in runs:
                rows.append(
                    {
                        "cell": cell.name,
                        "model": model,
                        "runs": r,
                        "coverage": t_coverage(model, cell, r, cell.n, trials, rng),
                    }
                )
    for mix in MIXTURES:
        for r in runs:
            rows.append(
                {
                    "cell": "mixture {:.2f}/{:.2f}/{:.2f}".format(*mix),
                    "model": "mixture",
                    "runs": r,
                    "coverage": t_coverage("mixture", mix, r, 192, trials, rng),
                }
            )
    return pd.DataFrame(rows)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: the t-interval's coverage on a tier's committed cells, summarised per model and run
    count (median, worst, share of cells below 0.93)."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument("--tables", type=Path, default=Path("reference/default"))
    parser.add_argument("--runs", type=int, nargs="+", default=[3, 5, 30, 100])
    parser.add_argument("--trials", type=int, default=2000)
    args = parser.parse_args(argv)
    if not cells(args.tables):
        raise NoCells(f"{args.tables}: no table with cells of >= 3 runs")
    d = study(args.tables, args.runs, args.trials)
    summary = d.groupby(["model", "runs"]).coverage.agg(
        cells="size", median="median", worst="min", below_093=lambda c: float((c < 0.93).mean())
    )
    print(summary.round(3).to_string())


if __name__ == "__main__":
    main()
