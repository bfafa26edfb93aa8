"""The code a rule runs, hashed (lengen.config.code): a real change to any module a job runs
changes its rule's params (Snakemake reruns it); a comment or a docstring does not; a module the
job never imports does not (issue 47: a changed task module reran nothing)."""

from __future__ import annotations

import shutil

from lengen import tasks
from lengen.config.code import closure, code_hash

from .conftest import ROOT


def test_the_hash_follows_what_a_job_runs_and_ignores_how_it_is_written(tmp_path):
    root = tmp_path / "lengen"
    shutil.copytree(ROOT / "src" / "lengen", root)
    train = lambda: code_hash("lengen.train.train", root)  # noqa: E731
    report = lambda: code_hash("lengen.report.report", root)  # noqa: E731
    files = {p.relative_to(root).as_posix() for p in closure("lengen.train.train", root)}
    assert {"tasks/sparse_parity.py", "model/model.py", "train/train.py"} <= files
    assert "report/report.py" not in files  # training never runs the report
    before_train, before_report = train(), report()
    task = root / "tasks" / "sparse_parity.py"
    text = task.read_text()
    task.write_text(text.replace('"""', '"""Reworded. ', 1) + "\n# a comment\n")
    assert train() == before_train  # docstrings and comments: the same code
    task.write_text(
        text.replace('doc="shortest training length 2l"', 'doc="the shortest training length 2l"')
    )
    assert task.read_text() != text and train() == before_train  # a config key's words too
    task.write_text(text.replace("minimum=4, multipleOf=2", "minimum=6, multipleOf=2", 1))
    assert train() != before_train  # its bound is code
    task.write_text(
        text.replace("def train_batch(", "def _unused():\n    return 1\n\n\ndef train_batch(", 1)
    )
    assert train() != before_train  # a real change in a module training runs (imported)
    assert report() != before_report  # the report reads task modules too
    task.write_text(text)
    (root / "report" / "report.py").write_text(
        (root / "report" / "report.py").read_text() + "\nX = 1\n"
    )
    assert train() == before_train and report() != before_report


def test_every_rule_that_runs_lengen_code_carries_its_hash():
    import re

    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        for rule in re.split(r"\n(?=rule )", smk.read_text())[1:]:
            entry = re.search(r"(?:python -m|launcher\}) (lengen\.[a-z_.]+)", rule)
            if entry and entry.group(1) != "lengen.core.tracking":  # the store setup: no science
                assert re.search(
                    rf'code=(lambda w: )?code_hash\("{re.escape(entry.group(1))}"'
                    r'(, task=(w\.experiment|"[a-z_]+"))?\)',
                    rule,
                ), f"{smk.name}: {rule[:40]}"


def test_a_task_job_hashes_its_own_task_module_not_the_others(tmp_path):
    """Issue 66: flipping one label in sparse parity's sample() replanned 74 jobs, the language
    model's and the generation tasks' trainings among them (the task registry imports every
    task). A job of one task hashes its own task module (and what it imports), not the others."""
    root = tmp_path / "lengen"
    shutil.copytree(ROOT / "src" / "lengen", root)
    jobs = {
        (entry, task): lambda e=entry, t=task: code_hash(e, root, task=t)
        for entry in ("lengen.train.train", "lengen.train.group", "lengen.analysis.evaluate")
        for task in tasks.REGISTRY
    }
    before = {k: f() for k, f in jobs.items()}
    task = root / "tasks" / "sparse_parity.py"
    text = task.read_text()
    label = "label = (bits * flagged).sum(axis=1) % 2"
    assert label in text
    flipped = text.replace(label, label + " ^ 1")  # the drill's flipped label
    task.write_text(flipped)
    changed = {k for k, f in jobs.items() if f() != before[k]}
    assert changed == {k for k in jobs if k[1] == "sparse_parity"}
    task.write_text(text)
    base = root / "tasks" / "base.py"  # shared by the generation tasks: theirs rerun
    base.write_text(base.read_text() + "\nX = 1\n")
    assert {k for k, f in jobs.items() if f() != before[k]} >= {
        k for k in jobs if k[1] in tasks.generation_tasks()
    }
