"""The claims' rules, fixed before the data: one registry entry per paper sentence, beside the
sentence and the reason for each number. The report (lengen.report.report) reads every threshold,
window and gate from here; tests/test_rules.py pins the registry to the report and to
docs/rules.md (`python -m lengen.report.rules` prints the table that file holds). A change of a
rule is a change of this file, with its reason, and a line in docs/rules.md's history.

Windows follow the paper's own test-to-training length ratio, applied to the tier's (or the
variant's) longest training length L: "beyond training" is the tested lengths in (L, ratio x L].
"""

from __future__ import annotations

from dataclasses import dataclass

from lengen.core.claims import NEAR_PERFECT  # "near-perfect" accuracy (a task's claims use it)
from lengen.core.cli import command_parser

# interval methods (lengen.report.effects)
RUNS_THEN_EXAMPLES = (
    "hierarchical bootstrap (runs, then each run's examples), 95% percentile CI; fewer than 3 "
    "runs in an arm: underpowered"
)
UNITS = "paired bootstrap over held-out chunks of one model (scipy), 95% percentile CI"
EXACT = "exact: computed risks, no sampling"

# the paper's test-to-training length ratio per experiment (its longest test length over its
# longest training length): sparse parity 2l <= 50 -> 500 (Sec. 5.1), parity with scratchpad
# 2l <= 40 -> 200 (App. E.2), variable assignment l <= 60 -> 200 (App. E.3)
PAPER_RATIO = {"sparse_parity": 10.0, "parity_scratchpad": 5.0, "variable_assignment": 200 / 60,
               "majority": 2.0}  # fmt: skip

LEARNED_GATE = f"every compared model (run mean) >= {NEAR_PERFECT} at every tested training length"


@dataclass(frozen=True)
class Rule:
    """A paper sentence and how it is judged."""

    sentence: str  # the claim's id (its sub-rows share it: "SP-1 [neox]" is a row of "SP-1")
    section: str
    paper: str  # the paper's sentence
    window: str  # where it is measured
    threshold: float  # the minimum effect (or level) the whole CI must clear
    gate: str  # what must hold for the comparison to be testable
    interval: str
    reason: str  # why this threshold and window


RULES: dict[str, Rule] = {r.sentence: r for r in (
    Rule("SP-1", "Sec. 5.1, Fig. 1/7",
         "K_train <= 8: near-perfect accuracy up to length 500 for k_test <= K_train",
         "every tested length, per K_train <= 8 and k_test <= K_train", NEAR_PERFECT,
         "none (the claim is the level itself)", RUNS_THEN_EXAMPLES,
         '"near-perfect": 0.9, the level the paper\'s Fig. 1 curves stay above'),
    Rule("SP-2", "Sec. 5.1, Fig. 1/7", "k_test > K_train fails at all lengths",
         "every tested length, per K_train learned in distribution and k_test > K_train "
         "(judged as the error rate, 1 - accuracy)", 0.25,
         f"the K_train model >= {NEAR_PERFECT} in distribution", RUNS_THEN_EXAMPLES,
         '"fails": accuracy never above 0.75, i.e. an error rate >= 0.25 in every cell'),
    Rule("SP-3", "Sec. 5.1, Fig. 1", "K_train in {10, 12}: larger k generalizes worse",
         "beyond training, (L, 10L]: smallest k_test minus k_test = K_train, per K_train", 0.05,
         f"the K_train model >= {NEAR_PERFECT} in distribution", RUNS_THEN_EXAMPLES,
         "an ordering: over 2 binomial standard errors of one 192-example cell at p = 0.5 "
         "(0.036), below the gaps the paper's figures call ordered"),
    Rule("PS-1", "Sec. 5.2.1, Fig. 2", "all jumps near-perfect in distribution",
         "every tested training length, per jump (PPC)", NEAR_PERFECT,
         "none (the claim is the level itself)", RUNS_THEN_EXAMPLES,
         '"near-perfect": 0.9'),
    Rule("PS-2", "Sec. 5.2.1, Fig. 2", "smaller jump k generalizes better to longer lengths",
         "beyond training, (L, 5L]: jump j minus jump j + 1, per adjacent pair (PPC)", 0.05,
         "every jump learned in distribution", RUNS_THEN_EXAMPLES,
         "an ordering (as SP-3)"),
    Rule("PS-3", "App. E.2.2, Fig. 8",
         "without PPC (absolute PE + shift, or RoPE + PoSE) generalization is much worse",
         "beyond training, (L, 5L]: PPC minus each ablation, per jump both ran (the default "
         "tier: jump 1)", 0.3, LEARNED_GATE,
         RUNS_THEN_EXAMPLES, '"much worse": 0.3, well below the paper\'s Fig. 8 gaps (~1.0)'),
    Rule("VA-1", "Sec. 5.2.2, Fig. 3a",
         "PPC generalizes well up to ~3x the training length for d in {2, 3, 4, 5}",
         "the longest tested length <= 3L, per depth (PPC)", 0.8,
         "none (the claim is the level itself)", RUNS_THEN_EXAMPLES,
         '"generalizes well": 0.8, 0.1 below near-perfect'),
    Rule("VA-2", "Sec. 5.2.2, Fig. 3b-c",
         "removing position coupling or the scratchpad hurts a lot",
         "beyond training, (L, 3.33L]: PPC minus each ablation, per depth", 0.3, LEARNED_GATE,
         RUNS_THEN_EXAMPLES, '"hurts a lot": as "much worse"'),
    Rule("VA-3", "Fig. 3 caption", "RoPE + PoSE with a scratchpad beats RoPE + PoSE without",
         "beyond training, (L, 3.33L]: Fig. 3d minus Fig. 3c, per depth", 0.05, LEARNED_GATE,
         RUNS_THEN_EXAMPLES, '"beats": an ordering (as SP-3)'),
    Rule("VA-4", "Sec. 5.2.2, Fig. 3a vs 3c-d",
         "RoPE with PoSE (with or without scratchpad) performs significantly worse than PPC",
         "beyond training, (L, 3.33L]: PPC minus each RoPE variant, per depth", 0.3,
         LEARNED_GATE, RUNS_THEN_EXAMPLES, '"significantly worse": as "much worse"'),
    Rule("TH-C3", "Prop. C.3",
         "dropping one assumption alone: training risk ~0, test risk Omega(1) at Lbar >= 2L",
         "the worst risk minimiser's smallest test risk at Lbar >= 2L", 0.5,
         "the code's assumption checks find only the dropped one violated", EXACT,
         '"Omega(1)": bounded away from 0, taken as >= 0.5'),
    Rule("TH-4.3", "Theorem 4.3",
         "all assumptions: test risk <= eta_L eta_Lbar L Lbar^2 delta",
         "the worst minimiser's test risk minus the bound, max over Lbar", 0.0,
         "every assumption holds", EXACT,
         "a check: a realizable case's exact risks meet the bound by construction"),
    Rule("TH-4.4", "Prop. 4.4 / D.2", "position coupling removes the locality requirement",
         "the plain class's worst test risk minus PC[H_attn]'s, smallest over Lbar >= 2L", 0.1,
         "PC[H_attn] meets every assumption and the bound", EXACT,
         '"fails where PC does not": 0.1 of extra test risk'),
    Rule("NL-T1", "Table 1", "h_short perplexity at 128 below its perplexity at 64 "
         "(14.74 vs 17.59); h_long likewise (14.49 vs 17.62)",
         "perplexity at 128 minus at 64, per model", 0.0, "none", UNITS,
         "descriptive: at 64 each window starts fresh, so any model gains here"),
    Rule("NL-T1w", "Sec. 5.3, Table 1",
         "h_short uses information beyond its 64-token training context (what Table 1's "
         "17.59 -> 14.74 is read as)",
         "h_short's mean NLL on tokens 65-128: a 64-token sliding window minus the full "
         "context", 0.01, "none", UNITS, "0.01 nats per token: a 1% lower perplexity"),
    Rule("NL-T1c", "Table 1", "h_short at 128 close to h_long at 128 (14.74 vs 14.49)",
         "h_short / h_long perplexity at 128, minus 1", 0.05, "none", UNITS,
         "descriptive: our reading of Table 1's numbers, not a sentence of the paper; "
         "\"close\": within 5% (the paper's 1.7%)"),
    Rule("NL-Fig4", "Sec. 5.3, Fig. 4",
         "L_short - L_long and L_short - L_short,sparse roughly equal (h_short)",
         "symmetric slope through the origin and spread about the diagonal", 0.5,
         "the scored model's mean L_short - L_long > 0 (95% CI)", UNITS,
         "slope CI in [2/3, 3/2] and spread CI <= 0.5 (threshold: the spread)"),
    Rule("NL-Fig6", "Sec. 5.3, Fig. 6a-c",
         "L_short - L_long and L_short - L_short,sparse roughly equal (h_long, cross panels)",
         "as NL-Fig4, per panel", 0.5, "as NL-Fig4", UNITS, "as NL-Fig4"),
    Rule("MJ-1", "not in the paper (C-RASP: Huang et al. 2024)",
         "majority (k = n): C-RASP predicts length generalization with absolute positions",
         "lengths in (L, 2L], absolute PE", NEAR_PERFECT,
         f"absolute PE >= {NEAR_PERFECT} in distribution", RUNS_THEN_EXAMPLES,
         "a claim beyond the paper: near-perfect to twice the training length"),
)}  # fmt: skip


def sentence_of(claim_id: str) -> str:
    """The paper sentence a report row belongs to: the longest registry key its id starts with
    ("SP-1 [neox]" -> "SP-1", "NL-Fig6b" -> "NL-Fig6", "TH-C3a" -> "TH-C3", "NL-T1b" ->
    "NL-T1"); the id itself when none does."""
    keys = [k for k in RULES if claim_id.startswith(k)]
    return max(keys, key=len) if keys else claim_id


def beyond(experiment: str, longest_train: int, lengths) -> list[int]:
    """The tested lengths beyond training within the paper's ratio: (L, PAPER_RATIO x L]."""
    top = PAPER_RATIO[experiment] * longest_train + 1e-9
    return sorted(int(x) for x in lengths if longest_train < x <= top)


def markdown() -> str:
    """The registry as a markdown table (docs/rules.md holds it; a test keeps them in step)."""
    head = "| claim | paper | window | threshold | gate | interval | reason |\n" + "|---" * 7 + "|"
    rows = [
        f"| {r.sentence} | {r.paper} ({r.section}) | {r.window} | {r.threshold:g} | {r.gate} | "
        f"{r.interval} | {r.reason} |"
        for r in RULES.values()
    ]
    return "\n".join([head, *rows])


def main(argv: list[str] | None = None) -> None:
    """CLI: print the registry's markdown table."""
    command_parser(__spec__, __doc__).parse_args(argv)
    print(markdown())


if __name__ == "__main__":
    main()
