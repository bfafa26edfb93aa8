"""The house holds its stages: a layers contract (import-linter, pyproject.toml's
[tool.importlinter]), no import cycle between any two modules of lengen, and reading and validating
a config (what every Snakefile parse does, under SLURM once per job) imports neither torch nor
mlflow."""

from __future__ import annotations

import graphlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

# a dev dependency (import-linter's): a machine without it (a GPU box running `-m device`) still
# collects the suite
grimp = pytest.importorskip("grimp")


def test_the_stages_contract_is_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "stages KEPT" in out.stdout


def test_no_import_cycle_between_modules():
    graph = grimp.build_graph("lengen")
    deps = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    try:
        list(graphlib.TopologicalSorter(deps).static_order())
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle: {' -> '.join(err.args[1])}")
    assert "lengen.core.specs" in deps and not any(
        m.startswith("lengen.") and not m.startswith("lengen.core")
        for m in deps["lengen.core.specs"]
    )


def test_validating_a_config_imports_neither_torch_nor_mlflow():
    """What workflow/rules/common.smk imports, then every tier validated, in a fresh process."""
    code = (
        "import json, sys\n"
        "from lengen import tasks\n"
        "from lengen.config import artifacts\n"
        "from lengen.config.config import load\n"
        "from lengen.core.specs import experiment_name, tracking_uri\n"
        f"for tier in {['config', 'smoke', 'gpu', 'gpu-smoke', 'paper']!r}:\n"
        f"    load({str(ROOT)!r} + '/config/' + tier + '.yaml')\n"
        "print(json.dumps(sorted(m for m in ('torch', 'mlflow', 'deepspeed', 'transformers',\n"
        "                                    'pandas') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_the_test_set_and_table_jobs_import_neither_torch_nor_mlflow(tmp_path):
    """The jobs of lengen.analysis.tables run as the rules run them: sparse parity's test set
    written, a table joined; neither loads a model library (about 6 s a job before they were
    split from the scoring: benchmarks/measured/2026-12-02-cpu/)."""
    table = tmp_path / "sp.csv"
    table.write_text((ROOT / "reference" / "smoke" / "sparse_parity_accuracy.csv").read_text())
    code = (
        "import json, sys\n"
        "from lengen.analysis import tables\n"
        "tables.main(['testset', '--experiment', 'sparse_parity', '--eval', json.dumps("
        "{'lengths': [8, 16], 'k_test': [1, 2], 'n_examples': 4}), '--n', '20', '--seed', '0',"
        f" '--out', {str(tmp_path / 'test.npz')!r}])\n"
        f"tables.main(['combine', '--tables', {str(table)!r}, '--out', "
        f"{str(tmp_path / 'all.csv')!r}])\n"
        "print(json.dumps(sorted(m for m in ('torch', 'mlflow', 'deepspeed', 'transformers')"
        " if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
    assert (tmp_path / "test.npz").stat().st_size > 0
    assert (tmp_path / "all.csv").read_text() == table.read_text()


def test_a_module_no_job_imports_says_why_it_stays():
    """Issue 62: every module of the package is run by a job (a rule's `python -m`, in any
    tier's planned jobs: tests/golden/plans), imported by the workflow itself (the Snakefile and
    its rules), or imported by one of those; a module outside all of them says in its docstring
    why it stays in the package ("No workflow job imports this module: ...")."""
    import ast
    import re

    graph = grimp.build_graph("lengen")
    entries = set()
    for plan in (ROOT / "tests" / "golden" / "plans").glob("*.json"):
        for job in json.loads(plan.read_text()):
            entries |= set(re.findall(r"(lengen(?:\.\w+)+)", job.get("shell", "")))
    for smk in [ROOT / "Snakefile", *(ROOT / "workflow" / "rules").glob("*.smk")]:
        entries |= set(re.findall(r"^from (lengen[\w.]*) import", smk.read_text(), re.M))
        entries |= {
            f"{m}.{n.strip()}"
            for m, names in re.findall(r"^from (lengen[\w.]*) import (.+)$", smk.read_text(), re.M)
            for n in names.split(",")
        }
    entries &= graph.modules
    used = set(entries)
    for module in entries:
        used |= graph.find_upstream_modules(module)
    packages = {m for m in graph.modules if (ROOT / "src" / m.replace(".", "/")).is_dir()}
    unexplained = []
    for module in sorted(graph.modules - used - packages):
        path = ROOT / "src" / (module.replace(".", "/") + ".py")
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if "No workflow job imports this module: " not in doc:
            unexplained.append(module)
    assert unexplained == []
    assert "lengen.train.lifecycle" in used and "lengen.config.plan" in used
