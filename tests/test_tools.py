"""The mutation-score tool's bookkeeping (the mutation run itself takes ~30 min: tools/)."""

from __future__ import annotations

from .conftest import ROOT
from .helpers import load_script

mutation = load_script(ROOT / "tools" / "mutation.py")


def test_module_of_mutant_names():
    assert mutation.module_of("lengen.report.report.x_verdict__mutmut_12") == "lengen.report.report"
    name = "lengen.tasks.natural_language.x_windows__mutmut_1"
    assert mutation.module_of(name) == "lengen.tasks.natural_language"
    name = "lengen.core.batch.xǁExampleǁmodel_inputs__mutmut_3"
    assert mutation.module_of(name) == "lengen.core.batch"


def test_score_counts_every_mutant_not_killed_except_listed_equivalents():
    results = {
        "lengen.a.x_f__mutmut_1": "killed",
        "lengen.a.x_f__mutmut_2": "survived",
        "lengen.a.x_f__mutmut_3": "survived",
        "lengen.a.x_g__mutmut_1": "no tests",
        "lengen.b.x_h__mutmut_1": "killed",
        "lengen.b.x_h__mutmut_2": "timeout",
    }
    table = mutation.score_table(results, {"lengen.a.x_f__mutmut_3": "same behaviour"})
    rows = table.set_index("module")
    assert rows.loc[
        "lengen.a", ["mutants", "killed", "survived", "no_tests", "equivalent"]
    ].tolist() == [4, 1, 1, 1, 1]
    assert rows.loc["lengen.a", "score"] == 1 / 3  # killed / (mutants - equivalents)
    assert rows.loc["lengen.b", "score"] == 1 / 2 and rows.loc["lengen.b", "other"] == "timeout 1"
    assert rows.loc["core (all)", "score"] == 2 / 5


def test_equivalence_rules_match_name_and_mutated_line(monkeypatch):
    lines = {"lengen.a.x_f__mutmut_1": "+ device = None", "lengen.a.x_f__mutmut_2": "+ x = 2",
             "lengen.b.x_g__mutmut_1": "+ device = None"}  # fmt: skip
    monkeypatch.setattr(mutation, "mutated_lines", lambda name: lines[name])
    results = {**dict.fromkeys(lines, "survived"), "lengen.a.x_f__mutmut_3": "killed"}
    rules = [{"name": "lengen.a.*", "added": "device = None", "reason": "cpu"}]
    assert mutation.equivalents(results, rules) == {"lengen.a.x_f__mutmut_1": "cpu"}
