"""Majority's claim (not in the paper: C-RASP, Huang et al. 2024): its rule and its row, MJ-1."""

from __future__ import annotations

from dataclasses import replace

from lengen.report.claims.base import (
    NEAR_PERFECT,
    RUN_OUTCOMES,
    Claim,
    Measured,
    NotTestable,
    Rule,
    Tables,
    cell_levels,
    effect_claim,
    effect_measured,
    not_learned,
)

# the test-to-training length ratio of its claim: near-perfect to twice the training length
PAPER_RATIO = 2.0

RULES = (
    Rule(
        sentence="MJ-1",
        section="not in the paper (C-RASP: Huang et al. 2024)",
        paper="majority (k = n): C-RASP predicts length generalization with absolute positions",
        window="lengths in (L, 2L], absolute PE",
        threshold=NEAR_PERFECT,
        gate=f"absolute PE >= {NEAR_PERFECT} in distribution",
        interval=RUN_OUTCOMES,
        reason="a claim beyond the paper: near-perfect to twice the training length",
    ),
)


def beyond_training(t: Tables) -> Measured | NotTestable | None:
    """Per length in (L, 2L], L the longest training length: each absolute-PE run's accuracy,
    judged on the runs against NEAR_PERFECT. Testable when absolute PE learned the task in
    distribution. The row can discriminate only where some other scheme fails there (run mean
    < NEAR_PERFECT): where every scheme generalizes, the lengths are too easy to tell C-RASP's
    prediction from any other, and the row is shown, not counted (Measured.uncounted)."""
    d = t.table("majority")
    if d is None or "absolute" not in set(d.variant):
        return None
    weak = not_learned(t, "majority", ["absolute"])
    if weak:
        return NotTestable("not learned in distribution (< 0.9): " + ", ".join(weak))
    longest = max(t.cfg["majority"]["train_max_lens"])
    window = d[(d.length > longest) & (d.length <= PAPER_RATIO * longest)]
    sub = window[window.variant == "absolute"]
    if not len(sub):
        return None
    name = lambda n: f"absolute at n = {n}"  # noqa: E731
    m = effect_measured(cell_levels(sub, ["length"], name, lambda n: "absolute"), NEAR_PERFECT)
    others = window[window.variant != "absolute"].groupby(["variant", "length"]).accuracy.mean()
    if len(others) and (others >= NEAR_PERFECT).all():
        return replace(
            m,
            uncounted="cannot discriminate: every scheme run ("
            + ", ".join(sorted(window.variant.unique()))
            + f") is >= {NEAR_PERFECT} in (L, 2L]",
        )
    return m


def claims(cfg: dict) -> list[Claim]:
    """MJ-1, a claim beyond the paper."""
    return [
        Claim(
            "MJ-1",
            "not in the paper (C-RASP: Huang et al. 2024)",
            "majority (k = n, not sparse): C-RASP predicts length generalization with "
            "absolute positions; the sparsity theory (Sec. 4) does not predict it",
            "per length in (L, 2L], L its longest training length: each absolute-PE run's "
            "accuracy, the lowest run mean shown; learned >= 0.9 in distribution; counted "
            "only where another scheme (RoPE + PoSE, NoPE, ALiBi: fig_majority.png) fails there",
            beyond_training,
            **effect_claim(NEAR_PERFECT, '"generalizes", at every length'),
            kind="beyond",
        ),
    ]
