"""The rules registry (lengen.report.rules) is what the report judges by, and what docs/rules.md
shows: a rule changes in one place, visibly."""

from __future__ import annotations

from lengen.report import report, rules
from lengen.report.rules import RULES

from .conftest import ROOT

VARIANTS = {"neox": "paper", "loglen": "DEPARTURE"}


def test_every_report_row_belongs_to_a_registry_sentence_and_every_sentence_is_used():
    claims = report.claims(VARIANTS, {"loglen"})
    used = {rules.sentence_of(c.id) for c in claims}
    assert used == set(RULES)
    for c in claims:
        rule = RULES[rules.sentence_of(c.id)]
        assert f"{rule.threshold:g}" in c.rule, (c.id, c.rule)  # the registry's threshold
        if c.id.startswith(("SP-", "PS-", "VA-")):  # the experiments: the registry's sentence
            assert (c.paper, c.section) == (rule.paper, rule.section), c.id


def test_the_reports_thresholds_are_the_registrys():
    assert report.MUCH_WORSE == RULES["PS-3"].threshold == RULES["VA-2"].threshold
    assert report.ORDERING_GAP == RULES["PS-2"].threshold == RULES["SP-3"].threshold
    assert report.FAILS == 1 - RULES["SP-2"].threshold
    assert report.WELL == RULES["VA-1"].threshold and report.OMEGA_1 == RULES["TH-C3"].threshold
    assert report.CLOSE == RULES["NL-T1c"].threshold
    assert report.BEYOND_L == RULES["NL-T1w"].threshold
    assert report.CONTRAST == RULES["TH-4.4"].threshold


def test_sentences_and_departures():
    assert rules.sentence_of("SP-1 [neox]") == "SP-1" and rules.sentence_of("NL-Fig6b") == "NL-Fig6"
    assert rules.sentence_of("TH-C3c'") == "TH-C3" and rules.sentence_of("NL-T1b") == "NL-T1"
    assert (
        rules.sentence_of("NL-T1w") == "NL-T1w"
        and rules.sentence_of("TH-4.3 (delta 0)") == "TH-4.3"
    )
    dep = {c.id for c in report.claims(VARIANTS, {"loglen"}) if c.departure}
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
