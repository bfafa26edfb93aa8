"""A committed reference judged again by today's rules from its tables, no model retrained
(lengen.report.rejudge, issue 64 item 5): its REPORT.md, REPORT.html and verdicts.csv rewritten,
naming the commit that trained and the one that judged; refused from a dirty checkout, for a
reference of another config, or where the tables come from several commits."""

from __future__ import annotations

import shutil
import subprocess

import pandas as pd
import pytest

from lengen.config.config import load
from lengen.core import provenance
from lengen.report import rejudge

from .conftest import ROOT


def judged_config(tmp_path) -> dict:
    """The config reference/default was judged with: the tier's config file at the commit its
    verdicts.csv names (the tier's config has moved on since where a new reference run is due:
    variable assignment came back, a label changed; a rejudge refuses any other config)."""
    commit = pd.read_csv(ROOT / "reference" / "default" / "verdicts.csv", dtype=str).git_commit
    text = subprocess.run(
        ["git", "show", f"{commit.iloc[0]}:config/config.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (tmp_path / "judged.yaml").write_text(text)
    return load(tmp_path / "judged.yaml")


@pytest.fixture
def project(tmp_path):
    shutil.copytree(ROOT / "reference" / "default", tmp_path / "reference" / "default")
    return tmp_path


def test_the_reference_is_judged_again_from_its_tables(project, monkeypatch):
    monkeypatch.setattr(provenance, "git_commit", lambda: "c0ffee")
    ref = project / "reference" / "default"
    before = pd.read_csv(ref / "verdicts.csv", dtype=str)
    tables = {p.name: p.read_bytes() for p in ref.glob("*.csv") if p.name != "verdicts.csv"}
    rows = rejudge.rejudge(judged_config(project), project)
    after = pd.read_csv(ref / "verdicts.csv", dtype=str)
    assert set(before.id) <= set(after.id) and set(after.judged_at) == {"c0ffee"}
    assert set(after.git_commit) == set(
        rejudge.trained_commits(
            {p.name: str(p) for p in ref.glob("*.csv") if p.name != "verdicts.csv"}
        )
    )
    assert all(i.endswith("[learned runs]") for i in set(after.id) - set(before.id))
    assert list(rows.verdict) == list(after.verdict)
    # every decided or mixed row of training runs shows each run's outcome (issue 75)
    runs = after[
        after.id.str.match(r"(SP|PS|VA|MJ)-") & ~after.verdict.isin(["not run", "not testable"])
    ]
    assert len(runs) >= 8 and runs.outcomes.notna().all()
    n = runs.outcomes.map(lambda o: o.count(" pass") + o.count(" fail"))
    assert (n >= 1).all() and (n[runs.verdict != "underpowered"] >= 3).all()
    # every sparse-parity row its runs decide has its number (SP-2 compares at each length with
    # the k_test tested there: 2l = 20 has none above 8); a gated row has none
    sp = after[after.id.str.startswith("SP")]
    assert (sp.value.notna() == ~sp.verdict.isin(["not run", "not testable"])).all()
    # the tables are the run's: untouched; the report names both commits and what it replaces
    assert {p.name: p.read_bytes() for p in ref.glob("*.csv") if p.name != "verdicts.csv"} == tables
    trained = rejudge.trained_commits({n: str(ref / n) for n in tables})
    text = (ref / "REPORT.md").read_text()
    assert f"Trained at commit `{trained[0]}`; judged again at commit `c0ffee`" in text
    assert "the verdicts these tables had before" in text
    assert max(map(len, text.splitlines())) <= 1000
    assert (ref / "REPORT.html").read_text().count("<table>") >= 4


def test_a_dirty_checkout_or_another_config_is_refused(project, monkeypatch):
    cfg = judged_config(project)
    monkeypatch.setattr(provenance, "git_commit", lambda: "c0ffee-dirty")
    with pytest.raises(SystemExit, match="uncommitted changes"):
        rejudge.rejudge(cfg, project)
    monkeypatch.setattr(provenance, "git_commit", lambda: "c0ffee")
    cfg["sparse_parity"]["train"]["lr"] = 0.5
    with pytest.raises(SystemExit, match="made with config hash"):
        rejudge.rejudge(cfg, project)
    with pytest.raises(SystemExit, match="no committed reference"):
        rejudge.rejudge(judged_config(project), project / "elsewhere")


def test_the_tier_file_a_reference_was_trained_with_is_read_from_git():
    """rejudge.trained_config: the tier file as of the commit that trained the committed
    reference (today's file may plan more runs), validated today, whose hash is the tables';
    a commit or file the history lacks is one ConfigError naming both."""
    import json

    from lengen.config import artifacts
    from lengen.config.config import ConfigError, read_tier_at
    from lengen.config.figure_jobs import to_json

    whole = rejudge.trained_config("config/config.yaml", ROOT)
    cfg = json.loads(to_json(artifacts.report_config(whole)))
    hashes = set(
        pd.read_csv(ROOT / "reference" / "default" / "verdicts.csv", dtype=str).config_hash.dropna()
    )
    assert {provenance.record(cfg, cfg["seed"])["config_hash"]} == hashes
    assert whole == judged_config_of(ROOT)
    with pytest.raises(ConfigError, match="config/config.yaml@0000000: not in the checkout"):
        read_tier_at("config/config.yaml", "0000000", ROOT)
    with pytest.raises(ConfigError, match="config/nothing.yaml@HEAD: no such file"):
        read_tier_at("config/nothing.yaml", "HEAD", ROOT)


def judged_config_of(root) -> dict:
    """judged_config's reading, in a folder of its own."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        return judged_config(Path(tmp))


def test_a_shell_without_the_references_kernels_is_refused(project, monkeypatch):
    """rejudge recomputes intervals from the tables: other CPU kernels (AVX-512 sums) move
    their last digits, so the CLI refuses a shell that has not pinned them, naming each setting
    missing and the line that sets them, and writes nothing."""
    from lengen.core import floats

    if not floats.portable():
        pytest.skip("nothing to pin off x86-64")
    ref = project / "reference" / "default"
    before = {p.name: p.read_bytes() for p in ref.iterdir()}
    shutil.copy(ROOT / "config" / "config.yaml", project / "config.yaml")
    for key, value in floats.portable().items():
        monkeypatch.setenv(key, value)
    key = sorted(floats.portable())[0]
    monkeypatch.setenv(key, "something else")
    with pytest.raises(SystemExit, match=rf"^{key} not set: .*lengen\.core\.floats"):
        rejudge.main(["--configfile", "config.yaml", "--project", str(project)])
    assert {p.name: p.read_bytes() for p in ref.iterdir()} == before
    monkeypatch.delenv(key)
    assert floats.unpinned() == [key]
