"""Majority's claim (not in the paper: C-RASP, Huang et al. 2024): its rule and its row, MJ-1."""

from __future__ import annotations

from lengen.report.claims.base import (
    NEAR_PERFECT,
    RUN_MEANS_T,
    Claim,
    Measured,
    NotTestable,
    Rule,
    Tables,
    cell_levels,
    effect_measured,
    not_learned,
)

# the test-to-training length ratio of its claim: near-perfect to twice the training length
PAPER_RATIO = 2.0

RULES = (
    Rule("MJ-1", "not in the paper (C-RASP: Huang et al. 2024)",
         "majority (k = n): C-RASP predicts length generalization with absolute positions",
         "lengths in (L, 2L], absolute PE", NEAR_PERFECT,
         f"absolute PE >= {NEAR_PERFECT} in distribution", RUN_MEANS_T,
         "a claim beyond the paper: near-perfect to twice the training length"),
)  # fmt: skip


def beyond_training(t: Tables) -> Measured | NotTestable | None:
    """Per length in (L, 2L], L the longest training length: absolute PE's run-mean accuracy
    with its CI; the decisive length against NEAR_PERFECT. Testable when absolute PE learned
    the task in distribution."""
    d = t.table("majority")
    if d is None or "absolute" not in set(d.variant):
        return None
    weak = not_learned(t, "majority", ["absolute"])
    if weak:
        return NotTestable("not learned in distribution (< 0.9): " + ", ".join(weak))
    longest = max(t.cfg["majority"]["train_max_lens"])
    sub = d[(d.variant == "absolute") & (d.length > longest) & (d.length <= PAPER_RATIO * longest)]
    if not len(sub):
        return None
    name = lambda n: f"absolute at n = {n}"  # noqa: E731
    return effect_measured(cell_levels(sub, ["length"], name), NEAR_PERFECT)


def claims(cfg: dict) -> list[Claim]:
    """MJ-1, a claim beyond the paper."""
    return [
        Claim("MJ-1", "not in the paper (C-RASP: Huang et al. 2024)",
              "majority (k = n, not sparse): C-RASP predicts length generalization with "
              "absolute positions; the sparsity theory (Sec. 4) does not predict it",
              "per length in (L, 2L], L its longest training length: absolute PE's run-mean "
              "accuracy, the decisive length shown; learned >= 0.9 in distribution (RoPE + "
              "PoSE, NoPE, ALiBi: fig_majority.png)",
              beyond_training, f"every CI >= {NEAR_PERFECT}; < 3 runs: underpowered",
              kind="beyond", threshold=NEAR_PERFECT),
    ]  # fmt: skip
