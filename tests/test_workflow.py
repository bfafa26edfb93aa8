"""The Snakemake DAG: dry runs of every tier, and a smoke run of the sparse-parity branch."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from lengen.config import plan
from lengen.config.config import load

from .conftest import ROOT
from .helpers import load_script, snakemake_cmd


def snakemake(workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run snakemake on the project's Snakefile in workdir; fail loudly with its output."""
    cmd = snakemake_cmd(workdir, *args)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc


@pytest.mark.parametrize("tier", ["config", "gpu", "paper"])
def test_dry_run_of_the_full_dag(tmp_path, tier):
    proc = snakemake(
        tmp_path, "-n", "--cores", "2", "--configfile", str(ROOT / "config" / f"{tier}.yaml")
    )
    out = proc.stdout + proc.stderr
    for rule in (
        "mlflow_setup",
        "sparse_parity_testset",
        "synthetic_train",
        "sparse_parity_eval",
        "generation_eval",
        "synthetic_table",
        "figure",
    ):
        assert rule in out
    assert "sparse_parity/neox/K12/seed0/model.pt" in out or tier != "paper"
    if tier == "config":  # the default tier trains the paper model and the departure beside it
        assert "sparse_parity/loglen/K12/seed0/model.pt" in out
        assert "sparse_parity/neox/K12/seed2/model.pt" in out  # a run past the first per K_train
    if tier == "paper":  # Fig. 2: 10 runs per jump; Fig. 3c: 10 runs per depth
        assert "parity_scratchpad/ppc/k4/seed9/model.pt" in out
        assert "variable_assignment/no_scratchpad/d5/seed9/model.pt" in out
    # no job asks for more cores than the tier gives each job: on a machine of few cores such a
    # job waits until every running job has ended (a core that frees starts a one-core job)
    cfg = load(ROOT / "config" / f"{tier}.yaml")
    threads = [int(n) for n in re.findall(r"^\s+threads: (\d+)$", out, re.M)]
    assert max(threads, default=1) <= cfg["runtime"]["threads_per_job"]
    # the step-time benchmark's wall-time estimate counts the jobs this DAG has
    # (and a fused tier's group jobs: its scratchpad runs fuse_runs to a job)
    counts = dict(re.findall(r"^(\w+_train(?:_group)?)\s+(\d+)$", proc.stdout, re.M))
    schedule = load_script(ROOT / "benchmarks" / "schedule.py")
    rule = {"natural_language": "natural_language_train"}  # the rest: synthetic_train
    by_rule = {}
    for k in schedule.job_kinds(cfg, tmp_path / "train.bin"):
        name = rule.get(k.name.split("/")[0], "synthetic_train")
        by_rule[name] = by_rule.get(name, 0) + k.jobs
    if groups := plan.group_jobs(cfg):
        assert tier == "gpu"  # the one fused tier: its 145 paper-grid runs in 21 jobs
        assert by_rule.pop("synthetic_train") == 145 and groups == {"synthetic_train_group": 21}
        by_rule |= groups
    assert by_rule == {name: int(n) for name, n in counts.items()}


def test_a_configfile_is_the_whole_config(tmp_path):
    """Keys a --configfile leaves out are an error naming them, never the default tier's values
    (run from the project directory, where config/config.yaml exists)."""
    import yaml

    partial = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    del partial["seed"], partial["sparse_parity"]["l_max"]
    path = tmp_path / "partial.yaml"
    path.write_text(yaml.safe_dump(partial))
    cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "'seed' is a required property" in out and "l_max" in out


@pytest.mark.slow
def test_slurm_profile_dry_runs_the_paper_dag(tmp_path):
    proc = snakemake(
        tmp_path,
        "-n",
        "--profile",
        str(ROOT / "workflow" / "profiles" / "slurm"),
        "--configfile",
        str(ROOT / "config" / "paper.yaml"),
    )
    out = proc.stdout + proc.stderr
    from lengen.config import plan
    from lengen.config.config import load

    jobs = load(ROOT / "config" / "paper.yaml")["jobs"]
    # a model's minutes from its steps x the measured step x the margin (275), not typed hours
    minutes = plan.job_minutes(jobs["train"], 50000)
    train = out[out.index("rule synthetic_train:") :][:1500]
    assert "gpu=1" in train and f"runtime={minutes}," in train and "cpus_per_task=8" in train
    assert minutes < 24 * 60
    assert "slurm_partition=gpu" in out and "report" in out
    # the 1.3B language models: 8 GPUs on one node, their own CPUs, memory, and a day at most a
    # submission (a cut one resumes on the profile's retry)
    nl = out[out.index("rule natural_language_train:") :][:1500]
    nl_resources = next(line for line in nl.splitlines() if "resources:" in line)
    for item in ("gpu=8", "nodes=1", "cpus_per_task=64", "mem_mb=480000", "runtime=1440"):
        assert item in nl_resources, nl_resources
    for rule in ("natural_language_perplexity", "natural_language_influence"):
        part = out[out.index(f"rule {rule}:") :][:1500]
        assert "gpu=1" in next(line for line in part.splitlines() if "resources:" in line)
    # the same profile on the smoke tier: every job fits a 2-CPU, 8 GB node (the tier's `jobs`)
    proc = snakemake(
        tmp_path,
        "-n",
        "--profile",
        str(ROOT / "workflow" / "profiles" / "slurm"),
        "--configfile",
        str(ROOT / "config" / "smoke.yaml"),
    )
    lines = [line for line in proc.stdout.splitlines() if "resources:" in line and "cpus" in line]
    assert lines and all("cpus_per_task=1," in line and "mem_mb=2000," in line for line in lines)


def test_a_cluster_run_whose_jobs_do_not_fit_a_node_stops_before_submitting(tmp_path):
    """The profile's `cores` states a node's CPUs: on a cluster executor, a tier whose job kind
    asks more stops with the keys named, and sbatch is never called (it would stay PENDING)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "sinfo", "sacct", "squeue"):  # a stand-in SLURM that records calls
        (bin_dir / name).write_text(f"#!/bin/sh\necho {name} >> {tmp_path}/called\n")
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    cmd = snakemake_cmd(
        tmp_path / "run",
        "--executor",
        "slurm",
        "--jobs",
        "1",
        "--cores",
        "8",
        "--default-resources",
        "slurm_partition=x",
        "--configfile",
        str(ROOT / "config" / "paper.yaml"),
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "jobs.natural_language_train asks 64 CPUs / 480000 MB" in out, out[-3000:]
    assert "set the profile's `cores`" in out
    assert "jobs.train" not in out  # the paper tier's synthetic models fit 8 CPUs
    called = tmp_path / "called"
    assert "sbatch" not in (called.read_text().split() if called.exists() else [])


@pytest.mark.parametrize(
    ("target", "needed", "not_needed"),
    [
        (
            "fig7_sparse_parity.png",
            ["neox/K1/seed0/model.pt", "loglen/K1/seed0/model.pt"],
            ["K2/seed0/model.pt", "K3/seed0/model.pt"],
        ),
        (
            "fig8_parity_scratchpad_ablations.png",
            ["parity_scratchpad/absolute/k2/seed0/model.pt"],
            ["parity_scratchpad/ppc/", "variable_assignment"],
        ),
    ],
)
def test_one_figure_target_builds_only_what_it_needs(tmp_path, target, needed, not_needed):
    """`snakemake <one figure>` plans the models that figure draws and no others."""
    cfg = str(ROOT / "config" / "smoke.yaml")
    proc = snakemake(tmp_path, f"reports/smoke/{target}", "-n", "--cores", "2", "--configfile", cfg)
    out = proc.stdout + proc.stderr
    assert all(path in out for path in needed), out[-3000:]
    assert not any(path in out for path in not_needed), out[-3000:]


def job_stats(proc: subprocess.CompletedProcess) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> number of jobs."""
    out = proc.stdout + proc.stderr
    block = out[out.index("Job stats:") : out.index("total")]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", block, re.M)}


@pytest.mark.slow
def test_a_fresh_clone_plans_every_job(tmp_path):
    """Committed files never satisfy the DAG: in a checkout of the tracked files, the default
    tier (`snakemake --cores all`, no --configfile) and the smoke tier plan exactly the jobs an
    empty directory does, every training among them."""
    import shutil

    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True, check=True
    ).stdout.split("\0")
    clone, empty = tmp_path / "clone", tmp_path / "empty"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    empty.mkdir()
    for tier, args in (("config", ()), ("smoke", ("--configfile", "config/smoke.yaml"))):
        cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "all", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=clone)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        planned = job_stats(proc)
        baseline = job_stats(
            snakemake(
                empty,
                "-n",
                "--cores",
                "all",
                "--configfile",
                str(clone / "config" / f"{tier}.yaml"),
            )
        )
        assert planned == baseline, tier
        assert planned["synthetic_train"] > 0 and planned["synthetic_table"] > 0
        assert planned["report"] == 1 and "extended by additional config" not in proc.stdout


@pytest.mark.parametrize("tier", ["config", "smoke"])
def test_snakemake_lint_is_clean(tier):
    """`snakemake --lint` finds nothing (rules thin: params not globals, no hard-coded prefixes,
    no functions among rules)."""
    cmd = [sys.executable, "-m", "snakemake", "--lint", "--configfile", f"config/{tier}.yaml"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Congratulations" in out, out[-4000:]


@pytest.mark.slow
def test_smoke_run_of_the_whole_dag(tmp_path):
    cfg = str(ROOT / "config" / "smoke.yaml")
    # README's command, literally: the workflow pins the CPU kernels the reference was made with
    # (lengen.core.floats) for every job of a CPU tier, so this equals it to the last bit
    snakemake(tmp_path, "--cores", "all", "--configfile", cfg)
    res, rep = tmp_path / "results" / "smoke", tmp_path / "reports" / "smoke"
    for fig in ("fig1", "fig7"):
        png = rep / f"{fig}_sparse_parity.png"
        assert png.stat().st_size > 10_000
    combined = pd.read_csv(rep / "sparse_parity_accuracy.csv")
    assert sorted(combined["k_train"].unique()) == [1, 2, 3]
    assert set(combined["variant"]) == {"neox", "loglen"}
    table = pd.read_csv(res / "sparse_parity" / "loglen" / "K2" / "seed0" / "eval.csv")
    assert set(table.columns) >= {"k_train", "length", "k_test", "accuracy", "n"}
    assert set(table["length"]) == {8, 16, 24}
    assert table["accuracy"].between(0, 1).all()
    # the attention diagnostic: masses over the key categories sum to 1 per (length, k, head)
    assert (rep / "sparse_parity_attention_neox.png").stat().st_size > 10_000
    att = pd.read_csv(rep / "sparse_parity_attention_loglen.csv")
    mass = att[att["table"] == "attention_mass"]
    totals = mass.groupby(["length", "k_test", "layer", "head"])["mass"].sum()
    assert set(mass["length"]) == {8, 24} and ((totals - 1).abs() < 1e-4).all()
    # MLflow holds one finished run per trained model, with eval metrics
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{res / 'mlflow.db'}")
    exp = client.get_experiment_by_name("lengen-smoke/sparse_parity")
    runs = client.search_runs([exp.experiment_id])
    figures = {r.info.run_name: r for r in runs if r.info.run_name.startswith("figure/")}
    runs = [r for r in runs if r not in figures.values()]
    assert sorted(figures) == [
        "figure/fig1_sparse_parity",
        "figure/fig7_sparse_parity",
        "figure/sparse_parity_attention_loglen",
        "figure/sparse_parity_attention_neox",
        "figure/sparse_parity_schemes",
    ]
    attention = figures["figure/sparse_parity_attention_neox"].data.tags["model_runs"]
    k_attention = yaml.safe_load(Path(cfg).read_text())["sparse_parity"]["figures"]["attention"]
    assert attention == f"neox/K{k_attention['k_train']}/seed0"  # the diagnostic's model, run 0
    fig1 = figures["figure/fig1_sparse_parity"]  # which runs made this figure: its tags say
    assert fig1.data.tags["model_runs"].split() == [
        "loglen/K2/seed0",
        "loglen/K3/seed0",
        "neox/K2/seed0",
        "neox/K3/seed0",
    ]
    assert [a.path for a in client.list_artifacts(fig1.info.run_id)] == ["fig1_sparse_parity.png"]
    assert sorted(r.info.run_name for r in runs) == sorted(
        [f"{v}/K{k}/seed0" for v in ("loglen", "neox") for k in (1, 2, 3)]
        + ["alibi/K2/seed0", "nope/K2/seed0"]
    )  # the paper's variants at every K_train, the extra schemes at theirs
    assert all("acc_len16_k1" in r.data.metrics for r in runs)
    # the extra sparse-parity figure: NoPE and ALiBi beside the variants at K_train = 2
    schemes = pd.read_csv(rep / "sparse_parity_schemes.csv")
    assert set(schemes["variant"]) == {"neox", "loglen", "nope", "alibi"}
    assert set(schemes["k_train"]) == {2}
    assert (rep / "sparse_parity_schemes.png").stat().st_size > 10_000
    # majority (the plug-in task): its figure and table, one row per scheme and length
    major = pd.read_csv(rep / "majority_accuracy.csv")
    assert set(major["variant"]) == {"absolute", "nope", "alibi"} and set(major["length"]) == {
        3,
        7,
        11,
    }
    assert (rep / "fig_majority.png").stat().st_size > 10_000
    # the scratchpad branch (Figs. 2, 8, 3): figures, tables, one MLflow run per training run
    for fig in (
        "fig2_parity_scratchpad",
        "fig8_parity_scratchpad_ablations",
        "fig3_variable_assignment",
    ):
        assert (rep / f"{fig}.png").stat().st_size > 10_000
    parity = pd.read_csv(rep / "parity_scratchpad_accuracy.csv")
    assert sorted(parity.groupby("variant")["seed"].nunique().items()) == [
        ("absolute", 1),
        ("ppc", 2),
        ("rope_pose", 1),
    ]
    assert set(parity["jump"]) == {1, 2} and parity["accuracy"].between(0, 1).all()
    # the absolute ablation's plateau budget (2 steps) stopped it; its table says so
    stopped = parity[parity.variant == "absolute"]
    assert (stopped.steps_run == 2).all() and stopped.stop_reason.str.startswith("did not").all()
    assert (parity[parity.variant == "ppc"].stop_reason == "steps").all()
    assign = pd.read_csv(rep / "variable_assignment_accuracy.csv")
    assert set(assign["variant"]) == {"ppc", "no_coupling", "no_scratchpad", "rope_pose"}
    exp = client.get_experiment_by_name("lengen-smoke/parity_scratchpad")
    runs = client.search_runs([exp.experiment_id])
    figures = {r.info.run_name: r for r in runs if r.info.run_name.startswith("figure/")}
    runs = [r for r in runs if r not in figures.values()]
    assert len(runs) == 8 and all("acc_len16" in r.data.metrics for r in runs)
    fig2 = figures["figure/fig2_parity_scratchpad"].data.tags["model_runs"].split()
    assert fig2 == ["ppc/k1/seed0", "ppc/k1/seed1", "ppc/k2/seed0", "ppc/k2/seed1"]
    # the natural-language branch (Table 1, Figs. 4-6): offline corpus, tokens, two models
    ppl = pd.read_csv(rep / "table1_perplexity.csv")
    assert sorted(zip(ppl.model, ppl.eval_length, strict=True)) == [
        ("h_long", 64),
        ("h_long", 128),
        ("h_short", 64),
        ("h_short", 128),
    ]
    assert (ppl.perplexity > 1).all() and (ppl.n_tokens == 4 * 128).all()
    loo = pd.read_csv(rep / "influence_loo.csv")
    assert len(loo) == 3 * 4 and (loo.J.str.split().str.len() == 5).all()
    for fig in ("fig4_influence", "fig5_masks", "fig6_influence"):
        assert (rep / f"{fig}.png").stat().st_size > 10_000
    exp = client.get_experiment_by_name("lengen-smoke/natural_language")
    runs = client.search_runs([exp.experiment_id])
    named = {r.info.run_name: r for r in runs}
    assert sorted(named) == [
        "figure/fig4_influence",
        "figure/fig5_masks",
        "figure/fig6_influence",
        "h_long",
        "h_short",
    ]
    # which models made the influence figures; each model holds its Table 1 perplexities
    assert named["figure/fig4_influence"].data.tags["model_runs"].split() == ["h_short"]
    assert named["figure/fig5_masks"].data.tags["model_runs"].startswith("none")
    for which in ("h_short", "h_long"):
        assert {"perplexity_len64", "perplexity_len128"} <= named[which].data.metrics.keys()
        files = [a.path for a in client.list_artifacts(named[which].info.run_id)]
        assert "table1_perplexity.csv" in files, files
    theory = client.get_experiment_by_name("lengen-smoke/theory")
    (fig,) = client.search_runs([theory.experiment_id])
    assert fig.info.run_name == "figure/theory_figure"
    report_exp = client.get_experiment_by_name("lengen-smoke/report")  # the report's own run
    [rep_run] = client.search_runs([report_exp.experiment_id])
    held = {a.path for a in client.list_artifacts(rep_run.info.run_id)}
    assert {
        "REPORT.md",
        "verdicts.csv",
        "influence_loo.csv",
        "table1_window_nll.csv",
        "sparse_parity_attention_neox.csv",
        "table1_perplexity.csv",
    } <= held
    # the claims report: one row per claim, verdicts from the rules
    text = (rep / "REPORT.md").read_text()
    assert "| SP-1" in text and "| TH-C3a" in text and "config hash" in text
    # a plumbing tier says what it is and counts nothing (issue 48)
    assert text.startswith("# Tier `smoke`: a plumbing check, not a test of the paper")
    assert "Nothing is counted" in text and "| yes " not in text and "reproduced." not in text
    # every result file records its provenance
    from lengen.core import provenance

    assert "git commit" in text and "torch=" in text
    # ...and the run ends with Snakemake's HTML report of every figure
    assert (rep / "report.html").stat().st_size > 100_000
    # ...which opens on the result: REPORT.md rendered (REPORT.html) as its front page
    assert "<table>" in (rep / "REPORT.html").read_text()
    html = (rep / "report.html").read_text()
    assert "a plumbing check, not a test of the paper" in html
    # its parameters name the MLflow store from the working directory, not this machine's root
    assert "sqlite:///results/smoke/mlflow.db" in html and "sqlite:////" not in html
    # ...and in a real browser it opens on its title, its tables the page's width (issue 65)
    from .helpers import assert_opens_on_its_title, browser

    if browser() is not None:
        assert_opens_on_its_title(rep / "report.html", tmp_path, "a plumbing check")
    for csv in (rep).glob("*.csv"):
        assert set(provenance.COLUMNS) <= set(pd.read_csv(csv).columns), csv
    for png in (rep).glob("*.png"):
        assert set(provenance.read_png(png)) == set(provenance.COLUMNS), png
    assert_same_as_the_smoke_reference(rep)
    # a complete run leaves nothing to do
    proc = snakemake(tmp_path, "-n", "--cores", "2", "--configfile", cfg)
    assert "Nothing to be done" in proc.stdout + proc.stderr
    # changing one figure's plotting parameters reruns only that figure
    changed = yaml.safe_load(Path(cfg).read_text())
    changed["variable_assignment"]["figures"]["fig3"]["title"] = "Fig. 3, retitled"
    new_cfg = tmp_path / "changed.yaml"
    new_cfg.write_text(yaml.safe_dump(changed, sort_keys=False))  # the config's order: rows
    proc = snakemake(tmp_path, "-n", "--cores", "2", "--configfile", str(new_cfg))
    out = proc.stdout + proc.stderr
    stats = out[out.index("Job stats:") : out.index("total")]
    assert " figure 1 " in f" {' '.join(stats.split())} "
    for rule in ("train", "eval", "table", "theory", "nl_", "report"):
        assert rule not in stats, stats  # the report takes no figure and no figure section


def assert_same_as_the_smoke_reference(rep: Path) -> None:
    """The same config and seed give the same tables as the committed smoke reference
    (reference/smoke/, refreshed by `python -m lengen.report.refresh`), provenance
    aside, and REPORT.md says so: every verdict and number the same as the reference's."""
    from lengen.report.reference import table_differences

    committed = ROOT / "reference" / "smoke"
    count, found = table_differences(rep, committed)  # the documented command's comparison
    assert count > 0 and not found, found
    text = (rep / "REPORT.md").read_text()
    assert "They differ in config hash" not in text  # the same config as the reference's
    n = len(pd.read_csv(committed / "verdicts.csv"))
    assert f"**{n} of {n} verdicts are the same as the reference's**." in text
    same = re.search(r"(\d+) of (\d+) measured numbers are identical", text)
    assert same and same[1] == same[2] and int(same[1]) > 0, text[-3000:]


def test_every_rule_has_conda_env_log_and_benchmark():
    """`--sdm conda` means something: every rule names envs/lengen.yaml, which installs the
    project with constraints.txt's versions (as the README's install and CI), on a Python the
    project supports; every rule writes a log and a benchmark (wall time, memory)."""
    import re

    import yaml

    env = yaml.safe_load((ROOT / "envs" / "lengen.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == ["-c ../constraints.txt", "-e .."]
    [python] = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python=")]
    assert python.removeprefix("python=") in ("3.11", "3.12", "3.13")
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        for rule in re.split(r"\n(?=rule )", smk.read_text())[1:]:
            name = rule.split(":")[0]
            for directive in ("conda:\n        CONDA_ENV", "benchmark:", "log:"):
                assert directive in rule, f"{smk.name}: {name} lacks {directive.split(':')[0]}"


@pytest.mark.slow
def test_fused_groups_are_planned_and_run_as_one_job_each(tmp_path):
    """runtime.fuse_runs (issue 45): the runs of one variant (its jumps / depths and seeds share
    every shape) train as one job per group of fuse_runs (lengen.train.group); each run still
    gets its own model.pt, MLflow run and evaluation, and its evaluation waits for its group."""
    import yaml

    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg["runtime"]["fuse_runs"] = 2
    path = tmp_path / "fused.yaml"
    path.write_text(yaml.safe_dump(cfg))
    planned = job_stats(snakemake(tmp_path, "-n", "--cores", "2", "--configfile", str(path)))
    # each variant's (jump / depth, run) members in groups of 2 (they share every shape)
    from lengen import tasks

    groups = members_generation = 0
    for exp, task in tasks.generation_tasks().items():
        for variant, var in cfg.get(exp, {}).get("variants", {}).items():
            values = tasks.variant_section(cfg[exp], variant)[task.SETTING.values]
            groups += -(-len(values) * var["runs"] // 2)
            members_generation += len(values) * var["runs"]
    assert groups < members_generation  # fewer jobs than runs
    # sparse parity's K_train x runs too; the extra schemes figure's models train one by one
    sp = cfg["sparse_parity"]
    per_variant = [len(sp["k_train"]) * v["runs"] for v in sp["variants"].values()]
    members = sum(per_variant)
    sp_groups = sum(-(-n // 2) for n in per_variant)
    assert planned["synthetic_train_group"] == groups + sp_groups
    schemes = len(sp.get("schemes", {}).get("variants", {}))
    assert planned.get("synthetic_train", 0) == schemes  # only the schemes' models train alone
    assert planned["sparse_parity_eval"] == members + schemes
    # evaluated as groups too (one pass each), each run's eval.csv its group's table
    assert planned["generation_eval_group"] == groups
    assert planned["generation_eval"] == members_generation
    target = "results/smoke/parity_scratchpad/ppc/k1/seed1/eval.csv"
    proc = snakemake(tmp_path, target, "--cores", "2", "--configfile", str(path))
    assert "synthetic_train_group" in proc.stdout + proc.stderr
    run = tmp_path / "results" / "smoke" / "parity_scratchpad" / "ppc" / "k1"
    for seed in (0, 1):  # the group wrote both runs' files, as two train jobs would
        assert {"model.pt", "spec.json", "mlflow_run_id"} <= {
            p.name for p in (run / f"seed{seed}").iterdir()
        }
    table = pd.read_csv(run / "seed1" / "eval.csv")
    assert "generation_eval_group" in proc.stdout + proc.stderr
    pd.testing.assert_frame_equal(table, pd.read_csv(run / "seed1" / "eval_fused.csv"))
    ref = pd.read_csv(ROOT / "reference" / "smoke" / "parity_scratchpad_accuracy.csv")
    ref = ref[(ref.variant == "ppc") & (ref.jump == 1) & (ref.seed == 1)]
    assert list(table.length) == list(ref.length) and list(table.run) == list(ref.run)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'results' / 'smoke' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("lengen-smoke/parity_scratchpad")
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    assert runs["ppc/k1/seed0"].info.status == runs["ppc/k1/seed1"].info.status == "FINISHED"
    assert "acc_len16" in runs["ppc/k1/seed1"].data.metrics  # its evaluation resumed its run
    # sparse parity: K_train 1 and 2 of a variant train as one group, each scored on its own
    sp_eval = "results/smoke/sparse_parity/neox/K2/seed0/eval.csv"
    proc = snakemake(tmp_path, sp_eval, "--cores", "2", "--configfile", str(path))
    assert "synthetic_train_group" in proc.stdout + proc.stderr
    sp_dir = tmp_path / "results" / "smoke" / "sparse_parity" / "neox"
    assert (sp_dir / "K1" / "seed0" / "model.pt").is_file() and (sp_dir / "fused0.done").is_file()
    scored = pd.read_csv(tmp_path / sp_eval)
    assert set(scored.length) == set(cfg["sparse_parity"]["eval"]["lengths"])
    # a member's model.pt deleted (issue 66): a plain rerun forces its group's job, which links
    # the finished model back (finished/, untrained), and rescores
    model = sp_dir / "K1" / "seed0" / "model.pt"
    weights = torch.load(model, weights_only=False)["state_dict"]
    model.unlink()
    before = (tmp_path / sp_eval).stat().st_mtime_ns
    proc = snakemake(tmp_path, sp_eval, "--cores", "2", "--configfile", str(path))
    out = proc.stdout + proc.stderr
    assert "unfinished training:" in out and "synthetic_train_group" in out, out
    again = torch.load(model, weights_only=False)["state_dict"]
    for name, value in weights.items():  # the same group again: the same weights
        torch.testing.assert_close(again[name], value, rtol=0, atol=0)
    assert (tmp_path / sp_eval).stat().st_mtime_ns > before  # rescored from the new group
    assert (
        "Nothing to be done"
        in snakemake(tmp_path, sp_eval, "--cores", "2", "-n", "--configfile", str(path)).stdout
    )


def test_the_rule_files_are_snakefmt_clean():
    """The Snakefile and every .smk are as snakefmt writes them (pyproject.toml [tool.snakefmt]:
    line length 100): `snakefmt workflow Snakefile` fixes a failure."""
    done = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "workflow", "Snakefile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_python_is_ruff_formatted():
    """Every Python file is as `ruff format` writes it (pyproject.toml [tool.ruff]: line length
    100) and lint-clean, probes and benchmarks included: `ruff format` fixes a layout failure.
    A layout change moves no code hash (lengen.config.code hashes syntax trees)."""
    folders = ["src", "tests", "tools", "probes", "benchmarks"]
    ruff = Path(sys.executable).with_name("ruff")
    for check in (["format", "--check"], ["check"]):
        done = subprocess.run(
            [str(ruff), *check, *folders], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def shrunk_to_cpu(cfg: dict) -> dict:
    """A GPU tier's config with the same DAG (the same runs, groups, lengths, figures) shrunk in
    width to run on a 2-core CPU: every model 1 layer x 16 wide, a few steps, a few test
    examples, a tiny language corpus; fuse_runs and everything that plans jobs unchanged."""
    import copy

    cfg = copy.deepcopy(cfg)
    cfg["runtime"].update(
        device="cpu", precision="fp32", gpus_per_job=0, threads_per_job=1, progress=False
    )
    cfg["jobs"] = {kind: {"cpus": 1, "mem_mb": 2000, "runtime": 15} for kind in cfg["jobs"]}
    tiny = {"n_layer": 1, "n_head": 2, "d_model": 16}
    few = {"steps": 4, "warmup_steps": 1, "checkpoint_every": 2, "log_every": 2}
    from lengen.config import plan

    for name in plan.experiments(cfg):  # every synthetic task the tier trains
        section = cfg[name]
        section["model"] = {**section["model"], **tiny}
        section["train"].update(few, batch_size=8)
        section["eval"].update(n_examples=8, batch_size=8)
    if "attention" in cfg["sparse_parity"]["figures"]:
        cfg["sparse_parity"]["figures"]["attention"]["n_examples"] = 8
    nl = cfg["natural_language"]
    nl["corpus"].update(packages=[{"name": "datasets"}], docs_per_shard=500)
    nl["tokenizer"].update(vocab_size=512)
    nl["max_tokens"] = {"train": 100000, "validation": 20000}
    nl["model"] = {"n_layer": 1, "n_head": 2, "d_model": 16, "rotary_pct": 1.0}
    nl["short"].update(pose_start=3)
    for which, batch in (("short", 4), ("long", 2)):
        nl[which]["train"].update(few, batch_size=batch, micro_batch_size=batch)
    nl["eval"].update(n_chunks=4, batch_size=4)
    nl["influence"] = {"n_examples": 3, "k": 5}
    nl.pop("loss_chunk_tokens", None)
    return cfg


@pytest.mark.slow
def test_the_gpu_smoke_dag_runs_whole_on_a_cpu(tmp_path):
    """Issue 63: config/gpu-smoke.yaml is every branch of the gpu tier's DAG (fused groups of the
    paper's model, their evaluation in one pass, the tables, figures, REPORT and MLflow) in a few
    minutes of a GPU. The same DAG shrunk in width (shrunk_to_cpu: the same jobs) runs here on
    the CPU from scratch, so CI plans and runs the gpu tier's rules."""
    from lengen.config.config import read_tier

    whole = read_tier(ROOT / "config" / "gpu-smoke.yaml")
    path = tmp_path / "gpu-smoke-cpu.yaml"
    path.write_text(yaml.safe_dump(shrunk_to_cpu(whole), sort_keys=False))
    gpu = job_stats(
        snakemake(
            tmp_path / "plan",
            "-n",
            "--cores",
            "2",
            "--configfile",
            str(ROOT / "config" / "gpu-smoke.yaml"),
        )
    )
    cpu = job_stats(snakemake(tmp_path / "run", "-n", "--cores", "2", "--configfile", str(path)))
    assert cpu == gpu  # the same DAG
    assert gpu["synthetic_train_group"] == plan.group_jobs(whole)["synthetic_train_group"]
    from lengen import tasks

    eval_groups = sum(
        len(plan.groups(whole, e, v))
        for e in plan.experiments(whole)
        if e in tasks.generation_tasks()
        for v in whole[e]["variants"]
    )
    assert "synthetic_train" not in gpu and gpu["generation_eval_group"] == eval_groups
    snakemake(tmp_path / "run", "--cores", "2", "--configfile", str(path))
    reports = tmp_path / "run" / "reports" / "gpu-smoke"
    assert (reports / "REPORT.md").is_file() and (reports / "verdicts.csv").is_file()
    for stem in figures_of(whole):
        assert (reports / f"{stem}.png").stat().st_size > 1000, stem
    table = pd.read_csv(reports / "parity_scratchpad_accuracy.csv")
    assert set(table.variant) == set(whole["parity_scratchpad"]["variants"])
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'run' / 'results' / 'gpu-smoke' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("lengen-gpu-smoke/variable_assignment")
    runs = client.search_runs([exp.experiment_id])
    assert {r.info.run_name for r in runs} >= {"ppc/d2/seed0", "rope_pose/d3/seed0"}
    assert all(r.info.status == "FINISHED" for r in runs)


def figures_of(cfg: dict) -> list[str]:
    """The figure stems a config draws (what REPORT.md lists)."""
    from lengen.config import artifacts

    return [name.removesuffix(".png") for name in artifacts.report_figures(cfg)]


def test_a_jobs_known_error_is_the_line_snakemake_shows(tmp_path):
    """Issue 66: Snakemake showed only "exit status 1 ... check log" for a job that ended on a
    known error; the job's line (here ModelFileError on a model.pt that is not one) now shows on
    Snakemake's own stderr too, and the job's log holds that one line, no traceback."""
    cfg = str(ROOT / "config" / "smoke.yaml")
    folder = tmp_path / "results" / "smoke" / "sparse_parity" / "neox" / "K1" / "seed0"
    folder.mkdir(parents=True)
    (folder / "model.pt").write_text("not a model")
    target = str((folder / "eval.csv").relative_to(tmp_path))
    cmd = snakemake_cmd(tmp_path, target, "--cores", "1", "--configfile", cfg)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode != 0
    shown = [line for line in proc.stderr.splitlines() if line.startswith("ModelFileError: ")]
    assert len(shown) == 1 and str(folder.relative_to(tmp_path) / "model.pt") in shown[0], (
        proc.stderr[-3000:]
    )
    log = tmp_path / "results" / "smoke" / "logs" / "sparse_parity" / "eval_neox_K1_seed0.log"
    assert "Traceback" not in log.read_text() and shown[0] in log.read_text().splitlines()


def test_every_job_kind_says_its_known_error_where_snakemake_reports_it():
    """The line above holds for every job kind, not only evaluation: every module a rule's shell
    runs (as `python -m`, the training launcher's module, or the GPU wrapper plan.devices puts
    in front) ends through lengen.core.cli.one_line_errors, and every rule's shell gets the
    prefix that opens LENGEN_ERROR_FD on Snakemake's own stderr."""
    import importlib
    import re

    from lengen.config import plan

    text = "\n".join(p.read_text() for p in sorted((ROOT / "workflow" / "rules").glob("*.smk")))
    shells = re.findall(r"\n    shell:\n((?:        .*\n)+)", text)
    named = {
        m
        for block in shells
        for m in re.findall(r"(?:python -m|\{params\.launcher\}) (lengen(?:\.\w+)+)", block)
    }
    named |= set(
        re.findall(
            r"python -m (lengen(?:\.\w+)+)", plan.devices({"runtime": {"device": "cuda"}}, 1)
        )
    )
    assert {
        "lengen.train.train",
        "lengen.train.group",
        "lengen.analysis.evaluate",
        "lengen.report.figures",
        "lengen.report.report",
        "lengen.core.gpus",
        "lengen.core.tracking",
    } <= named, named
    assert len(named) >= 13, named
    from lengen.core.cli import one_line_errors

    wrapper = one_line_errors(lambda: None).__code__
    for module in sorted(named):
        assert importlib.import_module(module).main.__code__ is wrapper, module
    assert 'shell.prefix("set -euo pipefail; exec 3>&2; export LENGEN_ERROR_FD=3; ")' in text


def test_one_results_folder_has_one_writer(tmp_path):
    """Issue 66: two checkouts given one results_dir each ran every job into it (Snakemake's lock
    is per checkout). A workflow about to run jobs takes results_dir/.lengen-writer; a live
    holder refuses it in one line naming the holder (exit 2), a dead one's is taken over, and
    the lock is given back at the end. A dry run takes none."""
    import json
    import socket

    from lengen.config import lock

    results = tmp_path / "results" / "smoke"
    results.mkdir(parents=True)
    held = {"host": socket.gethostname(), "pid": 1, "checkout": "/elsewhere", "since": "then"}
    (results / lock.LOCK).write_text(json.dumps(held))  # process 1 lives: a live holder
    cmd = snakemake_cmd(
        tmp_path,
        "results/smoke/sparse_parity/testset.npz",
        "--cores",
        "1",
        "--configfile",
        str(ROOT / "config" / "smoke.yaml"),
    )
    assert "Nothing to be done" not in snakemake(tmp_path, *cmd[7:], "-n").stdout  # a dry run
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 2
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("ResultsLocked: ")]
    assert (
        "process 1, checkout /elsewhere" in line
        and f"delete {results.relative_to(tmp_path)}" in line
    )
    assert not (results / "sparse_parity" / "testset.npz").exists()
    (results / lock.LOCK).write_text(json.dumps({**held, "pid": 2**22 + 12345}))  # gone
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0 and "is gone; this one takes the results folder" in proc.stderr
    assert (results / "sparse_parity" / "testset.npz").exists()
    assert not (results / lock.LOCK).exists()  # given back


def test_the_results_lock_is_taken_once_and_given_back_only_by_its_holder(tmp_path):
    import json

    from lengen.config import lock

    assert lock.claim(tmp_path, ".") is None
    assert lock.claim(tmp_path, ".") is None  # this process's own, again
    mine = json.loads((tmp_path / lock.LOCK).read_text())
    other = {**mine, "host": "another-host"}
    (tmp_path / lock.LOCK).write_text(json.dumps(other))
    lock.release(tmp_path)  # not ours: kept
    with pytest.raises(lock.ResultsLocked, match="host another-host"):
        lock.claim(tmp_path, ".")
    (tmp_path / lock.LOCK).write_text(json.dumps(mine))
    lock.release(tmp_path)
    assert not (tmp_path / lock.LOCK).exists()


@pytest.mark.parametrize("content", ["", '{"host": "a', "[1, 2]", "\xff\xfe"])
def test_an_empty_or_unreadable_writer_lock_is_taken_over_in_one_line(tmp_path, content):
    """A lock file cut by a kill while it was written (`host ?, process -1` once wedged the folder
    for good): nobody to name or wait for, so it is taken over, saying so in one line; the new
    lock is whole (written beside it and linked into place) and no part file stays."""
    import json
    import os

    from lengen.config import lock

    (tmp_path / lock.LOCK).write_bytes(content.encode("latin-1"))
    note = lock.claim(tmp_path, ".")
    assert note and "empty or unreadable (cut by a kill); this workflow takes" in note
    assert len(note.splitlines()) == 1
    assert json.loads((tmp_path / lock.LOCK).read_text())["pid"] == os.getpid()
    assert sorted(p.name for p in tmp_path.iterdir()) == [lock.LOCK]
    lock.release(tmp_path)
    assert not (tmp_path / lock.LOCK).exists()


def test_constraints_pin_every_dependency_inside_its_range():
    """constraints.txt (what the README's install and CI use) pins every dependency of
    pyproject.toml, dev tools included, with `==` to a version its range admits; the README and
    .ci/run install through it, and pyproject's Python range admits 3.11-3.13."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = constraints()
    for dep in project["dependencies"] + project["optional-dependencies"]["dev"]:
        req = Requirement(dep)
        assert req.name.lower() in pins, f"constraints.txt lacks {req.name}"
        assert req.specifier.contains(pins[req.name.lower()]), (dep, pins[req.name.lower()])
    python = SpecifierSet(project["requires-python"])
    assert all(python.contains(v) for v in ("3.11.7", "3.12.1", "3.13.0"))
    assert not python.contains("3.10.13")  # Snakemake 9, numpy 2.4, pandas 3: 3.11 and newer
    install = '-e ".[dev]" -c constraints.txt'
    assert install in (ROOT / ".ci" / "run").read_text()
    assert install in (ROOT / "README.md").read_text()


def constraints() -> dict[str, str]:
    """constraints.txt's pins, {lowercase name: version}."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def test_the_submissions_are_counted_from_the_profiles_groups():
    """No SLURM needed: the dry run through the profile (the slurm executor plans without a
    cluster) gives the count the SLURM test expects: every group the profile forms, each
    language-model evaluation its own one-GPU job."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--profile",
            str(ROOT / "workflow" / "profiles" / "slurm"),
            "--configfile",
            str(ROOT / "config" / "smoke.yaml"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    from .helpers import planned_submissions

    n, kinds = planned_submissions(out.stdout + out.stderr)
    assert {
        "rule_setup_",
        "rule_tables_",
        "rule_figures_",
        "rule_model_",
        "rule_natural_language_eval_",
        "rule_report",
    } <= kinds
    evals = len(re.findall(r"Group job natural_language_eval\b", out.stdout + out.stderr))
    assert evals == 3 and n == len(re.findall(r"Group job", out.stdout + out.stderr)) + 3


def test_a_results_folder_that_cannot_be_written_is_named_in_one_line(
    tmp_path, monkeypatch, request
):
    """The results folder's lock is the first thing a run writes: a folder without write access
    (a second user, in a forked child, where this runs as root) and a full disk are each one
    line naming the folder and the cause (once a 38-line PermissionError traceback), and a full
    disk leaves no .part file behind."""
    import errno
    import pathlib

    from lengen.config import lock

    real = pathlib.Path.write_text

    def full(self, *args, **kwargs):
        if self.name.endswith(".part"):
            real(self, "")  # created, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    with pytest.raises(
        lock.ResultsUnwritable,
        match=rf"^{tmp_path}: the workflow cannot write "
        r"its results there \(its disk is full: ",
    ):
        lock.claim(tmp_path, ".")
    assert not list(tmp_path.glob("*.part")) and not (tmp_path / lock.LOCK).exists()
    monkeypatch.undo()
    if os.geteuid() != 0:
        return
    from .helpers import as_second_user, shared_folder

    shared = shared_folder(request)  # root's, 0755: a second user cannot write in it
    said = as_second_user(lambda: lock.claim(shared / "results", "."))
    assert said.startswith(
        f"ResultsUnwritable: {shared / 'results'}: the workflow cannot write "
        "its results there (no write access"
    ), said
