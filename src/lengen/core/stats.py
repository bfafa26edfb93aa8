"""Bootstrap helpers the analysis and the report share (Fig. 4: how near the diagonal; Fig. 6: a
correlation; a mean with its CI)."""

from __future__ import annotations

import numpy as np


def _slope_spread(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(slope, spread) along the last axis: the symmetric (reduced major axis) slope through the
    origin, sign(sum xy) * sqrt(sum y^2 / sum x^2), and RMS of (y - x) over RMS of x."""
    slope = np.sign((x * y).sum(-1)) * np.sqrt((y**2).sum(-1) / (x**2).sum(-1))
    spread = np.sqrt(((y - x) ** 2).mean(-1) / (x**2).mean(-1))
    return slope, spread


def diagonal_fit(x: np.ndarray, y: np.ndarray, n_boot: int = 2000, seed: int = 0) -> dict:
    """How near the points (x, y) = (L_short - L_long, L_short - L_short,sparse) lie to y = x
    (Figs. 4/6): slope and spread (see _slope_spread), each with a 95% CI from n_boot resamples
    of the points (seeded). Points on y = x give slope 1, spread 0; no relation, spread >= 1."""
    slope, spread = _slope_spread(x, y)
    idx = np.random.default_rng(seed).integers(0, len(x), size=(n_boot, len(x)))
    boot_slope, boot_spread = _slope_spread(x[idx], y[idx])
    (s_lo, s_hi), (d_lo, d_hi) = (np.percentile(b, [2.5, 97.5]) for b in (boot_slope, boot_spread))
    return {
        "slope": float(slope),
        "slope_ci_low": float(s_lo),
        "slope_ci_high": float(s_hi),
        "spread": float(spread),
        "spread_ci_low": float(d_lo),
        "spread_ci_high": float(d_hi),
    }


def mean_with_ci(x: np.ndarray, n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of x (e.g. L_short - L_long over the examples) and its bootstrap 95% CI (seeded)."""
    idx = np.random.default_rng(seed).integers(0, len(x), size=(n_boot, len(x)))
    lo, hi = np.percentile(x[idx].mean(axis=1), [2.5, 97.5])
    return float(x.mean()), float(lo), float(hi)


def correlation_ci(x: np.ndarray, y: np.ndarray, n_boot: int = 2000, seed: int = 0) -> dict:
    """Pearson's r of the points (x, y) and its 95% percentile CI from n_boot resamples of the
    points (seeded): Fig. 6's "a similar positive correlation"."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)

    def pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a = a - a.mean(-1, keepdims=True)
        b = b - b.mean(-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))

    idx = np.random.default_rng(seed).integers(0, len(x), size=(n_boot, len(x)))
    lo, hi = np.nanpercentile(pearson(x[idx], y[idx]), [2.5, 97.5])
    return {
        "pearson_r": float(pearson(x, y)),
        "pearson_r_ci_low": float(lo),
        "pearson_r_ci_high": float(hi),
    }
