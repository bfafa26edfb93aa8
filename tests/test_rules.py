"""The rules registry (lengen.report.rules) is what the report judges by, and what docs/rules.md
shows: a rule changes in one place, visibly."""

from __future__ import annotations

import pytest

from lengen.report import claims as claims_pkg
from lengen.report import report, rules
from lengen.report.claims import (
    natural_language,
    parity_scratchpad,
    sparse_parity,
    theory,
    variable_assignment,
)
from lengen.report.rules import RULES

from .conftest import ROOT

# two sparse-parity variants, the second with log-length scaling (a DEPARTURE sub-row)
CFG = {
    "sparse_parity": {
        "variants": {
            "neox": {"label": "paper"},
            "loglen": {"label": "DEPARTURE", "model": {"attn_scale": "log_length"}},
        }
    }
}


def test_every_report_row_belongs_to_a_registry_sentence_and_every_sentence_is_used():
    claims = report.claims(CFG)
    used = {rules.sentence_of(c.id) for c in claims}
    assert used == set(RULES)
    for c in claims:
        rule = RULES[rules.sentence_of(c.id)]
        assert f"{rule.threshold:g}" in c.rule, (c.id, c.rule)  # the registry's threshold
        if c.id.startswith(("SP-", "PS-", "VA-")):  # the experiments: the registry's sentence
            assert (c.paper, c.section) == (rule.paper, rule.section), c.id


def test_the_claims_thresholds_are_their_own_rules():
    """Each module's thresholds are its own registry entries (one place per number)."""
    assert parity_scratchpad.MUCH_WORSE == RULES["PS-3"].threshold
    assert parity_scratchpad.ORDERING_GAP == RULES["PS-2"].threshold
    assert sparse_parity.ORDERING_GAP == RULES["SP-3"].threshold
    assert sparse_parity.DETERIORATES == RULES["SP-2"].threshold
    assert variable_assignment.WELL == RULES["VA-1"].threshold
    assert variable_assignment.HURTS == RULES["VA-2"].threshold
    assert variable_assignment.BEATS == RULES["VA-3"].threshold
    assert variable_assignment.WORSE == RULES["VA-4"].threshold
    assert theory.OMEGA_1 == RULES["TH-C3"].threshold
    assert theory.CONTRAST == RULES["TH-4.4"].threshold
    assert natural_language.CLOSE == RULES["NL-T1c"].threshold
    assert natural_language.BEYOND_L == RULES["NL-T1w"].threshold


def test_each_module_states_the_rules_of_its_rows_and_the_registry_is_theirs():
    """A claims module's rows belong to its own rules (adding a claim touches its module
    alone), and the registry is every module's rules in the report's order."""
    for module in claims_pkg.MODULES:
        own = {r.sentence for r in module.RULES}
        assert {rules.sentence_of(c.id) for c in module.claims(CFG)} == own, module.__name__
    assert list(RULES) == [r.sentence for m in claims_pkg.MODULES for r in m.RULES]


def test_sentences_and_departures():
    assert rules.sentence_of("SP-1 [neox]") == "SP-1" and rules.sentence_of("NL-Fig6b") == "NL-Fig6"
    assert rules.sentence_of("TH-C3c'") == "TH-C3" and rules.sentence_of("NL-T1b") == "NL-T1"
    assert (
        rules.sentence_of("NL-T1w") == "NL-T1w"
        and rules.sentence_of("TH-4.3 (delta 0)") == "TH-4.3"
    )
    dep = {c.id for c in report.claims(CFG) if c.departure}
    assert dep == {"SP-1 [loglen]", "SP-2 [loglen]", "SP-3 [loglen]"}
    assert report.combined(["reproduced", "reproduced"]) == "reproduced"
    assert report.combined(["reproduced", "not testable"]) == "not testable"
    assert report.combined(["underpowered", "not reproduced"]) == "not reproduced"
    assert report.combined(["inconclusive", "underpowered"]) == "inconclusive"


def test_windows_follow_the_papers_test_to_training_ratio():
    lengths = [10, 20, 30, 40, 60, 100, 120, 200]
    assert rules.beyond("parity_scratchpad", 40, lengths) == [60, 100, 120, 200]  # 5x
    assert rules.beyond("parity_scratchpad", 20, lengths) == [30, 40, 60, 100]  # not 200
    assert rules.beyond("variable_assignment", 60, [80, 180, 200, 210]) == [80, 180, 200]
    assert rules.beyond("sparse_parity", 50, [40, 60, 500, 510]) == [60, 500]


def test_docs_hold_the_registry():
    """docs/rules.md holds `python -m lengen.report.rules`'s table as it is now."""
    assert rules.markdown() in (ROOT / "docs" / "rules.md").read_text()


def test_the_cli_prints_the_registry(capsys):
    """`python -m lengen.report.rules` prints exactly the table docs/rules.md holds; --help names
    the module, not a file."""
    rules.main([])
    assert capsys.readouterr().out == rules.markdown() + "\n"
    with pytest.raises(SystemExit) as exit_:
        rules.main(["--help"])
    assert exit_.value.code == 0
    usage = capsys.readouterr().out
    assert "python -m lengen.report.rules" in usage
    assert "The claims' rules, fixed before the data" in usage  # the module's docstring
