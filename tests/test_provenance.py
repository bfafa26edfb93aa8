"""Reproducibility: the same config and seed give the same numbers, and every result file records
its config hash, seed, package versions and git commit."""

from __future__ import annotations

import copy
import re

import pandas as pd

from lengen import tasks
from lengen.analysis.evaluate import evaluate_scratchpad
from lengen.core import provenance, tracking
from lengen.report.figures import generation_figure
from lengen.train.train import train


def test_record_names_config_seed_commit_and_versions():
    r = provenance.record({"a": 1, "b": [2, 3]}, 7)
    assert set(r) == set(provenance.COLUMNS)
    assert r["config_hash"] == provenance.record({"b": [2, 3], "a": 1}, 7)["config_hash"]
    assert r["config_hash"] != provenance.record({"a": 2, "b": [2, 3]}, 7)["config_hash"]
    assert r["seed"] == 7
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", r["git_commit"])
    assert "torch=2.13.0" in r["versions"] and "python=3." in r["versions"]


def test_stamp_keeps_per_row_seeds():
    table = pd.DataFrame({"seed": [0, 1], "accuracy": [0.5, 1.0]})
    stamped = provenance.stamp(table, {"x": 1}, 99)
    assert list(stamped["seed"]) == [0, 1]
    assert stamped["config_hash"].nunique() == 1 and "git_commit" in stamped
    assert "seed" in provenance.stamp(table.drop(columns="seed"), {"x": 1}, 99)


def test_figure_png_carries_provenance(tmp_path):
    table = pd.DataFrame(
        {
            "variant": "ppc",
            "jump": 1,
            "seed": [0, 1, 0, 1],
            "length": [10, 10, 20, 20],
            "n": 16,
            "accuracy": [1, 1, 0.5, 0.75],
        }
    )
    meta = provenance.png_metadata({"panels": ["ppc"]}, provenance.table_seeds(table))
    out = tmp_path / "fig.png"
    generation_figure(table, ["ppc"], "t", out, {}, (4, 8), meta)
    assert provenance.read_png(out) == provenance.record({"panels": ["ppc"]}, "0,1")


def test_same_config_and_seed_give_the_same_numbers(tmp_path, smoke_config):
    # train and evaluate a scratchpad model twice from scratch: byte-identical result tables
    cfg = copy.deepcopy(smoke_config)
    cfg["results_dir"] = str(tmp_path / "results")
    spec = tasks.generation_spec(cfg, "parity_scratchpad", "ppc", 1, 0)
    spec["train"].update(steps=20, log_every=10, checkpoint_every=100)
    tracking.prepare_store(spec["tracking"]["uri"], [spec["tracking"]["experiment"]])
    evals = cfg["parity_scratchpad"]["eval"]
    texts = []
    for name in ("first", "second"):
        model = train(spec, tmp_path / name)
        out = tmp_path / name / "eval.csv"
        evaluate_scratchpad(model, evals, cfg["seed"], out)
        texts.append(out.read_text())
    assert texts[0] == texts[1]
    table = pd.read_csv(tmp_path / "first" / "eval.csv")
    assert set(provenance.COLUMNS) <= set(table.columns)
    assert (table["seed"] == spec["seed"]).all()


def test_copy_inside_another_checkout_names_its_own_commit(tmp_path):
    """A tree copied without its .git into an ignored folder of another checkout (as to a lent
    GPU machine) must not take that checkout's HEAD: the commit comes from LENGEN_SOURCE_COMMIT."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    outer = tmp_path / "outer"
    outer.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    git = ["git", "-C", str(outer)]
    subprocess.run([*git, "init", "-q"], check=True, env=env)
    (outer / ".gitignore").write_text("/copy/\n")
    subprocess.run([*git, "add", ".gitignore"], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "outer"], check=True, env=env)
    outer_head = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    src = Path(provenance.__file__).resolve().parents[2]  # .../src
    shutil.copytree(
        src / "lengen",
        outer / "copy" / "src" / "lengen",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    probe = "from lengen.core.provenance import git_commit; print(git_commit())"
    env = {**env, "PYTHONPATH": str(outer / "copy" / "src"), "LENGEN_SOURCE_COMMIT": "f" * 40}
    got = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()
    assert got == "f" * 40 != outer_head
