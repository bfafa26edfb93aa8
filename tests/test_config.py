"""Config tiers are valid; the schema rejects bad keys and values with messages naming them."""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import re
import subprocess
import sys
import time

import pytest

from lengen.config.config import ConfigError, load, validate
from lengen.core.settings import setting

from .conftest import ROOT
from .helpers import snakemake_cmd


@pytest.mark.parametrize("tier", ["config", "smoke", "paper"])
def test_every_tier_is_valid(tier):
    load(ROOT / "config" / f"{tier}.yaml")


def test_paper_tier_is_exactly_the_paper():
    sp = load(ROOT / "config" / "paper.yaml")["sparse_parity"]
    assert sp["model"] | {"rotary_pct": None} == {
        "n_layer": 12,
        "n_head": 16,
        "d_model": 1024,
        "rotary_pct": None,
    }  # App. E
    t = sp["train"]
    assert (t["steps"], t["batch_size"], t["lr"], t["weight_decay"]) == (50000, 64, 5e-5, 0.1)
    assert (t["warmup_steps"], t["schedule"], t["k_curriculum_steps"]) == (300, "linear", 0)
    assert (sp["n"], sp["l_max"], sp["train_min_len"], sp["train_max_len"]) == (20, 510, 20, 50)
    assert sp["eval"]["n_examples"] == 512 and sp["k_train"] == [4, 6, 8, 10, 12]
    assert sp["eval"]["k_test"] == [4, 6, 8, 10, 12, 14, 16]
    assert min(sp["eval"]["lengths"]) == 20 and max(sp["eval"]["lengths"]) == 500


def test_paper_tier_has_tables_3_and_4_exactly():
    cfg = load(ROOT / "config" / "paper.yaml")
    for name, batch, lengths, l_max, runs in (
        ("parity_scratchpad", 64, (10, 40, 10, 200), 210, {"ppc": 10, "absolute": 3}),
        ("variable_assignment", 32, (20, 60, 20, 200), 230, {"ppc": 3, "no_scratchpad": 10}),
    ):
        section = cfg[name]
        t = section["train"]
        assert (t["steps"], t["batch_size"], t["lr"], t["weight_decay"]) == (
            50000,
            batch,
            5e-5,
            0.1,
        )
        assert (t["warmup_steps"], t["schedule"]) == (300, "linear")
        assert section["model"]["n_layer"] == 12 and section["model"]["d_model"] == 1024
        ev = section["eval"]
        got = (section["train_min_len"], section["train_max_len"], min(ev["lengths"]))
        assert got + (max(ev["lengths"]),) == lengths
        assert section["l_max"] == l_max and ev["n_examples"] == 192
        assert {v: section["variants"][v]["runs"] for v in runs} == runs
    assert cfg["parity_scratchpad"]["jumps"] == [1, 2, 3, 4]
    assert cfg["variable_assignment"]["depths"] == [2, 3, 4, 5]
    assert cfg["variable_assignment"]["n_vars"] == 200


@pytest.mark.parametrize(
    "mutate,key",
    [
        (lambda c: c.update(bogus=1), "bogus"),
        (lambda c: c["sparse_parity"]["train"].update(lr=-1.0), "sparse_parity.train.lr"),
        (
            lambda c: c["sparse_parity"]["train"].update(schedule="step"),
            "sparse_parity.train.schedule",
        ),
        (lambda c: c["sparse_parity"]["model"].pop("n_head"), "sparse_parity.model.n_head"),
        (lambda c: c["sparse_parity"].update(n=7), "sparse_parity.n"),
        (lambda c: c["runtime"].update(device="tpu"), "runtime.device"),
        (lambda c: c["sparse_parity"]["figures"].update(fig1=[99]), "sparse_parity.figures.fig1"),
        (lambda c: c["sparse_parity"].update(l_max=20), "sparse_parity.l_max"),
        (lambda c: c["sparse_parity"]["eval"].update(lengths=[21]), "sparse_parity.eval.lengths.0"),
        (
            lambda c: c["parity_scratchpad"]["variants"]["ppc"].update(scheme="alibi_typo"),
            "parity_scratchpad.variants.ppc.scheme",
        ),
        (
            lambda c: c["variable_assignment"]["variants"]["no_scratchpad"].update(scheme="ppc"),
            "variable_assignment.variants.no_scratchpad.scheme",
        ),
        (
            lambda c: c["variable_assignment"]["variants"]["ppc"].pop("scratchpad"),
            "variable_assignment.variants.ppc.scratchpad",
        ),
        (lambda c: c["parity_scratchpad"].update(l_max=10), "parity_scratchpad.l_max"),
        (
            lambda c: c["variable_assignment"]["figures"]["fig3"].update(panels=["nope"]),
            "variable_assignment.figures.fig3.panels",
        ),
        # relations the tasks need, checked before any job (smoke: 2l in [8, 12], l <= 6)
        (lambda c: c["sparse_parity"].update(k_train=[1, 2, 3, 30]), "sparse_parity.k_train"),
        (lambda c: c["parity_scratchpad"].update(jumps=[1, 5]), "parity_scratchpad.jumps"),
        (
            lambda c: c["parity_scratchpad"]["variants"]["ppc"].update(model={"n_head": 3}),
            "parity_scratchpad.variants.ppc.model.d_model",
        ),
        (
            lambda c: c["variable_assignment"]["variants"]["ppc"].update(train={"stepz": 3}),
            "variable_assignment.variants.ppc.train.stepz",
        ),
        # a variant's own training range (equal-budget runs): checked as the section's is
        (
            lambda c: c["parity_scratchpad"]["variants"]["ppc"].update(
                section={"train_max_len": 6}
            ),
            "parity_scratchpad.variants.ppc.section.train_min_len",
        ),
        (
            lambda c: c["parity_scratchpad"]["variants"]["ppc"].update(section={"jumps": [5]}),
            "parity_scratchpad.variants.ppc.section.jumps",
        ),
        (
            lambda c: c["parity_scratchpad"]["variants"]["ppc"].update(section={"n_vars": 3}),
            "parity_scratchpad.variants.ppc.section.n_vars",
        ),
        # micro-batches that do not divide the batch (issue 47: failed in the first job before)
        (
            lambda c: c["sparse_parity"]["train"].update(batch_size=8, micro_batch_size=3),
            "sparse_parity.train.micro_batch_size",
        ),
        (lambda c: c["runtime"].update(fuse_runs=0), "runtime.fuse_runs"),
        # `$` in a path: kept literal by us, expanded by `datasets` (issue 47): refused
        (lambda c: c.update(results_dir="$HOME/results"), "results_dir"),
        # `~` is not expanded either: a literal ./~/ folder, an invitation to `rm -rf ~` (issue 66)
        (lambda c: c.update(results_dir="~/results"), "results_dir"),
        # a model that cannot fit its job's memory (issue 47: 24 x 4096 died at 9 GB mid-job)
        (
            lambda c: c["parity_scratchpad"]["model"].update(n_layer=24, d_model=4096, n_head=32),
            "parity_scratchpad.model",
        ),
        (
            lambda c: c["sparse_parity"]["variants"]["loglen"].update(
                model={"n_layer": 24, "d_model": 4096, "n_head": 32}
            ),
            "sparse_parity.variants.loglen.model",
        ),
        (
            lambda c: c["sparse_parity"]["variants"]["neox"].pop("runs"),
            "sparse_parity.variants.neox.runs",
        ),
    ],
)
def test_bad_config_is_rejected_naming_the_key(smoke_config, mutate, key):
    cfg = copy.deepcopy(smoke_config)
    mutate(cfg)
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert f"  {key}:" in str(err.value)


def test_snakemake_refuses_a_bad_config_before_any_job(tmp_path, smoke_config):
    import subprocess
    import sys

    import yaml

    cfg = copy.deepcopy(smoke_config)
    cfg["sparse_parity"]["train"]["lr"] = "fast"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(ROOT / "Snakefile"),
            "-n",
            "--configfile",
            str(bad),
            "--directory",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert "sparse_parity.train.lr" in proc.stdout + proc.stderr


def test_config_check_names_the_file_and_line(tmp_path, capsys):
    """`python -m lengen.config.config FILE`: a YAML syntax error gives file:line:column, an empty
    file says so (Snakemake's own message names neither); a valid tier passes."""
    from lengen.config.config import main

    bad, empty = tmp_path / "bad.yaml", tmp_path / "empty.yaml"
    bad.write_text("tier: smoke\nseed: [1,\n")
    empty.write_text("")
    with pytest.raises(SystemExit):
        main([str(bad), str(empty), str(ROOT / "config" / "smoke.yaml")])
    captured = capsys.readouterr()
    assert f"{bad}:3:1: not valid YAML" in captured.err
    assert (
        f"{empty}: empty, or not a mapping" in captured.err and "smoke.yaml: valid" in captured.out
    )


def test_a_variant_trains_its_own_range_and_settings():
    """variants.<v>.section and .train (as a tier trains Fig. 8's ablations at jump 1 only, for
    24,000 steps): the variant's specs, jumps and budget are its own; the other variants keep
    the section's."""
    from lengen import tasks

    cfg = load(ROOT / "config" / "config.yaml")
    budget = {
        "steps": 24000,
        "early_stop": {
            "every": 250,
            "target_accuracy": 0.99,
            "patience": 3,
            "min_steps": 24000,
            "n_examples": 512,
            "n_draws": 8,
            "plateau_steps": 24000,
        },
    }
    section = {
        **cfg["parity_scratchpad"],
        "variants": {
            **cfg["parity_scratchpad"]["variants"],
            **{
                v: {"scheme": v, "runs": 3, "section": {"jumps": [1]}, "train": budget}
                for v in ("absolute", "rope_pose")
            },
        },
    }
    cfg = {**cfg, "parity_scratchpad": section}
    spec = tasks.generation_spec(cfg, "parity_scratchpad", "absolute", 1, 0)
    assert spec["train"]["steps"] == 24000 and spec["train"]["early_stop"]["min_steps"] == 24000
    assert spec["train"]["early_stop"]["plateau_steps"] == 24000  # no plateau stop
    ppc = tasks.generation_spec(cfg, "parity_scratchpad", "ppc", 4, 0)
    assert ppc["train"]["steps"] == 8000 and ppc["task"]["train_max_len"] == 40
    own = tasks.variant_section(section, "rope_pose")
    assert own["jumps"] == [1] and tasks.get("parity_scratchpad").train_lengths(own) == (10, 40)
    assert tasks.variant_section(section, "ppc") is section
    # a variant with its own range: the range is its own, the others keep the section's
    over = {
        **section,
        "variants": {
            **section["variants"],
            "ppc_short": {
                "scheme": "ppc",
                "runs": 1,
                "section": {"train_max_len": 20, "jumps": [1, 4]},
            },
        },
    }
    cfg2 = {**cfg, "parity_scratchpad": over}
    short = tasks.generation_spec(cfg2, "parity_scratchpad", "ppc_short", 4, 0)
    assert (short["task"]["train_min_len"], short["task"]["train_max_len"]) == (10, 20)


def test_jobs_ask_what_their_tier_needs():
    """Resources come from the tier's `jobs` section (issue: the cluster promise): the smoke tier
    fits a 2-CPU, 8 GB node; the paper tier keeps App. F's node for the language models; the
    SLURM profile asks nothing per rule; a model's job gets at least its threads."""
    import copy

    import yaml

    smoke = load(ROOT / "config" / "smoke.yaml")["jobs"]
    assert all(j["cpus"] <= 2 and j["mem_mb"] <= 8000 for j in smoke.values())
    assert load(ROOT / "config" / "paper.yaml")["jobs"]["natural_language_train"]["cpus"] == 64
    profile = yaml.safe_load((ROOT / "workflow" / "profiles" / "slurm" / "config.yaml").read_text())
    assert "set-resources" not in profile and "slurm_account" not in profile["default-resources"]
    cfg = copy.deepcopy(load(ROOT / "config" / "gpu.yaml"))
    cfg["jobs"]["train"]["cpus"] = 1  # threads_per_job 4
    with pytest.raises(ConfigError, match="jobs.train.cpus: must be >= runtime.threads_per_job"):
        validate(cfg)


def test_cluster_check_names_what_will_not_run(tmp_path, monkeypatch):
    """lengen.config.cluster on a fake SLURM (sinfo, sacct on PATH): a job larger than every
    node and a cluster without accounting are named; a fitting tier passes."""
    from lengen.config import cluster

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (
        ("sinfo", "local*|2|7900|infinite|(null)\n"),
        ("sacct", "Slurm accounting storage is disabled\n"),
    ):
        (bin_dir / name).write_text(f"#!/bin/sh\nprintf '{text}'\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    smoke, paper = (load(ROOT / "config" / f"{t}.yaml") for t in ("smoke", "paper"))
    node = [cluster.Partition("local", 2, 7900, None, 0)]
    assert cluster.partitions(None) == node
    sacct = cluster.run("sacct")
    assert cluster.problems(smoke, node, "") == []
    found = cluster.problems(paper, node, sacct)
    assert any(p.startswith("jobs.natural_language_train asks 64 CPUs") for p in found)
    assert "workflow/profiles/slurm-squeue" in found[-1]
    with pytest.raises(SystemExit):
        cluster.main(["--configfile", str(ROOT / "config" / "paper.yaml")])


def test_cluster_check_names_each_job_and_limit_a_cluster_would_refuse(tmp_path, monkeypatch):
    """A SLURM job's minutes come from its own steps and the measured step time with a margin,
    never a group's sum of typed hours; lengen.config.cluster names each job and limit a cluster
    would refuse: a MaxTime below a job's minutes, nodes with fewer GPUs than a job asks for, a
    cut training that needs more resubmissions than the profile's retries, GPUs asked with
    --gpus where SelectType is not select/cons_tres. Read from a fake sinfo and scontrol."""
    from lengen.config import cluster, plan

    paper, gpu = (load(ROOT / "config" / f"{t}.yaml") for t in ("paper", "gpu"))
    train = paper["jobs"]["train"]
    assert plan.job_minutes(train, 50000) == math.ceil(50000 * 0.212 * 1.5 / 60) + 10  # 275
    subs = {s.label.split()[0]: s for s in cluster.submissions(paper)}
    assert subs["jobs.train"].minutes == 275 + paper["jobs"]["eval"]["runtime"] < 24 * 60
    nl = subs["jobs.natural_language_train"]
    assert nl.minutes == 1440 < nl.need == math.ceil(49000 * 1.3 * 1.5 / 60) + 10
    assert nl.gpus == 8 and subs["jobs.natural_language_eval"].gpus == 1

    roomy = [cluster.Partition("gpu", 64, 512000, 2 * 1440, 8)]
    assert cluster.problems(paper, roomy, "", None, "select/cons_tres", retries=1) == []
    found = cluster.problems(
        paper,
        [cluster.Partition("short", 64, 512000, 240, 8)],
        "",
        None,
        "select/cons_res",
        retries=0,
    )
    assert (
        "jobs.train + jobs.eval (a model's training and evaluation, one job) asks 395 min; "
        "partition short allows 240 (MaxTime): set jobs.train.max_runtime lower"
    ) in found[0]
    assert any(
        line.startswith("jobs.natural_language_train asks 1,440 min; partition short")
        for line in found
    )
    four = cluster.problems(paper, [cluster.Partition("short", 64, 512000, 2880, 4)], "")
    assert any(
        line.startswith(
            "jobs.natural_language_train asks 64 CPUs / 480000 MB / 8 GPU(s) "
            "(natural_language.gpus_per_job) of one node; no node type holds"
        )
        for line in four
    )
    assert any(
        "needs ~1,603 min, 1,440 a submission: 2 submissions, but the profile's retries "
        "is 0: set retries: 1" in line
        for line in found
    )
    assert found[-1].startswith("SelectType is select/cons_res: the SLURM plugin asks for GPUs")
    assert len(found) == len(set(found))
    assert (
        cluster.problems(
            gpu,
            [cluster.Partition("gpu", 16, 128000, 1440, 1)],
            "",
            None,
            "select/cons_tres",
            retries=1,
        )
        == []
    )

    assert [cluster.minutes(t) for t in ("infinite", "30", "2:00:00", "1-00:00:00", "1-12")] == [
        None,
        30,
        120,
        1440,
        2160,
    ]
    assert [cluster.gres_gpus(g) for g in ("(null)", "gpu:8", "gpu:h100:4(S:0-1)")] == [0, 8, 4]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {
        "sinfo": "gpu*|64|512000|1-00:00:00|gpu:h100:8(S:0-1)\nshort|8|64000|30|(null)\n",
        "scontrol": "SelectType              = select/cons_tres\n",
        "sacct": "",
    }
    for name, text in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/sh\nprintf '{text}'\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert cluster.partitions(None) == [
        cluster.Partition("gpu", 64, 512000, 1440, 8),
        cluster.Partition("short", 8, 64000, 30, 0),
    ]
    assert cluster.select_type() == "select/cons_tres"


FAKE_SINFO = """#!/bin/sh
# sinfo --noheader --format=... [--partition P]: the node types of P (all where none is named)
case "$*" in
  *--partition*) want=$(echo "$*" | sed 's/.*--partition[ =]\\([^ ]*\\).*/\\1/') ;;
  *) want= ;;
esac
printf '%s\\n' "$SINFO_LINES" | while IFS= read -r line; do
  part=${line%%|*}; part=${part%\\*}
  [ -z "$want" ] || [ "$part" = "$want" ] && echo "$line"
done
exit 0
"""


def fake_slurm(bin_dir, sbatch_mark=None):
    """sinfo (node types from $SINFO_LINES, honouring --partition), scontrol (cons_tres), sacct,
    squeue; sbatch records its call in `sbatch_mark` and fails."""
    bin_dir.mkdir(exist_ok=True)
    scripts = {
        "sinfo": FAKE_SINFO,
        "scontrol": "#!/bin/sh\necho 'SelectType              = select/cons_tres'\n",
        "sacct": "#!/bin/sh\nexit 0\n",
        "squeue": "#!/bin/sh\nexit 0\n",
        "sbatch": f"#!/bin/sh\ntouch {sbatch_mark}\nexit 1\n",
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)


def test_the_preflight_reads_its_profile_and_judges_whole_node_types(tmp_path, monkeypatch):
    """lengen.config.cluster takes the partition, `cores` and retries from the profile it is
    given; a partition sinfo does not list is refused in one line naming those it does; on a
    partition of two node types (many CPUs without GPUs, GPUs with few CPUs) a job that needs
    both of one node is refused, though the most CPUs and the most GPUs each suffice."""
    from lengen.config import cluster

    fake_slurm(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    lines = [
        "mixed*|128|1000000|infinite|(null)",
        "mixed*|16|256000|infinite|gpu:8",
        "big|128|1000000|infinite|gpu:8",
    ]
    monkeypatch.setenv("SINFO_LINES", "\n".join(lines))
    assert [p.gpus for p in cluster.partitions("mixed")] == [0, 8]
    with pytest.raises(
        cluster.UnknownPartition,
        match=r"partition 'gpux': sinfo lists no node "
        r"in it \(partitions here: big, mixed\)",
    ):
        cluster.partitions("gpux")
    shipped = cluster.read_profile(ROOT / "workflow" / "profiles" / "slurm")
    assert shipped["partition"] == "gpu" and shipped["retries"] >= 1 and shipped["cores"]
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(
        "executor: slurm\ncores: 128\nretries: 1\ndefault-resources:\n  slurm_partition: mixed\n"
    )
    assert cluster.read_profile(profile) == {"cores": 128, "retries": 1, "partition": "mixed"}
    paper = load(ROOT / "config" / "paper.yaml")
    mixed = cluster.problems(paper, cluster.partitions("mixed"), "", None, "select/cons_tres", 1)
    assert any(
        x.startswith("jobs.natural_language_train asks 64 CPUs / 480000 MB / 8 GPU(s)")
        and "no node type holds them all" in x
        for x in mixed
    ), mixed
    assert (
        cluster.problems(paper, cluster.partitions("big"), "", None, "select/cons_tres", 1, 128)
        == []
    )
    out = tmp_path / "out.txt"
    for partition, code in (("mixed", 1), ("nowhere", 2)):
        (profile / "config.yaml").write_text(
            (profile / "config.yaml")
            .read_text()
            .replace("slurm_partition: mixed", f"slurm_partition: {partition}")
        )
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "lengen.config.cluster",
                "--configfile",
                str(ROOT / "config" / "paper.yaml"),
                "--profile",
                str(profile),
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        out.write_text(done.stderr)
        assert done.returncode == code, done.stderr
        if code == 2:
            assert done.stderr.strip().startswith("UnknownPartition: partition 'nowhere'")
            assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_preflight_and_the_workflows_start_agree_on_every_tier(tmp_path):
    """Every tier, with the shipped SLURM profile (and with its `cores` set for the paper tier):
    lengen.config.cluster names a job the profile's `cores` cannot hold exactly when Snakemake's
    own start stops before submitting, with the same lines; a tier it passes reaches its first
    sbatch (a fake, on a fake cluster whose one node holds every job)."""
    mark = tmp_path / "sbatch-called"
    fake_slurm(tmp_path / "bin", mark)
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "SINFO_LINES": "gpu*|256|4000000|infinite|gpu:8",
        "LENGEN_DISK_CHECK": "0",
    }
    shipped = ROOT / "workflow" / "profiles" / "slurm"
    roomy = tmp_path / "roomy"
    roomy.mkdir()
    text = (shipped / "config.yaml").read_text()
    (roomy / "config.yaml").write_text(re.sub(r"(?m)^cores: \d+", "cores: 64", text))
    runs = [(p.stem, shipped) for p in sorted((ROOT / "config").glob("*.yaml"))]
    runs.append(("paper", roomy))
    refused = {}
    for tier, profile in runs:
        pre = subprocess.run(
            [
                sys.executable,
                "-m",
                "lengen.config.cluster",
                "--configfile",
                str(ROOT / "config" / f"{tier}.yaml"),
                "--profile",
                str(profile),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        said = {x for x in pre.stderr.splitlines() if "(the profile's `cores`)" in x}
        mark.unlink(missing_ok=True)
        work = tmp_path / f"work-{tier}-{profile.name}"
        work.mkdir()
        start = subprocess.Popen(
            snakemake_cmd(
                work,
                "--profile",
                str(profile),
                "--configfile",
                str(ROOT / "config" / f"{tier}.yaml"),
            ),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        deadline = time.time() + 300
        while start.poll() is None and not mark.exists() and time.time() < deadline:
            time.sleep(0.2)
        if start.poll() is None:
            os.killpg(start.pid, 9)
        output = start.communicate()[0]
        stopped = {x.strip() for x in output.splitlines() if "(the profile's `cores`)" in x}
        assert said == stopped, (tier, profile.name, said, stopped)
        assert mark.exists() == (not said), (tier, profile.name, output[-3000:])
        refused[(tier, profile.name)] = bool(said)
    assert refused[("paper", "slurm")] and not refused[("paper", "roomy")]
    assert not refused[("smoke", "slurm")]


def test_a_jobs_kind_asks_for_its_minutes_one_way():
    """jobs.<kind>: a fixed runtime, or (a training kind) step_s with its margin; each mix or
    lack is one error naming the key."""
    smoke = load(ROOT / "config" / "smoke.yaml")
    for change, says in (
        (
            {"train": {"cpus": 1, "mem_mb": 2000, "runtime": 15, "step_s": 0.1, "margin": 2}},
            "jobs.train: gives runtime and margin, step_s",
        ),
        ({"train": {"cpus": 1, "mem_mb": 2000}}, "jobs.train: needs runtime"),
        ({"train": {"cpus": 1, "mem_mb": 2000, "step_s": 0.1}}, "jobs.train.margin: step_s needs"),
        (
            {"eval": {"cpus": 1, "mem_mb": 2000, "step_s": 0.1, "margin": 2}},
            "jobs.eval.step_s: only a training kind",
        ),
        (
            {"train": {"cpus": 1, "mem_mb": 2000, "max_runtime": 60}},
            "jobs.train.step_s: max_runtime need step_s",
        ),
    ):
        cfg = copy.deepcopy(smoke)
        cfg["jobs"].update(change)
        with pytest.raises(ConfigError, match=re.escape(says)):
            validate(cfg)


def test_a_binary_config_file_is_named(tmp_path):
    """A config that is not UTF-8 text (a PNG given as --configfile) is one error naming it."""
    from lengen.config.config import read_yaml

    png = tmp_path / "fig.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(ConfigError, match=f"{png}: not a UTF-8 text file"):
        read_yaml(png)


def test_config_readme_lists_every_key_of_the_schema():
    """config/README.md holds `python -m lengen.config.keys`'s table as the schema is now."""
    from lengen.config.keys import markdown

    assert markdown() in (ROOT / "config" / "README.md").read_text()


def test_every_default_is_the_dataclass_default_and_written_once():
    """Issue 62: config/README.md's default column is the dataclasses' (an absent key's value
    in the job), for every section they parse: grad_clip 1.0, betas, checkpoint_every, log_every
    and the early stop's n_examples 512 among them; no description restates one ("absent: ...");
    a variant's override keys show none (absent, they are the section's)."""

    from lengen.config.keys import rows

    table = {path: (required, default, text) for path, _, required, default, text in rows()}
    for section in ("sparse_parity", "parity_scratchpad", "natural_language.short"):
        train = f"{section}.train"
        assert table[f"{train}.grad_clip"][1] == "1.0"
        assert table[f"{train}.betas"][1] == "[0.9, 0.999]"
        assert table[f"{train}.checkpoint_every"][1] == "1000"
        assert table[f"{train}.log_every"][1] == "50"
        assert table[f"{train}.steps"][:2] == ("yes", "")  # required: no default
        assert table[f"{train}.early_stop.n_examples"][1] == "512"
    assert table["runtime.fuse_runs"][1] == "1" and table["runtime.compile"][1] == "none"
    assert table["sparse_parity.pose_skip"][1] == "paper"
    assert table["sparse_parity.model.init_std"][1] == "0.02"
    assert table["parity_scratchpad.variants.<name>.train.grad_clip"][1] == ""  # the section's
    assert [p for p, (_, d, t) in table.items() if d and "absent" in t] == []


def test_every_config_key_has_a_description():
    """Every key of the schema says what it sets (issue 46: config/README.md describes every
    key); the description is its field's doc (lengen.core.settings)."""
    from lengen.config.keys import rows

    assert [path for path, _, _, _, text in rows() if not text] == []


def test_the_schema_and_the_spec_dataclasses_name_the_same_keys():
    """One truth per setting (issue 46): the keys a config may set under train, train.early_stop,
    model and runtime are the fields of the dataclasses the jobs build from them, less the ones
    a task or another section fills in (named here)."""
    from dataclasses import fields

    from lengen.config.config import schema
    from lengen.core.specs import EarlyStopSpec, RuntimeSpec, TrainSpec
    from lengen.model.model import ModelConfig

    whole = schema()
    defs = whole["$defs"]

    def names(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    train = defs["train_keys"]["properties"]  # made from the dataclasses: equal by construction
    assert set(train) == names(TrainSpec)
    assert set(train["early_stop"]["properties"]) == names(EarlyStopSpec)
    from_task = {"vocab_size", "position", "l_max", "predict_positions"}  # the task's, the scheme's
    fixed = {"layer_norm_eps"}  # GPT-NeoX's 1e-5, no key
    assert set(defs["model_keys"]["properties"]) == names(ModelConfig) - from_task - fixed
    runtime = set(whole["properties"]["runtime"]["properties"])
    plan_only = {"fuse_runs"}  # groups jobs, changes no job's spec
    from_nl = {"loss_chunk_tokens"}  # natural_language.loss_chunk_tokens
    assert runtime - plan_only == names(RuntimeSpec) - from_nl


@dataclasses.dataclass(frozen=True)
class _Inner:  # a settings class of the test below (module level: its hints are resolved here)
    every: int = setting(doc="how often", minimum=1)


@dataclasses.dataclass(frozen=True)
class _Toy:
    rate: float = setting(doc="a rate", exclusiveMinimum=0, maximum=1)
    pair: tuple[float, float] = setting((0.5, 0.5), doc="two", items={"maximum": 1})
    edges: tuple[int, ...] = setting((), doc="edges", uniqueItems=True)
    cap: int | None = setting(None, doc="a cap", minimum=1)
    limit: int | None = setting(None, doc="absent or a number", null=False, minimum=1)
    mode: str = setting("a", doc="a mode", enum=["a", "b"])
    inner: _Inner | None = setting(None, doc="nested")
    filled_in: int = 0  # no doc: not a setting (a task fills it in)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Section(_Toy):
    """A section.

    More words, not its description."""

    SCHEMA = {"if": {"properties": {"mode": {"const": "b"}}}, "then": {"required": ["cap"]}}
    named: dict[str, _Inner] = setting(doc="name -> inner", minProperties=1)
    ref: dict = setting(doc="a shared part", **{"$ref": "#/$defs/posint"})


def test_a_setting_is_one_dataclass_field_typed_bounded_and_documented_once():
    """lengen.core.settings: a `setting` field's hint, bounds and doc are its schema node (a
    pair, a list, an optional value, a nested settings class as an object with its own required
    keys); fields without a default are required, unless the node is a section's overrides
    (`x-optional`); a config breaking a bound is refused naming the key; an unknown bound is a
    TypeError where the field is written."""
    from lengen.core.settings import object_schema

    made = object_schema(_Toy)
    p = made["properties"]
    assert made["required"] == ["rate"] and "filled_in" not in p
    assert made["additionalProperties"] is False
    assert p["rate"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1,
        "description": "a rate",
    }
    assert p["pair"]["items"] == {"type": "number", "maximum": 1} and p["pair"]["maxItems"] == 2
    assert p["edges"] == {
        "type": "array",
        "items": {"type": "integer"},
        "uniqueItems": True,
        "description": "edges",
    }
    assert p["cap"]["type"] == ["integer", "null"] and "type" not in p["mode"]
    assert p["limit"]["type"] == "integer"  # may be left out, never null; no default shown
    from lengen.core.settings import shows_default

    shown = {f.name: shows_default(f) for f in dataclasses.fields(_Toy)}
    assert shown["cap"] and not shown["limit"]
    assert p["inner"]["required"] == ["every"] and p["inner"]["description"] == "nested"
    assert made["x-defaults"] == [f"{_Toy.__module__}:_Toy"]
    with pytest.raises(TypeError, match="unknown bound"):
        setting(doc="x", minimun=1)
    # a task's section: its own keys first, then its base's; name -> settings class; a shared
    # part by reference alone; what no field says (SCHEMA); its doc's first paragraph
    made = object_schema(_Section)
    assert list(made["properties"])[:2] == ["named", "ref"] and "rate" in made["properties"]
    named = made["properties"]["named"]
    assert named["type"] == "object" and named["minProperties"] == 1
    assert named["additionalProperties"]["required"] == ["every"]
    assert made["properties"]["ref"] == {"$ref": "#/$defs/posint", "description": "a shared part"}
    assert made["then"] == {"required": ["cap"]} and made["description"] == "A section."
    import jsonschema

    check = jsonschema.Draft202012Validator({**made, "$defs": {"posint": {"minimum": 1}}})
    ok = {"rate": 0.5, "mode": "a", "named": {"x": {"every": 2}}, "ref": 3}
    assert not list(check.iter_errors(ok))
    for bad in ({"named": {}}, {"named": {"x": {"every": 0}}}, {"ref": 0}, {"mode": "b"}):
        assert list(check.iter_errors({**ok, **bad})), bad
    # the tiers' own sections, through the schema: a broken bound names the key
    cfg = load(ROOT / "config" / "smoke.yaml")
    cfg["sparse_parity"]["train"]["lr"] = 2.0
    with pytest.raises(ConfigError, match=r"sparse_parity\.train\.lr"):
        validate(cfg)
    cfg = load(ROOT / "config" / "smoke.yaml")
    cfg["sparse_parity"]["train"]["schedule"] = "exponential"
    with pytest.raises(ConfigError, match=r"sparse_parity\.train\.schedule"):
        validate(cfg)
    cfg = load(ROOT / "config" / "smoke.yaml")
    cfg["jobs"]["small"]["runtime"] = None  # an absent-only key written null
    with pytest.raises(ConfigError, match=r"jobs\.small\.runtime"):
        validate(cfg)


def test_a_tier_extends_its_base_and_states_only_what_differs(tmp_path):
    """`extends:` merges a tier over its base before validation (mappings key by key, lists and
    values replaced, `drop` removing base keys); the result has no `extends` key. A cycle, a
    missing base, a bad `extends` and a `drop` that names nothing are errors naming the file."""
    import yaml

    from lengen.config.config import read_tier

    (tmp_path / "base.yaml").write_text(
        yaml.safe_dump(
            {
                "tier": "b",
                "runtime": {"device": "cpu", "threads_per_job": 1},
                "train": {"steps": 10, "betas": [0.9, 0.95], "early_stop": {"every": 5}},
            }
        )
    )
    (tmp_path / "mid.yaml").write_text(
        yaml.safe_dump(
            {
                "extends": {"file": "base.yaml", "drop": ["train.early_stop"]},
                "tier": "m",
                "train": {"betas": [0.9, 0.999]},
            }
        )
    )
    (tmp_path / "top.yaml").write_text(
        yaml.safe_dump({"extends": "mid.yaml", "tier": "t", "runtime": {"threads_per_job": 4}})
    )
    assert read_tier(tmp_path / "top.yaml") == {
        "tier": "t",
        "runtime": {"device": "cpu", "threads_per_job": 4},
        "train": {"steps": 10, "betas": [0.9, 0.999]},
    }
    assert read_tier(tmp_path / "base.yaml")["train"]["early_stop"] == {"every": 5}
    bad = {
        "loop.yaml": ({"extends": "loop.yaml"}, "goes round in a circle"),
        "gone.yaml": ({"extends": "nowhere.yaml"}, "nowhere.yaml does not exist"),
        "odd.yaml": ({"extends": {"file": "base.yaml", "also": 1}}, "extends: a file name"),
        "typo.yaml": (
            {"extends": {"file": "base.yaml", "drop": ["train.early"]}},
            "'train.early' names no key of the base",
        ),
    }
    for name, (content, message) in bad.items():
        (tmp_path / name).write_text(yaml.safe_dump(content))
        with pytest.raises(ConfigError, match=message) as err:
            read_tier(tmp_path / name)
        assert name in str(err.value)


def test_the_gpu_tier_is_the_papers_synthetic_grid():
    """config/gpu.yaml extends config/paper.yaml: every synthetic section is the paper's exactly
    (145 models at 50,000 steps), the runs fused 8 to a job, the language models one-GPU sized."""
    from lengen.config.config import read_yaml

    gpu, paper = load(ROOT / "config" / "gpu.yaml"), load(ROOT / "config" / "paper.yaml")
    assert read_yaml(ROOT / "config" / "gpu.yaml")["extends"]["file"] == "paper.yaml"
    from lengen.config import plan

    for section in ("theory", *plan.experiments(paper)):  # every synthetic task
        assert gpu[section] == paper[section], section
    assert (gpu["tier"], gpu["runtime"]["fuse_runs"]) == ("gpu", 8)
    nl = gpu["natural_language"]
    assert "zero_stage" not in nl and (nl["gpus_per_job"], nl["model"]["n_layer"]) == (1, 12)


def test_the_memory_floor_counts_a_gpt_neox_layer_as_torch_does():
    """config.layer_params, the validation's lower bound of a model's size (no torch), is the
    parameter count of the model's layers as torch builds them."""
    from lengen.config.config import layer_params
    from lengen.model.model import GPTNeoX, ModelConfig

    for sizes in (
        {"n_layer": 2, "d_model": 16, "n_head": 2},
        {"n_layer": 1, "d_model": 24, "n_head": 4, "d_mlp": 40},
    ):
        model = GPTNeoX(ModelConfig(vocab_size=11, **sizes))
        assert layer_params(sizes) == sum(p.numel() for p in model.layers.parameters())


def test_a_training_jobs_disk_holds_its_groups_checkpoints(tmp_path):
    """Issue 63: a synthetic training job's peak disk is its group's two checkpoints (the newest
    and the one being written: lengen.train.lifecycle.Checkpoints), 12 bytes per parameter per
    run in bf16 without ZeRO (fp32 weights, AdamW's moments), 14 with it; a tier's stated
    jobs.train.disk_mb below it is an error naming both, and `lengen.config.cluster` names a
    disk_mb more than results_dir's free space."""
    from lengen.config import cluster
    from lengen.config.config import checkpoint_mb, layer_params

    gpu = load(ROOT / "config" / "gpu.yaml")
    params = layer_params(gpu["parity_scratchpad"]["model"])
    need = checkpoint_mb(gpu)
    assert need["parity_scratchpad"] == 2 * 8 * params * 12 / 2**20  # a group of 8, two copies
    assert need["sparse_parity"] == 2 * 5 * params * 12 / 2**20  # K_train 4-12 x 1 run: 5
    assert max(need.values()) <= gpu["jobs"]["train"]["disk_mb"]
    small = copy.deepcopy(gpu)
    small["jobs"]["train"]["disk_mb"] = 20000
    with pytest.raises(
        ConfigError,
        match=r"jobs.train.disk_mb: 20000 MB, but parity_scratchpad's"
        r" largest training job needs at least 27,677 MB",
    ):
        validate(small)
    lines = cluster.problems(gpu, [], "", free=10000)
    assert lines == [
        f"jobs.train.disk_mb is 29000 MB, but {gpu['results_dir']} has 10000 MB "
        "free: free space there or point results_dir at a larger disk (every job "
        "that runs at once needs its own)"
    ]
    assert cluster.problems(gpu, [], "", free=10**6) == []
    zero = copy.deepcopy(gpu)  # with ZeRO, DeepSpeed's bf16 section also saves a bf16 copy
    zero["runtime"]["zero_stage"] = 2
    assert checkpoint_mb(zero)["parity_scratchpad"] == 2 * 8 * params * 14 / 2**20
    assert cluster.free_mb(tmp_path / "not" / "yet") > 0  # its nearest existing parent's


@pytest.mark.parametrize("key", ["results_dir", "reports_dir"])
def test_no_run_writes_into_the_reference_the_code_or_the_repository(key, tmp_path, monkeypatch):
    """results_dir and reports_dir are resolved (`..`, a symlink, an absolute path) and refused,
    one line naming the key and the path, inside reference/, src/, config/, tests/ or .git
    (a `reports/../reference/smoke` once rewrote the committed smoke reference)."""
    smoke = load(ROOT / "config" / "smoke.yaml")
    monkeypatch.chdir(ROOT)
    link = tmp_path / "link"
    link.symlink_to(ROOT / "reference")
    for value, folder in (
        ("reports/../reference/smoke", "reference"),
        (str(ROOT / "reference" / "smoke"), "reference"),
        (str(link / "smoke"), "reference"),
        ("reference", "reference"),
        ("src/lengen/out", "src"),
        ("./config/x", "config"),
        ("tests/../tests/out", "tests"),
        (".git/objects/x", ".git"),
    ):
        cfg = copy.deepcopy(smoke)
        cfg[key] = value
        with pytest.raises(ConfigError) as err:
            validate(cfg)
        [line] = [x for x in str(err.value).splitlines() if x.strip().startswith(f"{key}:")]
        assert f"inside {ROOT / folder}" in line and "no run writes there" in line, line
    cfg = copy.deepcopy(smoke)
    cfg[key] = "results/../results/elsewhere" if key == "results_dir" else "reports/mine"
    validate(cfg)  # beside them, fine


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("sparse_parity.train.steps", 6.0, "6.0 is not of type 'integer'"),
        ("sparse_parity.train.steps", 10**12, "is greater than the maximum of 10000000"),
        ("sparse_parity.train.lr", 1e6, "is greater than the maximum of 1"),
        ("sparse_parity.train.batch_size", 10**9, "is greater than the maximum of 1048576"),
        ("sparse_parity.n", 10**9, "is greater than the maximum of 65534"),
        ("sparse_parity.variants.neox.runs", 10**6, "is greater than the maximum of 1000"),
        ("seed", 10**30, "is greater than the maximum of 4294966295"),
        ("seed", True, "True is not of type 'integer'"),
        ("variable_assignment.n_vars", 1, "1 is less than the minimum of 2"),
        ("theory.test_lengths", [9], "[9] below 2L = 16: the risks are stated for Lbar >= 2L"),
    ],
)
def test_a_value_that_cannot_be_meant_is_refused_naming_its_key_and_bound(key, value, says):
    """Integers where the schema means integers (not 6.0, not a bool), sizes bounded by a stated
    ceiling, lr in (0, 1], seeds within numpy's range, n_vars >= 2, theory's Lbar >= 2L."""
    cfg = load(ROOT / "config" / "config.yaml")
    *parents, last = key.split(".")
    node = cfg
    for part in parents:
        node = node[part]
    node[last] = value
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert any(
        line.strip().startswith(f"{key}:") and says in line for line in str(err.value).splitlines()
    ), str(err.value)
