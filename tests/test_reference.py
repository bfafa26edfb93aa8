"""The committed reference (reference/<tier>/) and a run's comparison with it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lengen.report import reference
from lengen.report import refresh as refreshing

from .conftest import ROOT


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
        ]
    )


NAN = math.nan


def test_a_run_equal_to_its_reference_is_the_same_everywhere(tmp_path):
    run = verdicts(
        ("A", "reproduced", 0.95, NAN, NAN),
        ("B", "not testable", NAN, NAN, NAN),
        ("C", "reproduced", -1.8, -2.1, -1.5),
    )
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


def test_refresh_accepts_only_a_complete_run_of_this_tier_made_at_one_commit(
    tmp_path, monkeypatch, capsys
):
    """The refresh drills (issue 47): another tier, another config, an incomplete run, a run
    made at two commits, uncommitted code (in the verdicts, a table or a figure:
    issue 65) and a run that would shrink the reference are each refused with the reason; a good
    run replaces the folder whole. The config is the smoke tier's as the reference was made with
    it (a tier changed since, a task added, is another config: the drills are the refusals)."""
    import shutil

    from lengen.report.rejudge import trained_config

    smoke_config = trained_config("config/smoke.yaml", ROOT)

    committed = ROOT / "reference" / "smoke"
    reports, dest = tmp_path / "reports", tmp_path / "reference" / "smoke"
    shutil.copytree(committed, reports)  # a complete smoke run, as committed
    (reports / "report.html").write_text("<html/>")  # Snakemake's HTML report stays behind
    monkeypatch.setattr(refreshing, "science_changes", lambda commit, project: [])
    refresh = lambda **kw: refreshing.refresh(reports, dest, smoke_config, ROOT, **kw)  # noqa: E731
    text = (reports / "REPORT.md").read_text()
    (reports / "REPORT.md").write_text(text.replace("Tier `smoke`.", "Tier `default`."))
    with pytest.raises(SystemExit, match="not a run of tier 'smoke'"):
        refresh()
    (reports / "REPORT.md").write_text(text)
    other = {**smoke_config, "seed": 1}
    with pytest.raises(SystemExit, match="made from another config"):
        refreshing.refresh(reports, dest, other, ROOT)
    # a run of a commit whose science HEAD has moved past is accepted, and said (main never
    # waits for a reference run); a run made at two commits is not a reference
    monkeypatch.setattr(refreshing, "science_changes", lambda c, p: ["src/lengen/tasks/x.py"])
    assert refreshing.check_run(reports, smoke_config, ROOT, allow_dirty=False)
    assert "HEAD's science has moved since, in src/lengen/tasks/x.py" in capsys.readouterr().err
    monkeypatch.setattr(refreshing, "science_changes", lambda commit, project: [])
    mixed = pd.read_csv(reports / "verdicts.csv")
    mixed.assign(git_commit="0123456789ab" * 3).to_csv(reports / "verdicts.csv", index=False)
    with pytest.raises(SystemExit, match="made at 2 commits .*a reference is a from-scratch run"):
        refresh()
    shutil.copy2(committed / "verdicts.csv", reports)
    (reports / "fig1_sparse_parity.png").unlink()
    with pytest.raises(SystemExit, match="incomplete run, missing fig1_sparse_parity.png"):
        refresh()
    shutil.copy2(committed / "fig1_sparse_parity.png", reports)
    good = pd.read_csv(reports / "verdicts.csv")
    good.assign(git_commit="abc-dirty").to_csv(reports / "verdicts.csv", index=False)
    with pytest.raises(SystemExit, match="uncommitted code"):
        refresh()
    good.to_csv(reports / "verdicts.csv", index=False)
    # issue 65: a figure redrawn from uncommitted code makes the run dirty, its verdicts clean
    import json

    from PIL import Image, PngImagePlugin

    from lengen.core import provenance

    figure = reports / "fig1_sparse_parity.png"
    with Image.open(figure) as image:
        record = json.loads(image.text[provenance.PNG_KEY])
        info = PngImagePlugin.PngInfo()
        info.add_text(provenance.PNG_KEY, json.dumps({**record, "git_commit": "abc-dirty"}))
        image.save(figure, pnginfo=info)
    with pytest.raises(SystemExit, match=r"fig1_sparse_parity.png: made from uncommitted code"):
        refresh()
    shutil.copy2(committed / "fig1_sparse_parity.png", reports)
    table = pd.read_csv(reports / "sparse_parity_accuracy.csv")
    table.assign(git_commit="abc-dirty").to_csv(reports / "sparse_parity_accuracy.csv", index=False)
    with pytest.raises(SystemExit, match=r"sparse_parity_accuracy.csv: made from uncommitted"):
        refresh()
    shutil.copy2(committed / "sparse_parity_accuracy.csv", reports)
    dest.mkdir(parents=True)
    (dest / "stale.csv").write_text("old")
    with pytest.raises(SystemExit, match="refusing to shrink the reference"):
        refresh()
    assert (dest / "stale.csv").read_text() == "old"  # nothing touched by a refusal
    files = refresh(allow_removal=True)
    assert sorted(f.name for f in files) == sorted(p.name for p in committed.iterdir())
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in committed.iterdir())
    assert not list(dest.parent.glob("smoke.*"))  # no half-built or old folder left


def test_effect_judgement_three_ways_and_the_decisive_effect():
    from lengen.report import effects

    assert effects.judge(0.31, 0.5, 0.3) == "reproduced"
    assert effects.judge(0.1, 0.29, 0.3) == "not reproduced"
    assert effects.judge(0.2, 0.4, 0.3) == "inconclusive"
    a, b, c = (
        effects.Effect("a", 0.5, 0.4, 0.6),
        effects.Effect("b", 0.35, 0.25, 0.45),
        effects.Effect("c", 0.2, 0.1, 0.28),
    )
    assert effects.decisive([a, b]) is b  # the lowest run mean is shown
    assert effects.decisive([a, b, c]) is c
    rows = pd.DataFrame({"accuracy": [0.5, 1.0], "n": [100, 100]})
    e = effects.level(rows, "x")
    assert e.estimate == 0.75 and e.low < 0.75 < e.high
    g = effects.gap(rows, rows, "same")
    assert g.estimate == 0 and g.low < 0 < g.high


def test_science_changes_reads_git():
    assert refreshing.science_changes("HEAD", ROOT) == []
    assert refreshing.science_changes("0" * 40, ROOT) is None  # not in the history


def test_science_is_what_the_jobs_run_not_how_it_is_written(tmp_path):
    """A docstring, a comment, a schema description, a test, another tier's file, a dev tool or
    a rule file's layout changes no science; a statement in a module a job runs (or one it
    imports), a schema default, a rule, a dependency or a DeepSpeed JSON does, each named."""
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    files = {
        "Snakefile": "from lengen import plan\ninclude: 'workflow/a.smk'\n",
        "workflow/a.smk": "rule a:\n    shell: 'python -m lengen.job'\n",
        "workflow/b.smk": 'rule b:\n    params: code=code_hash("lengen.coded")\n',
        "src/lengen/__init__.py": "",
        "src/lengen/coded.py": "V = 1\n",
        "src/lengen/plan.py": "X = 1\n",
        "src/lengen/job.py": '"""A job."""\nfrom lengen import helper\n\nY = helper.Z\n',
        "src/lengen/helper.py": "Z = 2  # a comment\nlr = setting(1, doc='rate')\n",
        "src/lengen/unused.py": "W = 3\n",
        "config/other.yaml": "tier: other\n",
        "config/ds.json": "{}\n",
        "tests/test_x.py": "",
        "pyproject.toml": '[project]\ndependencies = ["torch==2.13.0"]\n'
        '[project.optional-dependencies]\ndev = ["ruff==1"]\n[tool.ruff]\nline-length = 100\n',
    }

    def commit(changes: dict) -> str:
        for name, text in changes.items():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text)
        git("add", "-A")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
        out = subprocess.run(
            ["git", "-C", str(tmp_path), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()

    git("init", "-q")
    base = commit(files)
    commit(
        {
            "src/lengen/job.py": '"""Reads Z."""\nfrom lengen import helper\n\nY = helper.Z\n',
            "src/lengen/helper.py": "Z = 2  # another comment\nlr = setting(1, doc='the rate')\n",
            "src/lengen/unused.py": "W = 4\n",
            "config/other.yaml": "tier: another\n",
            "tests/test_x.py": "assert True\n",
            "pyproject.toml": '[project]\ndependencies = ["torch==2.13.0"]\n'
            '[project.optional-dependencies]\ndev = ["ruff==2", "snakefmt==1"]\n'
            "[tool.ruff]\nline-length = 99\n",
        }
    )
    assert refreshing.science_changes(base, tmp_path) == []
    reformatted = "rule a:\n    shell:\n        'python -m lengen.job'\n"
    commit({"workflow/a.smk": reformatted})  # snakefmt's layout, the same rule
    assert refreshing.science_changes(base, tmp_path) == []
    commit(
        {
            "src/lengen/helper.py": "Z = 2\nlr = setting(2, doc='the rate')\n",  # a default
            "src/lengen/plan.py": "X = 2\n",
            "src/lengen/coded.py": "V = 2\n",
            "workflow/a.smk": "rule a:\n    shell: 'python -m lengen.job --fast'\n",
            "config/ds.json": '{"a": 1}\n',
            "pyproject.toml": '[project]\ndependencies = ["torch==2.14.0"]\n',
        }
    )
    assert refreshing.science_changes(base, tmp_path) == [
        "config/ds.json",
        "pyproject.toml",
        "src/lengen/coded.py",
        "src/lengen/helper.py",
        "src/lengen/plan.py",
        "workflow/a.smk",
    ]


def test_the_comparison_says_what_differs_before_it_says_same():
    """Config hash and commit of the run and of the reference come first, and which differ: a
    verdict the same under another config is the same words, not a repeat (issue 48)."""
    run = verdicts(("A", "reproduced", 0.95, NAN, NAN)).assign(config_hash="h1", git_commit="c1")
    text = "\n".join(reference.section(run, run, "r"))
    assert "config hash `h1`, commit `c1`. The reference: config hash `h1`" in text
    assert "Same config and code" in text
    other_code = "\n".join(reference.section(run, run.assign(git_commit="c2"), "r"))
    assert "They differ in the commit" in other_code
    other = "\n".join(reference.section(run, run.assign(config_hash="h2"), "r"))
    assert "They differ in config hash" in other and "the same words, not a repeat" in other
    assert other.index("They differ") < other.index("verdicts are the same")


def test_a_run_compared_with_its_reference_leaves_provenance_out(tmp_path, capsys):
    """`python -m lengen.report.reference RUN REFERENCE`: a copy of the smoke reference whose
    provenance alone differs (another commit, config hash, versions) is the same, every number;
    a changed number, a missing table and a cut table are each one line naming the file (and
    the row and column), exit 1."""
    import shutil

    from lengen.core import provenance

    run = tmp_path / "smoke"
    shutil.copytree(ROOT / "reference" / "smoke", run)
    name = sorted(p.name for p in run.glob("*.csv") if p.name != "verdicts.csv")[0]
    table = pd.read_csv(run / name)
    stamped = [c for c in provenance.COLUMNS if c in table.columns]
    assert stamped
    table.assign(**{c: "elsewhere" for c in stamped}).to_csv(run / name, index=False)
    reference.main([str(run), str(ROOT / "reference" / "smoke")])
    assert "every number of the reference's" in capsys.readouterr().out
    numeric = next(
        c for c in table.columns if c not in stamped and pd.api.types.is_float_dtype(table[c])
    )
    table.loc[0, numeric] = table.loc[0, numeric] + 1e-12  # the last bit counts
    table.to_csv(run / name, index=False)
    (run / "verdicts.csv").unlink()
    with pytest.raises(SystemExit) as ended:
        reference.main([str(run), str(ROOT / "reference" / "smoke")])
    assert ended.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert any(x.startswith(f"{run / name}: row 2 {numeric} = ") for x in err), err
    assert f"{run / 'verdicts.csv'}: missing (the reference has it)" in err
