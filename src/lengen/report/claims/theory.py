"""The theory's claims (App. C.2, Theorem 4.3, Prop. 4.4): exact computations on toy cases
(lengen.analysis.theory_cases' table), counted apart from the experiments."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from lengen.core.claims import THEORY_DELTA as DELTA
from lengen.report.claims.base import EXACT, Claim, Rule, Tables

RULES = (
    Rule(
        sentence="TH-C3",
        section="Prop. C.3",
        paper="dropping one assumption alone: training risk ~0, test risk Omega(1) at Lbar >= 2L",
        window="the worst risk minimiser's smallest test risk at Lbar >= 2L",
        threshold=0.5,
        gate="the code's assumption checks find only the dropped one violated",
        interval=EXACT,
        reason='"Omega(1)": bounded away from 0, taken as >= 0.5',
    ),
    Rule(
        sentence="TH-4.3",
        section="Theorem 4.3",
        paper="all assumptions: test risk <= eta_L eta_Lbar L Lbar^2 delta",
        window="the worst minimiser's test risk minus the bound, max over Lbar",
        threshold=0.0,
        gate="every assumption holds",
        interval=EXACT,
        reason="a check: a realizable case's exact risks meet the bound by construction",
    ),
    Rule(
        sentence="TH-4.4",
        section="Prop. 4.4 / D.2",
        paper="position coupling removes the locality requirement",
        window="the plain class's worst test risk minus PC[H_attn]'s, smallest over Lbar >= 2L",
        threshold=0.1,
        gate="PC[H_attn] meets every assumption and the bound",
        interval=EXACT,
        reason='"fails where PC does not": 0.1 of extra test risk',
    ),
)
OMEGA_1 = RULES[0].threshold  # test risk that counts as "bounded away from 0" (Omega(1))

ASSUMPTIONS = ("local", "relative", "realizable", "coverage")
POSITIVE = ("positive", f"positive, delta={DELTA:g}")  # theory_cases' Theorem 4.3 cases
PLAIN, COUPLED = "coupling: plain", "coupling: PC"
# the plain class's extra test risk that counts as "fails where PC does not"
CONTRAST = RULES[2].threshold


def theory_failure(
    case: str, dropped: str, max_train: float = 1e-12
) -> Callable[[Tables], float | None]:
    """Worst minimiser's risk at Lbar >= 2L, if training risk <= max_train and the code's checks
    find only `dropped` violated (0 otherwise: not the construction the proposition needs)."""

    def measure(t: Tables) -> float | None:
        d = t.table("theory")
        if d is None or case not in set(d.case):
            return None
        rows = d[(d.case == case) & (d.Lbar >= 2 * d.L)]
        first = rows.iloc[0]
        others_hold = all(bool(first[a]) for a in ASSUMPTIONS if a != dropped)
        if first.train_risk > max_train or bool(first[dropped]) or not others_hold:
            return 0.0
        return float(rows.test_risk_worst.min())

    return measure


def _excess_over_bound(d: pd.DataFrame, case: str) -> float | None:
    """Largest excess of a case's worst minimiser's test risk over Theorem 4.3's bound (<= 0:
    within); inf when the code's checks find an assumption violated; None when not run."""
    rows = d[d.case == case]
    if rows.empty:
        return None
    if not all(rows[a].all() for a in ASSUMPTIONS):
        return math.inf
    return float((rows.test_risk_worst - rows.theorem_bound).max())


def theory_within_bound(case: str) -> Callable[[Tables], float | None]:
    """Theorem 4.3 on one positive case (delta = 0 or delta > 0): its largest excess over the
    bound (None when the case was not run)."""

    def measure(t: Tables) -> float | None:
        d = t.table("theory")
        return None if d is None else _excess_over_bound(d, case)

    return measure


def coupling_contrast(t: Tables) -> float | None:
    """Prop. 4.4: the plain class's worst minimiser minus PC[H_attn]'s, at the Lbar >= 2L where the
    gap is smallest; -inf unless PC[H_attn] meets every assumption and stays within the bound."""
    d = t.table("theory")
    if d is None or not {COUPLED, PLAIN} <= set(d.case):
        return None
    excess = _excess_over_bound(d, COUPLED)
    if excess > 1e-12:
        return -math.inf
    far = d[d.Lbar >= 2 * d.L]
    plain = far[far.case == PLAIN].set_index("Lbar").test_risk_worst
    coupled = far[far.case == COUPLED].set_index("Lbar").test_risk_worst
    return float((plain - coupled).min())


def claims(cfg: dict) -> list[Claim]:
    """Prop. C.3's four failures, Theorem 4.3's bound (two checks) and Prop. 4.4's contrast."""
    return [
        *[
            Claim(
                f"TH-C3{c}",
                "Prop. C.3",
                f"dropping {name} alone: training risk {train}, test risk Omega(1) at Lbar >= 2L",
                "worst risk minimiser's smallest test risk at Lbar >= 2L (0 if the code's "
                "assumption checks disagree)",
                theory_failure(c, dropped, max_train),
                f">= {OMEGA_1}",
                lambda v: v >= OMEGA_1,
                uncounted=why,
            )
            for c, name, dropped, train, max_train, why in (
                ("a", "locality", "local", "0", 1e-12, ""),
                ("b", "relativity", "relative", "0", 1e-12, ""),
                # the paper's (c) also breaks coverage as Assumption 4.2 is written
                # (lengen.analysis.theory_cases): ours is a repair, shown and not counted
                (
                    "c'",
                    "realizability (our repair of case (c), not the paper's construction)",
                    "realizable",
                    "<= 0.1",
                    0.1,
                    "a repair of the paper's case (c), which also breaks coverage",
                ),
                ("d", "coverage", "coverage", "0", 1e-12, ""),
            )
        ],
        Claim(
            "TH-4.3",
            "Theorem 4.3",
            "all assumptions: test risk <= eta_L eta_Lbar L Lbar^2 delta",
            f"worst minimiser's test risk minus the bound (max over Lbar; delta = {DELTA:g})",
            theory_within_bound(POSITIVE[1]),
            "<= 0",
            lambda v: v <= 1e-12,
            kind="check",
        ),
        Claim(
            "TH-4.3 (delta 0)",
            "Theorem 4.3",
            "all assumptions, delta = 0: the bound is 0, so every minimiser's test risk is 0",
            "worst minimiser's test risk minus the bound (max over Lbar; delta = 0): a check "
            "of the construction, since a realizable zero-training-risk case gives 0 <= 0",
            theory_within_bound(POSITIVE[0]),
            "<= 0",
            lambda v: v <= 1e-12,
            kind="check",
        ),
        Claim(
            "TH-4.4",
            "Prop. 4.4 / D.2",
            "position coupling removes the locality requirement",
            "plain class's worst minimiser's test risk minus PC[H_attn]'s (smallest over "
            "Lbar >= 2L); PC[H_attn] meets every assumption and the bound",
            coupling_contrast,
            f">= {CONTRAST}",
            lambda v: v >= CONTRAST,
        ),
    ]
