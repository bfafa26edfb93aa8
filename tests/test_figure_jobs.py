"""A figure has one home (issue 46, item 4): its registry entry (lengen.config.artifacts) and its
kind, one object (lengen.report.figures.KINDS, issue 62): how the kind's job is made from entry
and config (the one figure rule's inputs and arguments), how it is drawn, its caption; no other
rule draws a figure."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from lengen.config import artifacts, config
from lengen.report import figures

from .conftest import ROOT
from .helpers import snakemake_cmd

TIERS = ("config", "smoke", "gpu", "gpu-smoke", "paper")


def test_every_kind_has_a_drawer_a_cli_choice_and_a_caption():
    """Each kind a figure names is one FigureKind: its job, its drawer (the CLI's choice) and its
    caption; report.html's caption file holds no kind of its own (it shows the job's)."""
    kinds = {f.kind for f in artifacts.FIGURES.values()} | {"attention"}
    assert kinds == set(figures.KINDS)
    assert set(figures.cli_parser()._actions[1].choices) == kinds
    cfg = config.load(ROOT / "config" / "smoke.yaml")
    for name, kind in figures.KINDS.items():
        assert kind.name == name and callable(kind.job) and callable(kind.draw)
        assert len(kind.caption(cfg)) > 80 and kind.reads in ("eval", "tables", "nothing")
    caption = (ROOT / "workflow" / "report" / "figure.rst").read_text()
    assert "snakemake.params.caption" in caption and "kind" not in caption


def test_importing_the_figures_is_cheap():
    """The Snakefile reads the kinds when it plans: importing them loads no plotting, table or
    model library (a dry run stays fast; under SLURM every job parses the Snakefile)."""
    code = (
        "import sys, lengen.report.figures\n"
        "print(sorted(m for m in ('torch', 'matplotlib', 'seaborn', 'pandas', 'mlflow',"
        " 'scipy', 'deepspeed') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("tier", TIERS)
def test_each_figure_job_is_what_the_figures_cli_takes(tier):
    """Every figure a tier draws has a job whose arguments the CLI parses, whose inputs are its
    tables and its MLflow experiment's marker, with a category, and exactly the figures
    REPORT.md lists; only the masks figure reads no table."""
    cfg = config.load(ROOT / "config" / f"{tier}.yaml")
    jobs = figures.figure_jobs(cfg)
    assert sorted(f"{stem}.png" for stem in jobs) == artifacts.report_figures(cfg)
    for stem, job in jobs.items():
        args = figures.cli_parser().parse_args([*job.argv, "--out", f"{stem}.png"])
        assert args.figure == job.kind == artifacts.all_figures(cfg)[stem].kind
        assert [str(t) for t in args.tables] == job.tables and (job.tables or job.kind == "fig5")
        assert job.inputs == [*job.tables, f"{cfg['results_dir']}/mlflow/{job.section}.ready"]
        assert job.category and job.caption == figures.KINDS[job.kind].caption(cfg)


def test_a_figures_inputs_are_the_models_it_draws():
    """Fig. 1 reads every run of every variant at its K_train values, Fig. 8 only its panels'
    variants, the attention diagnostic its variant's table and names its model run 0."""
    cfg = config.load(ROOT / "config" / "smoke.yaml")
    sp = cfg["sparse_parity"]
    fig1 = figures.figure_job(cfg, "fig1_sparse_parity")
    runs = sum(v["runs"] for v in sp["variants"].values()) * len(sp["figures"]["fig1"])
    assert len(fig1.tables) == runs
    fig8 = figures.figure_job(cfg, "fig8_parity_scratchpad_ablations")
    panels = cfg["parity_scratchpad"]["figures"]["fig8"]["panels"]
    assert {p.split("/")[-4] for p in fig8.tables} == set(panels)
    att = figures.figure_job(cfg, "sparse_parity_attention_neox")
    k = sp["figures"]["attention"]["k_train"]
    assert att.tables == [f"{cfg['reports_dir']}/sparse_parity_attention_neox.csv"]
    assert att.args[att.args.index("--models") + 1] == f"neox/K{k}/seed0"


@pytest.mark.parametrize("tier", ("config", "smoke"))
def test_the_one_figure_rule_writes_every_png(tier, tmp_path):
    """In a dry run of the whole tier, every .png job is rule `figure`, one per listed figure,
    but the figure of every run, which the report draws from its verdicts."""
    cmd = snakemake_cmd(
        tmp_path, "-n", "--cores", "1", "--configfile", str(ROOT / "config" / f"{tier}.yaml")
    )
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    jobs = re.findall(r"^rule (\w+):\n(?:    .*\n)*?    output: (.*)$", out, re.M)
    png = {(rule, o) for rule, outs in jobs for o in outs.split(", ") if o.endswith(".png")}
    runs = {(rule, o) for rule, o in png if o.endswith(f"/{artifacts.RUNS_FIGURE}")}
    assert {rule for rule, _ in runs} == {"report"} and len(runs) == 1
    png -= runs
    assert {rule for rule, _ in png} == {"figure"}
    cfg = config.load(ROOT / "config" / f"{tier}.yaml")
    assert sorted(o.rsplit("/", 1)[1] for _, o in png) == artifacts.report_figures(cfg)
