"""The committed reference (reference/<tier>/) and a run's comparison with it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lengen.report import reference


def verdicts(*rows) -> pd.DataFrame:
    """A verdicts table from (id, verdict, value, ci_low, ci_high) rows."""
    return pd.DataFrame(
        [
            dict(
                id=i,
                paper=f"claim {i}",
                measured=f"{v:.3f}",
                verdict=verdict,
                value=v,
                ci_low=lo,
                ci_high=hi,
                git_commit="abc",
            )
            for i, verdict, v, lo, hi in rows
        ]  # fmt: skip
    )


NAN = math.nan


def test_a_run_equal_to_its_reference_is_the_same_everywhere(tmp_path):
    run = verdicts(("A", "reproduced", 0.95, NAN, NAN), ("B", "not testable", NAN, NAN, NAN),
                   ("C", "reproduced", -1.8, -2.1, -1.5))  # fmt: skip
    run.to_csv(tmp_path / "verdicts.csv", index=False)
    ref = reference.read(tmp_path / "verdicts.csv")  # through the CSV, as the report reads it
    table = reference.compare(run, ref)
    assert list(table.verdict) == ["same"] * 3
    assert list(table.number) == ["identical", "no number in either", "identical"]
    text = "\n".join(reference.section(run, ref, "reference/x/verdicts.csv"))
    assert "**3 of 3 verdicts are the same as the reference's**." in text
    assert "2 of 2 measured numbers are identical" in text and "`abc`" in text


def test_a_differing_verdict_and_numbers_are_named():
    ref = verdicts(
        ("A", "reproduced", 0.95, NAN, NAN),
        ("C", "reproduced", -1.8, -2.1, -1.5),
        ("D", "reproduced", -1.8, -2.1, -1.5),
        ("gone", "reproduced", 1.0, NAN, NAN),
    )
    run = verdicts(
        ("A", "not reproduced", 0.85, NAN, NAN),
        ("C", "reproduced", -1.9, NAN, NAN),
        ("D", "reproduced", -1.0, NAN, NAN),
        ("new", "reproduced", 1.0, NAN, NAN),
    )
    table = reference.compare(run, ref).set_index("id")
    assert table.loc["A", "verdict"] == "differs" and table.loc["C", "verdict"] == "same"
    assert table.loc["A", "number"] == "-0.100 (no interval in this row)"
    assert table.loc["C", "number"] == "-0.100, within the reference's 95% CI [-2.100, -1.500]"
    assert table.loc["D", "number"].startswith("+0.800, outside")
    assert table.loc["new", "verdict"] == "new" and table.loc["gone", "verdict"] == "missing"
    assert table.loc["A", "reference"] == "reproduced: 0.950"
    assert table.loc["A", "this run"] == "not reproduced: 0.850"
    text = "\n".join(reference.section(run, ref, "ref"))
    assert "**2 of 5 verdicts are the same" in text
    assert "not the same: A (differs), D" not in text  # D's verdict is the same; its number not
    assert "not the same: A (differs), new (new), gone (missing)." in text


def test_no_reference_says_so():
    text = "\n".join(reference.section(verdicts(("A", "reproduced", 1.0, NAN, NAN)), None, "r/x"))
    assert "No committed reference" in text and "`r/x`" in text


def test_refresh_copies_a_clean_run_and_refuses_uncommitted_code(tmp_path):
    reports, dest = tmp_path / "results" / "reports", tmp_path / "reference" / "smoke"
    reports.mkdir(parents=True)
    with pytest.raises(SystemExit, match="run the tier to the end"):
        reference.refresh(reports, dest)
    (reports / "REPORT.md").write_text("# report\n")
    (reports / "table.csv").write_text("a\n1\n")
    (reports / "report.html").write_text("<html/>")  # Snakemake's HTML report stays behind
    verdicts(("A", "reproduced", 1.0, NAN, NAN)).assign(git_commit="abc-dirty").to_csv(
        reports / "verdicts.csv", index=False
    )
    with pytest.raises(SystemExit, match="uncommitted code"):
        reference.refresh(reports, dest)
    dest.mkdir(parents=True)
    (dest / "stale.csv").write_text("old")
    files = reference.refresh(reports, dest, allow_dirty=True)
    assert sorted(f.name for f in files) == ["REPORT.md", "table.csv", "verdicts.csv"]
    assert sorted(p.name for p in dest.iterdir()) == ["REPORT.md", "table.csv", "verdicts.csv"]


def test_effect_judgement_three_ways_and_the_decisive_effect():
    from lengen.report import effects

    assert effects.judge(0.31, 0.5, 0.3) == "reproduced"
    assert effects.judge(0.1, 0.29, 0.3) == "not reproduced"
    assert effects.judge(0.2, 0.4, 0.3) == "inconclusive"
    a, b, c = (effects.Effect("a", 0.5, 0.4, 0.6), effects.Effect("b", 0.35, 0.25, 0.45),
               effects.Effect("c", 0.2, 0.1, 0.28))  # fmt: skip
    assert effects.decisive([a, b], 0.3) is b  # the lowest bound decides
    assert effects.decisive([a, b, c], 0.3) is c  # a whole CI below decides against
    rows = pd.DataFrame({"accuracy": [0.5, 1.0], "n": [100, 100]})
    e = effects.level(rows, "x")
    assert e.estimate == 0.75 and e.low < 0.75 < e.high
    g = effects.gap(rows, rows, "same")
    assert g.estimate == 0 and g.low < 0 < g.high
