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
        f"for tier in {['config', 'smoke', 'gpu', 'paper']!r}:\n"
        f"    load({str(ROOT)!r} + '/config/' + tier + '.yaml')\n"
        "print(json.dumps(sorted(m for m in ('torch', 'mlflow', 'deepspeed', 'transformers',\n"
        "                                    'pandas') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
