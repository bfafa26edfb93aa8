"""What catches real rot in what a user reads: README's verdict block is the reference's
(tools/readme_verdicts.py); every path, link, module and config key the docs name exists; the
tier estimates are the benchmarks' own (tools/times.py); the theory table is the reference's; a
reference run's time sums its sittings (tools/reference_run.sh --time)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from .conftest import ROOT
from .helpers import load_script


def _tool():
    return load_script(ROOT / "tools" / "readme_verdicts.py")


def test_readme_verdicts_are_the_reference_judged_by_todays_rules():
    tool = _tool()
    readme = (ROOT / "README.md").read_text()
    assert tool.BEGIN in readme and tool.END in readme
    shown = tool.BEGIN + readme.split(tool.BEGIN, 1)[1].split(tool.END, 1)[0] + tool.END
    assert shown == tool.block(), (
        "README's verdicts are stale: python tools/readme_verdicts.py --write"
    )
    # the block is replaceable in place, and the replacement is idempotent
    assert tool.replaced(readme, shown) == readme
    # the first screen says how many sentences each column decides: the block's first line
    first = readme.split(tool.TALLY_BEGIN, 1)[1].split(tool.TALLY_END, 1)[0]
    assert tool.TALLY_BEGIN + first + tool.TALLY_END == tool.tally()
    assert readme.index(tool.TALLY_BEGIN) < readme.index("## Quick start")


def _times():
    return load_script(ROOT / "tools" / "times.py")


def _documents() -> list[Path]:
    """README and docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _pages() -> list[Path]:
    """What a user reads: README and docs/ and config/README.md."""
    return [*_documents(), ROOT / "config" / "README.md"]


def test_the_estimates_are_the_benchmarks_own():
    """An estimate without a step-time override (step_times, fused) is exactly what
    benchmarks/step_time.py wrote into its JSON (one scheduler, benchmarks/schedule.py, for
    both)."""
    import json

    tool = _times()
    for key, entry in tool.load().items():
        if "estimate" in entry and not entry.keys() & {
            "step_times",
            "fused",
            "config",
            "experiment",
        }:  # one branch: not all
            bench = json.loads((ROOT / entry["estimate"]).read_text())
            same = bench["estimate"]["node_gpus"] == entry["node_gpus"]
            if same or entry["field"] == "one_device_h":
                assert abs(tool.hours(entry) - bench["estimate"][entry["field"]]) < 1e-9, key


def test_the_default_tier_time_is_its_config_at_the_measured_shared_rate(tmp_path):
    """issue 44 item 7 / issue 64 item 6: the default tier's stated time counts the jobs
    config/config.yaml trains now (variable assignment at depths 2 and 5, Fig. 3a), each at its
    single-job step time, scheduled two at a time, times the slowdown its reference run measured
    with two jobs side by side (step_rates.txt's last line), and stays within an overnight run's
    12 h on the host the references are made on (a slower host's entry says what it would take
    there). A step_rates file without that line is an error."""
    import json
    import shutil
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from schedule import training_hours

    tool = _times()
    entry = tool.load()["default_tier"]
    bench = json.loads((ROOT / entry["estimate"]).read_text())
    jobs = tool.tier_jobs(entry, bench)
    from lengen.config import plan
    from lengen.config.config import load

    cfg = load(ROOT / entry["config"])
    va = cfg["variable_assignment"]
    assert sorted(k for k in jobs if k.startswith("variable_assignment")) == sorted(
        f"variable_assignment/{v}/d{d}"
        for v in plan.variants(cfg, "variable_assignment")
        for d in va["depths"]
    )
    runs = sum(
        len(plan.runs(cfg, e, v)) for e in plan.experiments(cfg) for v in plan.variants(cfg, e)
    )
    assert sum(j["jobs"] for j in jobs.values()) == runs + 2  # every run, and h_short, h_long
    step = {k["kind"]: k["s_per_step"] for k in bench["kinds"]}
    alone = training_hours(jobs, step, 2)["node_h"]
    assert tool.slowdown(entry) == 0.88
    assert abs(tool.hours(entry) - 0.88 * alone) < 1e-9
    # the bound, on the host the references are made on, every run to its step ceiling (an
    # upper bound: early stopping ends sparse parity's runs sooner); evaluation and start-up
    # are what tools/budget_plan.py's factor adds to the early-stopped steps (~11.3 h in all)
    assert tool.hours(entry) <= 12 - 0.5
    shutil.copytree(ROOT / "benchmarks" / "measured", tmp_path / "benchmarks" / "measured")
    (tmp_path / entry["slowdown_from"]).write_text("job steps s/step estimate ratio\n")
    with pytest.raises(ValueError, match="step_rates.py's last line"):
        tool.slowdown(entry, tmp_path)
    assert tool.slowdown({}) == 1.0


def test_the_gpu_tier_time_follows_its_config(tmp_path):
    """The gpu tier's stated time counts the runs and steps config/gpu.yaml says now (every
    synthetic run at the paper's 50,000 steps, and the 2 language models), each at its measured
    step: ten more PPC parity runs add exactly 4 jumps x 10 runs x their measured steps."""
    import json
    import shutil

    import yaml

    tool = _times()
    entry = tool.load()["gpu_tier_one"]
    bench = json.loads((ROOT / entry["estimate"]).read_text())
    jobs = tool.tier_jobs(entry, bench)
    from lengen.config import plan
    from lengen.config.config import load

    cfg = load(ROOT / entry["config"])
    runs = sum(
        len(plan.runs(cfg, e, v)) for e in plan.experiments(cfg) for v in plan.variants(cfg, e)
    )
    assert sum(j["jobs"] for j in jobs.values()) == runs + 2  # every run, and h_short, h_long
    assert {j["steps"] for k, j in jobs.items() if not k.startswith("natural")} == {50_000}
    shutil.copytree(ROOT / "benchmarks" / "measured", tmp_path / "benchmarks" / "measured")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    gpu = yaml.safe_load((tmp_path / "config" / "gpu.yaml").read_text())
    gpu["parity_scratchpad"] = {"variants": {"ppc": {"runs": 20}}}  # over paper.yaml's (extends)
    (tmp_path / "config" / "gpu.yaml").write_text(yaml.safe_dump(gpu))
    paper = json.loads((ROOT / entry["step_times"]["file"]).read_text())
    step = {k["kind"]: k["s_per_step"] for k in paper["kinds"]}
    added = sum(step[f"parity_scratchpad/ppc/k{j}"] for j in (1, 2, 3, 4)) * 10 * 50_000 / 3600
    assert abs(tool.hours(entry, tmp_path) - tool.hours(entry) - added) < 1e-9


def test_the_fused_gpu_tier_time_is_calibrated_on_the_group_that_trained():
    """gpu_tier_fused_one's run-steps: the fused group that trained (GPU_PS_ppc_fused, 4 runs of
    each PPC jump) costs exactly its measured seconds per step; a kind's run-step scales with its
    tokens; the language models keep their own step; fused is cheaper than one by one."""
    tool = _times()
    entry = tool.load()["gpu_tier_fused_one"]
    fused = entry["fused"]
    step = tool.fused_steps(fused)
    trainer = fused["trainer"]
    group = trainer["runs_per_kind"] * sum(step[k] for k in trainer["kinds"])
    assert abs(group - trainer["seconds"] / trainer["steps"]) < 1e-12
    assert not any(k.startswith("natural_language") for k in step)
    assert step["parity_scratchpad/ppc/k1"] > step["parity_scratchpad/ppc/k4"]  # longer sequences
    assert tool.hours(entry) < tool.hours(tool.load()["gpu_tier_one"])


def test_the_gpu_tier_time_comes_from_the_trainers_fused_step():
    """Issue 63, item 6: gpu_tier_trainer_one's fused runs step at the trainer's measured fused
    step per real token (benchmarks/group_step.py's row) x their kind's tokens per step; the
    language models keep their measured step; a node of 8 is faster than one GPU, and both are
    below the tier trained one run per job."""
    import json

    from lengen.config import plan
    from lengen.config.config import load

    tool = _times()
    entries = tool.load()
    entry = entries["gpu_tier_trainer_one"]
    fused = entry["trainer_fused"]
    cfg = load(ROOT / entry["config"])
    step = tool.trainer_steps(fused, cfg)
    rows = json.loads((ROOT / fused["file"]).read_text())["rows"]
    ppc = next(r for r in rows if (r["group"], r["runs"]) == ("parity_scratchpad/ppc", 8))
    kinds = json.loads((ROOT / fused["tokens_from"]).read_text())["kinds"]
    k1 = next(k for k in kinds if k["kind"] == "parity_scratchpad/ppc/k1")
    want = ppc["ms_per_step"] / 1e3 / ppc["real_tokens_per_step"] * 64 * k1["seq_len"]
    assert abs(step["parity_scratchpad/ppc/k1"] - want) < 1e-12
    assert not any(k.startswith("natural_language") for k in step)
    assert {k.split("/")[0] for k in step} == set(plan.experiments(cfg))  # the synthetic ones
    one, node = tool.hours(entry), tool.hours(entries["gpu_tier_trainer_node"])
    assert node < one < tool.hours(entries["gpu_tier_one"])


def test_the_gpu_grid_table_is_the_probe_rows():
    """The lease's README table of the 1,500-step PPC grid (probe GPU_PS_ppc_fused_1500):
    how many runs of each jump learned 2l <= 40 (>= 0.9 at 20 and 40) and jump 1's range at
    2l = 60-150, from probes/scratchpad_probes.csv."""

    import pandas as pd

    rows = pd.read_csv(ROOT / "probes" / "scratchpad_probes.csv")
    grid = rows[rows["probe"].str.startswith("GPU_PS_ppc_fused_1500/")]
    assert len(grid) == 16 and (grid["steps_run"] == 1500).all()
    doc = (ROOT / "benchmarks" / "measured" / "2026-11-26-h200-lease2" / "README.md").read_text()
    for jump, runs in grid.groupby("value"):
        learned = int(((runs["acc_L20"] >= 0.9) & (runs["acc_L40"] >= 0.9)).sum())
        assert re.search(rf"\n  \| {int(jump)} \| {learned} of 4", doc), jump
    one = grid[grid["value"] == 1]
    cells = " | ".join(
        f"{one[f'acc_L{n}'].min():.2f}-{one[f'acc_L{n}'].max():.2f}" for n in (60, 80, 100, 150)
    )
    assert f"| 1 | 4 of 4 | {cells} |" in doc


def test_the_reference_run_sums_its_sittings(tmp_path):
    """tools/reference_run.sh --time: the from-scratch time of a reference run made in sittings
    is the sum of their wall times; a sitting stopped without its end line (a kill, a session's
    end) ends at the last time Snakemake logged; the jobs done count every sitting's."""
    import subprocess

    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (tmp_path / f"default-{head}.log").write_text(
        "=== start 2026-11-26T01:00:00Z\n[Thu Nov 26 01:10:00 2026]\n2 of 12 steps (17%) done\n"
        "=== end rc=0 2026-11-26T02:30:00Z\n"
        "=== start 2026-11-27T01:00:00Z\n[Fri Nov 27 01:05:00 2026]\n3 of 9 steps (33%) done\n"
        "[Fri Nov 27 01:45:00 2026]\n"
    )
    done = subprocess.run(
        ["bash", str(ROOT / "tools" / "reference_run.sh"), "--time", head],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "RUNS_DIR": str(tmp_path),
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        },
    )  # this python (yaml) first
    assert done.returncode == 0, done.stderr
    assert "1.50 h (ended)" in done.stdout and "0.75 h (interrupted)" in done.stdout
    # each sitting counts the jobs it had left: 12 planned, 9 left for the second, 3 of them done
    assert "2 sittings, 2.25 h; jobs done: 6/12" in done.stdout


def test_the_fault_drill_table_names_tests_that_exist():
    """docs/testing.md's table of fault drills names each drill's test as file::name; every one
    is a test function of that file."""
    text = (ROOT / "docs" / "testing.md").read_text()
    section = text.split("## Fault drills and their tests", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`(tests/test_\w+\.py)::(test_\w+)`", section)
    assert len(named) >= 16
    for path, name in named:
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), f"{path}::{name}"


# outputs the docs describe before their first run has written them, each with its writer
NOT_YET_WRITTEN: dict[str, str] = {}


def test_every_repository_path_the_docs_name_exists():
    """A file of the repository named in README, config/README.md or docs/ (a backticked path under
    src/, tests/, tools/, workflow/, config/, benchmarks/, probes/ or docs/) exists: a move or a
    rename updates the docs (issue 48: docs/pipeline.md named four files that no longer existed)."""
    tops = (
        "src/",
        "tests/",
        "tools/",
        "workflow/",
        "config/",
        "benchmarks/",
        "probes/",
        "docs/",
        "reference/",
    )
    named = 0
    for page in _pages():
        text = page.read_text()
        for path in re.findall(r"`([\w./-]+?)(?:::\w+)?`", text):
            if path.startswith(tops) and "*" not in path and path not in NOT_YET_WRITTEN:
                named += 1
                assert (ROOT / path).exists(), f"{page.relative_to(ROOT)} names {path}"
        # a relative link or image ([text](path), ![alt](path)): a refresh that drops a figure
        # (ALLOW_REMOVAL) takes README's image of it along
        for path in re.findall(r"\]\((?!https?:|#|mailto:)([^)#\s]+)", text):
            named += 1
            target = (page.parent / path).resolve()
            assert target.exists(), f"{page.relative_to(ROOT)} links {path}"
    assert named > 50


def test_every_module_and_function_the_docs_name_imports():
    """A backticked `lengen.a.b` (or `lengen.a.b()`) in README, config/README.md or docs/ is a
    module, or an attribute of one, that exists today."""
    import importlib
    import importlib.util

    def resolves(name: str) -> bool:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                spec = importlib.util.find_spec(".".join(parts[:i]))
            except ModuleNotFoundError:  # a parent is a module, not a package
                spec = None
            if spec is None:
                continue
            obj = importlib.import_module(".".join(parts[:i]))
            for attribute in parts[i:]:
                if not hasattr(obj, attribute):
                    return False
                obj = getattr(obj, attribute)
            return True
        return False

    dotted = re.compile(r"`(lengen(?:\.\w+)+)(?:\(\))?`")
    named = [
        (page.relative_to(ROOT), name)
        for page in _pages()
        for name in dotted.findall(page.read_text())
    ]
    assert len(named) > 30
    missing = [f"{page} names {name}" for page, name in named if not resolves(name)]
    assert not missing, missing


def test_the_mutation_score_in_the_docs_is_the_committed_table():
    """docs/testing.md's score (per module, per shard) is the rendering of
    reference/mutation_score.csv and reference/mutation_shards.csv (`python tools/mutation.py
    --write-docs`); before a whole score is committed the page shows none."""
    import pandas as pd

    tool = load_script(ROOT / "tools" / "mutation.py")
    doc = (ROOT / "docs" / "testing.md").read_text()
    block = tool.DOC_BLOCK.search(doc)
    if not tool.SHARD_TIMES.exists():
        assert block is None, "docs/testing.md shows a score that reference/ does not hold"
        return
    body = tool.docs_block(
        pd.read_csv(tool.OUT), pd.read_csv(tool.SHARD_TIMES, keep_default_na=False)
    )
    assert block is not None, "docs/testing.md has no mutation:score block"
    assert body in block[0], "stale: run `python tools/mutation.py --write-docs`"


def test_the_padding_the_docs_state_is_the_counted_one():
    """The padding numbers beside their count (benchmarks/measured/2026-11-28-cpu/README.md)
    are benchmarks/padding.py's committed count of the
    gpu tier's groups, and its explanation holds: the order statistic of R per-batch lengths
    (the expected longest of R uniform draws over the mean) is within 0.02 of each PPC parity
    count, planned and by jump."""
    import json

    import numpy as np

    rows = json.loads(
        (ROOT / "benchmarks" / "measured" / "2026-11-28-cpu" / "padding_gpu_tier.json").read_text()
    )["rows"]
    at = {(r["experiment"], r["variant"], r["grouping"]): r for r in rows}
    doc = " ".join(
        (ROOT / "benchmarks" / "measured" / "2026-11-28-cpu" / "README.md").read_text().split()
    )
    ppc = [at["parity_scratchpad", "ppc", g]["fed_over_own"] for g in ("planned", "by_setting")]
    ablation = [
        at["parity_scratchpad", "absolute", g]["fed_over_own"] for g in ("planned", "by_setting")
    ]
    va = [at["variable_assignment", "ppc", g]["fed_over_own"] for g in ("planned", "by_setting")]
    assert f"Fig. 2's PPC parity: {ppc[0]:.3f} as planned (R = 8, jumps mixed), {ppc[1]:.3f}" in doc
    assert f"Fig. 8's ablations {ablation[0]:.3f} and {ablation[1]:.3f}" in doc
    assert f"variable assignment's PPC {va[0]:.3f} and {va[1]:.3f}" in doc
    assert at["sparse_parity", "neox", "planned"]["padding_share"] == 0  # "feeds no padding"
    lengths = np.arange(10, 41, 2)  # parity's training 2l (config/gpu.yaml)
    cdf = np.arange(1, len(lengths) + 1) / len(lengths)

    def longest_over_mean(runs: int) -> float:
        return float((np.diff(cdf**runs, prepend=0) * lengths).sum() / lengths.mean())

    for runs, count in ((8, ppc[0]), (5, ppc[1])):
        assert abs(longest_over_mean(runs) - count) < 0.02
        assert f"{longest_over_mean(runs):.3f} at R = {runs}" in doc


def test_the_host_batch_times_the_docs_state_are_the_timed_ones():
    """The host batch times in their folder's README are benchmarks/host_batches.py's
    committed JSON."""
    import json

    rows = json.loads(
        (
            ROOT / "benchmarks" / "measured" / "2026-11-28-cpu" / "host_batches_gpu_tier.json"
        ).read_text()
    )["rows"]
    ms = {(r["experiment"], r["variant"]): r["ms_per_batch"] for r in rows}
    va = [v for (e, _), v in ms.items() if e == "variable_assignment"]
    doc = " ".join(
        (ROOT / "benchmarks" / "measured" / "2026-11-28-cpu" / "README.md").read_text().split()
    )
    assert (
        f"{ms['sparse_parity', 'neox']:.1f} ms for sparse parity's group, "
        f"{ms['parity_scratchpad', 'ppc']:.1f} ms for PPC parity's, {min(va):.1f}-"
        f"{max(va):.1f} ms for variable assignment's"
    ) in doc


def test_the_operator_counts_the_docs_state_are_the_counted_ones():
    """The operators per fused step in their folder's README are benchmarks/launches.py's committed
    count of the gpu tier's groups."""
    import json

    def counted(name: str) -> tuple[list[dict], list[dict]]:
        """The JSON's groups, and each group's rows by R."""
        groups = json.loads(
            (ROOT / "benchmarks" / "measured" / "2026-11-28-cpu" / name).read_text()
        )["groups"]
        return groups, [{r["runs"]: r for r in g["rows"]} for g in groups]

    groups, (ppc, sp) = counted("launches_gpu_tier.json")
    fit = groups[0]["per_added_run"]
    doc = " ".join(
        (ROOT / "benchmarks" / "measured" / "2026-11-28-cpu" / "README.md").read_text().split()
    )
    assert (
        f"group dispatches {ppc[1]['total']:.0f} operators per step at R = 1, "
        f"{ppc[8]['total']:.0f} at R = 8 and {ppc[16]['total']:.0f} at R = 16: "
        f"{fit['total']:.0f} more per added run (its own loss, {fit['loss']:.0f}, and their "
        f"backward, {fit['backward']:.0f}); sparse parity's group, its whole variant, "
        f"{sp[max(sp)]['total']:.0f}"
    ) in doc
    assert f"clipping dispatches {ppc[8]['ops_per_step']['clip']:.0f} a step" in doc
    top = {(t["phase"], t["op"]): t["per_step"] for t in ppc[16]["top"]}
    assert f"backward {top['backward', 'copy_']:.0f} `copy_`" in doc
    assert f"autocast {top['forward', '_to_copy']:.0f} weight casts" in doc
    assert all(set(r["syncs_per_step"]) == {"other"} for r in ppc.values())  # the mask's read
    after, (ppc_after, sp_after) = counted("launches_gpu_tier_after.json")
    assert (
        f"{ppc_after[8]['total']:.0f} operators per step at R = 8 and "
        f"{ppc_after[16]['total']:.0f} at R = 16 "
        f"({after[0]['per_added_run']['total']:.0f} more per added run), sparse parity's "
        f"group {sp_after[max(sp_after)]['total']:.0f}"
    ) in doc
    assert ppc_after[8]["ops_per_step"]["clip"] < ppc[8]["ops_per_step"]["clip"] / 10


def test_the_h100_numbers_the_docs_state_are_the_measured_ones():
    """The trainer's fused step on an H100 (benchmarks/group_step.py's JSON), as
    its folder's README states it."""
    import json

    measured = ROOT / "benchmarks" / "measured" / "2026-11-27-h100"
    rows = json.loads((measured / "group_step_eager.json").read_text())["rows"]
    by = {(r["group"], r["runs"]): r for r in rows}
    r8, r16 = by["parity_scratchpad/ppc", 8], by["parity_scratchpad/ppc", 16]
    sp = by["sparse_parity/neox", 5]
    perf = " ".join((measured / "README.md").read_text().split())
    assert (
        f"R = 8 took {r8['ms_per_step']:.0f} ms per step ({r8['ms_per_run_step']:.1f} ms per "
        f"run-step, {r8['mfu_peak']:.1%} of the 989 TFLOP/s"
    ) in perf
    assert f"{r8['padding_share']:.0%} of the tokens fed padding" in perf
    assert (
        f"at R = 16 {r16['ms_per_step']:.0f} ms ({r16['ms_per_run_step']:.1f} ms, "
        f"{r16['mfu_peak']:.1%})" in perf
    )
    assert (
        f"runs {sp['ms_per_step']:.0f} ms ({sp['mfu_peak']:.1%}, the GPU busy only "
        f"{sp['profile']['busy_share']:.0%}" in perf
    )
    profile = r8["profile"]
    assert (
        f"GPU was busy {1e3 * profile['device_busy_s']:.0f} ms of the step: copies and casts "
        f"{1e3 * profile['groups_s']['copy/cast']:.0f} ms"
    ) in perf


def test_the_readme_states_model_sizes_runs_and_steps_as_the_configs_set_them():
    """README's facts of the code, read from the configs, not typed copies: the default tier's
    model sizes (every task's model and the language models'), its most runs per compared arm
    (seeds of one variant at one setting: the config's in the tier table, the committed
    reference's in what it found), and the gpu-smoke tier's steps."""
    from collections import Counter

    from lengen.config import plan
    from lengen.config.config import load

    text = (ROOT / "README.md").read_text()
    cfg = load(ROOT / "config" / "config.yaml")
    models = [cfg[e]["model"] for e in [*plan.experiments(cfg), "natural_language"] if e in cfg]

    def span(values):
        low, high = min(values), max(values)
        return f"{low}" if low == high else f"{low}-{high}"

    layers, widths = span([m["n_layer"] for m in models]), span([m["d_model"] for m in models])
    assert f"Models are {layers} layers x {widths} wide" in text
    arms = Counter(
        (r.experiment, r.variant, r.folder(cfg).rsplit("/", 2)[-2])
        for e in plan.experiments(cfg)
        for v in plan.variants(cfg, e)
        for r in plan.runs(cfg, e, v)
    )
    most = max(arms.values())
    assert f"| at most {most} runs per compared arm" in text  # the tier's row: its config
    # what it found: the committed reference's runs (made with the config of its commit)
    import pandas as pd

    runs = [
        pd.read_csv(p)
        .groupby(
            [
                c
                for c in ("variant", "k_train", "jump", "depth", "train_max_len")
                if c in pd.read_csv(p, nrows=0)
            ]
        )
        .seed.nunique()
        .max()
        for p in (ROOT / "reference" / "default").glob("*_accuracy.csv")
    ]
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 10: "ten"}
    assert f"at most {words[max(runs)]} runs per compared arm" in " ".join(text.split())
    smoke = load(ROOT / "config" / "gpu-smoke.yaml")
    steps = {smoke[e]["train"]["steps"] for e in plan.experiments(smoke)}
    assert len(steps) == 1 and f"the gpu tier's DAG at {steps.pop()} steps" in text


def test_the_tokenizer_the_docs_name_for_the_paper_is_the_paper_tiers():
    """The schema's (and so config/README.md's) word on App. F's tokenizer is the one
    config/paper.yaml fetches, not a typed copy that drifted (it once said Mistral's)."""
    import re

    from lengen.config.config import load, schema

    said = schema()["properties"]["natural_language"]["properties"]["tokenizer"]["description"]
    named = re.search(r"App\. F: ([\w.-]+)'s", said)[1]
    paper = load(ROOT / "config" / "paper.yaml")["natural_language"]["tokenizer"]["name"]
    assert named.lower() in paper.lower(), (named, paper)
    assert named in (ROOT / "config" / "README.md").read_text()
