"""Eq. (6)'s contexts (Sec. 5.3, Figs. 4-6) as keep-masks over X_1..X_{Lbar-1}: True where a
token stays visible. lengen.analysis.influence runs the model on them; Fig. 5 draws them.
Indices are the paper's, 1-based: far tokens j in [Lbar - L - 1], the recent window the last L."""

from __future__ import annotations

import numpy as np


def loo_keep(long_len: int, short_len: int, start: int = 0, stop: int | None = None) -> np.ndarray:
    """One row per far token j in [Lbar - L - 1]: everything kept but j. (n_far, Lbar - 1);
    only rows start..stop - 1 (0-based) when given, so that a long Lbar's masks are made a pass
    at a time, never all at once."""
    n_far = long_len - short_len - 1
    stop = n_far if stop is None else min(stop, n_far)
    rows = np.arange(start, stop)
    keep = np.ones((len(rows), long_len - 1), dtype=bool)
    keep[np.arange(len(rows)), rows] = False
    return keep


def context_keeps(long_len: int, short_len: int, J: list[int]) -> np.ndarray:
    """Rows for L_short, L_long and L_short,sparse(J) (Fig. 5): (3, Lbar - 1)."""
    n_far = long_len - short_len - 1
    keep = np.ones((3, long_len - 1), dtype=bool)
    keep[0, :n_far] = False  # short: the recent window only
    keep[2, :n_far] = False  # sparse: the window and X_J
    keep[2, [j - 1 for j in J]] = True
    return keep
