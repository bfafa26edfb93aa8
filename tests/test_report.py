"""Claims report: each verdict rule on hand-made tidy tables, and the written REPORT.md."""

from __future__ import annotations

import pandas as pd

from lengen import report
from lengen.config import load

from .conftest import ROOT


def cfg():
    """The default config (training ranges used by the rules)."""
    return load(ROOT / "config" / "config.yaml")


def sparse_parity(kind: str) -> pd.DataFrame:
    """A sparse-parity table: "good" shows the paper's pattern; "opposite" learns in distribution
    but shows the opposite (k_test > K_train works, larger k better, K <= 8 fails at 500);
    "unlearned" is near chance everywhere, in distribution too."""
    rows = []
    for k_train in (4, 8, 10, 12):
        for k_test in (4, 6, 8, 10, 12, 14):
            for length in (40, 100, 500):
                inside, ood = k_test <= k_train, length > 50
                acc = (1.0 - 0.01 * k_test * ood) if inside else 0.5
                if kind == "opposite":
                    acc = (1.0 - (0.6 - 0.01 * k_test) * (length == 500)) if inside else 0.95
                if kind == "unlearned":
                    acc = 0.5 + 0.01 * k_test
                rows.append(dict(k_train=k_train, k_test=k_test, length=length, accuracy=acc))
    return pd.DataFrame(rows)


def scratchpad(param: str, values, variants: dict[str, float]) -> pd.DataFrame:
    """Accuracy = variants[v] in distribution, decaying with the value beyond training."""
    rows = []
    for variant, base in variants.items():
        for value in values:
            for length in (20, 40, 100, 150):
                ood = length > 60
                acc = base - (0.05 * value if ood else 0.0)
                rows.append({"variant": variant, param: value, "seed": 0, "length": length,
                             "accuracy": max(acc, 0.0)})  # fmt: skip
    return pd.DataFrame(rows)


def tables(**kw) -> report.Tables:
    """Tables with the given entries, None elsewhere."""
    base = dict(sparse_parity=None, parity_scratchpad=None, variable_assignment=None, theory=None)
    return report.Tables(cfg(), **{**base, **kw})


def verdicts(t: report.Tables) -> dict[str, str]:
    """id -> verdict."""
    return {c.id: report.verdict(c, t)["verdict"] for c in report.claims()}


def test_sparse_parity_rules():
    good = verdicts(tables(sparse_parity=sparse_parity("good")))
    assert [good[i] for i in ("SP-1", "SP-2", "SP-3")] == ["reproduced"] * 3
    bad = verdicts(tables(sparse_parity=sparse_parity("opposite")))
    assert [bad[i] for i in ("SP-1", "SP-2", "SP-3")] == ["not reproduced"] * 3
    # models that never learned in distribution make SP-2/SP-3 comparisons meaningless
    none = tables(sparse_parity=sparse_parity("unlearned"))
    assert [verdicts(none)[i] for i in ("SP-1", "SP-2", "SP-3")] == [
        "not reproduced", "not testable", "not testable",
    ]  # fmt: skip
    row = report.verdict(report.claims()[1], none)
    assert "not testable: no K_train model is >= 0.9 in distribution" in row["measured as"]


def test_sparse_parity_claims_per_variant():
    """With two model variants in the table, each gets its own SP-1..3 verdicts."""
    good, bad = sparse_parity("good"), sparse_parity("opposite")
    both = pd.concat([good.assign(variant="loglen"), bad.assign(variant="neox")])
    t = tables(sparse_parity=both)
    v = {c.id: report.verdict(c, t)["verdict"]
         for c in report.claims({"neox": "paper", "loglen": "departure"})}  # fmt: skip
    assert [v[f"SP-{i} [loglen]"] for i in (1, 2, 3)] == ["reproduced"] * 3
    assert [v[f"SP-{i} [neox]"] for i in (1, 2, 3)] == ["not reproduced"] * 3


def test_sp3_flat_accuracy_is_not_larger_k_worse():
    d = sparse_parity("good")
    d.loc[d.k_train >= 10, "accuracy"] = 1.0
    assert verdicts(tables(sparse_parity=d))["SP-3"] == "not reproduced"


def test_sp1_is_the_worst_length_not_the_last():
    """SP-1 needs >= 0.9 at *every* tested length up to 500: a dip at 100 fails it even when
    2l = 500 is perfect (the below-chance dips of earlier default runs)."""
    d = sparse_parity("good")
    d.loc[(d.k_train == 8) & (d.k_test == 8) & (d.length == 100), "accuracy"] = 0.2
    assert verdicts(tables(sparse_parity=d))["SP-1"] == "not reproduced"


def test_scratchpad_rules():
    ps = scratchpad("jump", (1, 2), {"ppc": 1.0, "absolute": 0.3, "rope_pose": 0.4})
    va = scratchpad("depth", (2, 3), {"ppc": 1.0, "no_coupling": 0.2, "no_scratchpad": 0.1,
                                      "rope_pose": 0.3})  # fmt: skip
    v = verdicts(tables(parity_scratchpad=ps, variable_assignment=va))
    assert all(v[i] == "reproduced" for i in ("PS-1", "PS-2", "PS-3", "VA-1", "VA-2", "VA-3"))
    weak = scratchpad("jump", (1, 2), {"ppc": 0.5, "absolute": 0.5, "rope_pose": 0.5})
    v = verdicts(tables(parity_scratchpad=weak))
    assert v["PS-1"] == "not reproduced" and v["PS-3"] == "not reproduced"
    assert v["VA-1"] == "not run"


def test_theory_rules_read_the_assumption_checks():
    rows = [
        dict(case="a", L=8, Lbar=16, train_risk=0.0, test_risk_worst=0.97, local=False,
             relative=True, realizable=True, coverage=True, theorem_bound=None),
        dict(case="b", L=8, Lbar=16, train_risk=0.0, test_risk_worst=0.9, local=True,
             relative=True, realizable=True, coverage=True, theorem_bound=None),  # b holds all
        dict(case="positive", L=8, Lbar=16, train_risk=0.0, test_risk_worst=0.0, local=True,
             relative=True, realizable=True, coverage=True, theorem_bound=0.0),
    ]  # fmt: skip
    v = verdicts(tables(theory=pd.DataFrame(rows)))
    assert v["TH-C3a"] == "reproduced"
    assert v["TH-C3b"] == "not reproduced"  # relativity not actually violated
    assert v["TH-4.3"] == "reproduced" and v["TH-C3d"] == "not run" and v["NL-T1"] == "not run"


def test_natural_language_rules():
    ppl = pd.DataFrame([dict(model=m, eval_length=n, perplexity=p) for m, n, p in [
        ("h_short", 64, 17.59), ("h_short", 128, 14.74),
        ("h_long", 64, 17.62), ("h_long", 128, 18.0)]])  # fmt: skip
    x = pd.Series([0.1, 0.5, 1.0, 2.0, 0.0, 0.3])
    rows = []
    for scored in ("h_short", "h_long"):
        for chosen in ("h_short", "h_long"):
            y = x * 0.9 if chosen == "h_short" else -x
            rows += [dict(scored_by=scored, chosen_by=chosen, short_minus_long=a,
                          short_minus_sparse=b) for a, b in zip(x, y, strict=True)]  # fmt: skip
    v = verdicts(tables(perplexity=ppl, influence=pd.DataFrame(rows)))
    assert v["NL-T1"] == "reproduced" and v["NL-T1b"] == "not reproduced"
    assert v["NL-Fig4"] == "reproduced" and v["NL-Fig6b"] == "reproduced"
    assert v["NL-Fig6a"] == "not reproduced" and v["NL-Fig6c"] == "not reproduced"


def test_report_file(tmp_path):
    c = cfg()
    c["reports_dir"] = str(tmp_path)
    sparse_parity(True).to_csv(tmp_path / "sparse_parity_accuracy.csv", index=False)
    out = tmp_path / "REPORT.md"
    rows = report.write_report(c, out)
    text = out.read_text()
    assert "| SP-1" in text and "config hash" in text and "reproduced" in text
    assert set(rows.verdict) <= {"reproduced", "not reproduced", "not run"}
