"""The jobs every tier plans (tools/planned_jobs.py): a dry run from scratch of each tier gives
exactly the jobs of its golden file (inputs, outputs, log, benchmark, resources, shell command),
whatever the rules are called. The golden files were written before issue 62 moved the workflow's
planning into lengen.config.plan and folded sparse parity's training rules into the shared ones:
the move changed no job."""

from __future__ import annotations

import json

import pytest

from .conftest import ROOT
from .helpers import load_script

planned = load_script(ROOT / "tools" / "planned_jobs.py")


@pytest.mark.parametrize("tier", planned.TIERS)
def test_a_dry_run_plans_the_golden_jobs(tier, tmp_path):
    jobs = planned.planned_jobs(tier, tmp_path)
    golden = json.loads((planned.GOLDEN / f"{tier}.json").read_text())
    by_output = {tuple(j["output"]): j for j in jobs}
    want = {tuple(j["output"]): j for j in golden}
    assert sorted(by_output) == sorted(want), "jobs planned differ (outputs)"
    for output, job in want.items():
        assert by_output[output] == job, output
