"""The claims' rules, fixed before the data: one registry entry per paper sentence, beside the
sentence and the reason for each number. Each experiment's module (lengen.report.claims.<name>)
states its own rules beside its rows; this is their registry: RULES by sentence, the paper's
test-to-training ratios, and the table docs/rules.md holds (`python -m lengen.report.rules`
prints it; tests/test_rules.py pins the registry to the report and to that file). A change of a
rule is a change of its experiment's module, with its reason, and a line in docs/rules.md's
history.

Windows follow the paper's own test-to-training length ratio, applied to the tier's (or the
variant's) longest training length L: "beyond training" is the tested lengths in (L, ratio x L].
"""

from __future__ import annotations

from lengen.core.cli import command_parser, one_line_errors
from lengen.report.claims import PAPER_RATIO, RULES, base
from lengen.report.claims.base import (  # the registry's vocabulary (docs/extending.md)
    ARMS,
    EXACT,
    LEARNED_GATE,
    RUN_OUTCOMES,
    UNITS,
    Rule,
)

__all__ = ["ARMS", "EXACT", "LEARNED_GATE", "PAPER_RATIO", "RULES", "RUN_OUTCOMES", "UNITS", "Rule"]


def sentence_of(claim_id: str) -> str:
    """The paper sentence a report row belongs to: the longest registry key its id starts with
    ("SP-1 [neox]" -> "SP-1", "NL-Fig6b" -> "NL-Fig6", "TH-C3a" -> "TH-C3", "NL-T1b" ->
    "NL-T1"); the id itself when none does."""
    keys = [k for k in RULES if claim_id.startswith(k)]
    return max(keys, key=len) if keys else claim_id


def beyond(experiment: str, longest_train: int, lengths) -> list[int]:
    """The tested lengths beyond training within the experiment's paper ratio: (L, ratio x L]."""
    return base.beyond(PAPER_RATIO[experiment], longest_train, lengths)


def markdown() -> str:
    """The registry as a markdown table (docs/rules.md holds it; a test keeps them in step)."""
    head = "| claim | paper | window | threshold | gate | interval | reason |\n" + "|---" * 7 + "|"
    rows = [
        f"| {r.sentence} | {r.paper} ({r.section}) | {r.window} | {r.threshold:g} | {r.gate} | "
        f"{r.interval} | {r.reason} |"
        for r in RULES.values()
    ]
    return "\n".join([head, *rows])


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: print the registry's markdown table."""
    command_parser(__spec__, __doc__).parse_args(argv)
    print(markdown())


if __name__ == "__main__":
    main()
