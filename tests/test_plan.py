"""The jobs every tier plans (tools/planned_jobs.py): a dry run from scratch of each tier gives
exactly the jobs of its golden file (inputs, outputs, log, benchmark, resources, shell command),
whatever the rules are called. The golden files were written before issue 62 moved the workflow's
planning into lengen.config.plan and folded sparse parity's training rules into the shared ones:
the move changed no job."""

from __future__ import annotations

import json

import pytest

from .conftest import ROOT
from .helpers import load_script, snakemake_cmd

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


def test_the_plan_of_a_fused_tier():
    """lengen.config.plan on the gpu tier (runtime.fuse_runs 8): every variant's runs in fused
    order (each setting's runs one after another), groups of 8 with the rest last, each run's
    group and marker, what its evaluation waits for; every variant's runs in ceil(runs / 8)
    group jobs, each run in exactly one group."""
    import math

    from lengen.config import plan
    from lengen.config.config import load

    cfg = load(ROOT / "config" / "gpu.yaml")
    assert plan.fuse_runs(cfg) == 8
    ppc = plan.runs(cfg, "parity_scratchpad", "ppc")
    assert [(r.value, r.run) for r in ppc[:11]] == [(1, r) for r in range(10)] + [(2, 0)]
    assert ppc[0].folder(cfg) == "results/gpu/parity_scratchpad/ppc/k1/seed0"
    groups = plan.groups(cfg, "parity_scratchpad", "ppc")
    assert [len(g) for g in groups] == [8, 8, 8, 8, 8]  # 4 jumps x 10 runs
    assert sum(groups, []) == ppc and plan.group(cfg, "parity_scratchpad", "ppc", 1) == groups[1]
    run = ppc[9]  # jump 1, run 9: the second group
    assert plan.group_index(cfg, run) == 1
    assert plan.trained(cfg, run) == "results/gpu/parity_scratchpad/ppc/fused1.done"
    sp = plan.runs(cfg, "sparse_parity", "neox")
    assert {r.setting for r in sp} == {f"K{k}" for k in cfg["sparse_parity"]["k_train"]}
    assert sp[0].spec(cfg)["run_name"] == f"neox/K{sp[0].value}/seed0"
    fused = [
        (e, v)
        for e in plan.experiments(cfg)
        for v in plan.variants(cfg, e)
        if plan.fused(cfg, e, v)
    ]
    assert fused, "the gpu tier fuses its synthetic runs"
    for e, v in fused:
        runs = plan.runs(cfg, e, v)
        groups = plan.groups(cfg, e, v)
        assert sum(groups, []) == runs and len(groups) == math.ceil(len(runs) / 8)
        assert all(len(g) == 8 for g in groups[:-1]) and 0 < len(groups[-1]) <= 8
    want = sum(math.ceil(len(plan.runs(cfg, e, v)) / 8) for e, v in fused)
    assert plan.group_jobs(cfg) == {"synthetic_train_group": want}


def test_the_plan_of_a_tier_without_fusion(smoke_config):
    """The smoke tier trains each run alone: its evaluation waits for its model.pt, no group
    jobs; sparse parity's extra scheme models are one run each at schemes.k_train, and the
    evals a figure reads follow the variants and settings asked for."""
    from lengen.config import plan

    cfg = smoke_config
    assert plan.fuse_runs(cfg) == 1 and plan.group_jobs(cfg) == {}
    run = plan.runs(cfg, "parity_scratchpad", "ppc")[0]
    assert plan.trained(cfg, run) == run.model(cfg) == f"{run.folder(cfg)}/model.pt"
    schemes = cfg["sparse_parity"]["schemes"]
    for variant in schemes["variants"]:
        assert plan.is_scheme(cfg, "sparse_parity", variant)
        assert plan.runs(cfg, "sparse_parity", variant) == [
            plan.Run("sparse_parity", variant, schemes["k_train"], 0)
        ]
        assert not plan.fused(
            {**cfg, "runtime": {**cfg["runtime"], "fuse_runs": 4}}, "sparse_parity", variant
        )
    assert plan.variants(cfg, "sparse_parity") == [
        *cfg["sparse_parity"]["variants"],
        *schemes["variants"],
    ]
    k = cfg["sparse_parity"]["k_train"][0]
    evals = plan.evals(cfg, "sparse_parity", ["neox"], [k])
    runs = cfg["sparse_parity"]["variants"]["neox"]["runs"]
    assert evals == [
        f"{cfg['results_dir']}/sparse_parity/neox/K{k}/seed{r}/eval.csv" for r in range(runs)
    ]


def test_a_training_begun_and_not_ended_is_found_and_forced(tmp_path):
    """Issue 66: after a kill of a forced rerun, or a deleted model.pt, a plain `snakemake` said
    "Nothing to be done" (the evaluation was there; a missing file between two present ones is not
    remade), leaving the run without its model. plan.unfinished finds such a run folder (its
    spec.json, MLflow run id or checkpoints, no model.pt) and the workflow forces its training job
    (a run alone's model.pt, a fused group's done marker), saying so; what it feeds then reruns."""
    import subprocess

    import yaml

    from lengen.config import plan

    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg["results_dir"] = "results/smoke"
    jobs = plan.training_jobs(cfg)
    run = plan.Run("sparse_parity", "neox", 1, 0)
    assert jobs[run.model(cfg)] == [run.folder(cfg)]
    assert sum(map(len, jobs.values())) == sum(
        len(plan.runs(cfg, e, v)) for e in plan.experiments(cfg) for v in plan.variants(cfg, e)
    )

    def dry_run(target, config):
        cmd = snakemake_cmd(tmp_path, target, "-n", "--cores", "2", "--configfile", str(config))
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout + done.stderr

    folder = tmp_path / run.folder(cfg)
    folder.mkdir(parents=True)
    (folder / "eval.csv").write_text("x\n")  # its evaluation ran once
    smoke = ROOT / "config" / "smoke.yaml"
    assert "Nothing to be done" in dry_run(run.eval(cfg), smoke)  # nothing began: nothing to do
    assert plan.unfinished({run.model(cfg): [str(folder)]}) == {}
    for began in ("spec.json", "mlflow_run_id", "ckpt"):
        made = folder / began
        made.mkdir() if began == "ckpt" else made.write_text("x")
        found = plan.unfinished({run.model(cfg): [str(folder)]})
        assert found == {run.model(cfg): f"{folder} has {began} but no model.pt"}
        out = dry_run(run.eval(cfg), smoke)
        assert f"unfinished training: {folder.relative_to(tmp_path)} has {began}" in out
        assert "rule synthetic_train:" in out and "Forced execution" in out
        assert "rule sparse_parity_eval:" in out
        made.rmdir() if began == "ckpt" else made.unlink()
    (folder / "model.pt").write_text("x")
    (folder / "spec.json").write_text("x")
    assert plan.unfinished({run.model(cfg): [str(folder)]}) == {}  # ended
    # a fused group: its done marker is there, one member's model.pt is not
    cfg["runtime"]["fuse_runs"] = 2
    fused = tmp_path / "fused.yaml"
    fused.write_text(yaml.safe_dump(cfg))
    marker = plan.trained(cfg, run)
    assert marker.endswith("fused0.done")
    (tmp_path / marker).write_text("")
    (folder / "model.pt").unlink()
    out = dry_run(run.eval(cfg), fused)
    assert "rule synthetic_train_group:" in out and "Forced execution" in out, out
    assert f"{marker} reruns" in out
