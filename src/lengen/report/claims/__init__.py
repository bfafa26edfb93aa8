"""Every claim the report judges, one module per experiment beside a shared base
(lengen.report.claims.base): each module states its rules (`RULES`: the paper's sentence, window,
threshold, gate and reason, fixed before the data) and its rows (`claims(cfg)`: what is measured
and how it is judged). Adding a claim to an experiment touches its module alone; a new
experiment's module is one line in MODULES. The report's rows follow MODULES' order."""

from __future__ import annotations

from lengen.report.claims import (
    majority,
    natural_language,
    parity_scratchpad,
    sparse_parity,
    theory,
    variable_assignment,
)
from lengen.report.claims.base import Claim, Rule

MODULES = (
    sparse_parity,
    parity_scratchpad,
    variable_assignment,
    theory,
    natural_language,
    majority,
)

# every rule by its sentence (lengen.report.rules: the registry docs/rules.md shows)
RULES: dict[str, Rule] = {rule.sentence: rule for m in MODULES for rule in m.RULES}
# the paper's test-to-training length ratio of each experiment that has one
PAPER_SCALE: dict[str, dict] = {  # the paper's model and steps per experiment (issue 64)
    m.__name__.rsplit(".", 1)[1]: m.PAPER_SCALE for m in MODULES if hasattr(m, "PAPER_SCALE")
}
PAPER_RATIO: dict[str, float] = {
    m.__name__.rsplit(".", 1)[1]: m.PAPER_RATIO for m in MODULES if hasattr(m, "PAPER_RATIO")
}


def claims(cfg: dict) -> list[Claim]:
    """Every row for the config (its report slice is enough), in MODULES' order."""
    return [claim for _, claim in by_experiment(cfg)]


def by_experiment(cfg: dict) -> list[tuple[str, Claim]]:
    """Every row with the experiment (its module's name) it belongs to, in MODULES' order."""
    return [(m.__name__.rsplit(".", 1)[1], claim) for m in MODULES for claim in m.claims(cfg)]
