"""The tools' bookkeeping: the mutation score (the mutation run itself takes ~30 min: tools/) and
the step rates a run's logs measured, a reference run's time."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from .conftest import ROOT
from .helpers import load_script

mutation = load_script(ROOT / "tools" / "mutation.py")
step_rates = load_script(ROOT / "tools" / "step_rates.py")


def test_module_of_mutant_names():
    assert mutation.module_of("lengen.report.report.x_verdict__mutmut_12") == "lengen.report.report"
    name = "lengen.tasks.natural_language.x_windows__mutmut_1"
    assert mutation.module_of(name) == "lengen.tasks.natural_language"
    name = "lengen.core.batch.xǁExampleǁmodel_inputs__mutmut_3"
    assert mutation.module_of(name) == "lengen.core.batch"
    assert mutation.in_modules(name, []) and mutation.in_modules(name, ["lengen.core"])
    assert mutation.in_modules(name, ["lengen.tasks", "lengen.core.batch"])
    assert not mutation.in_modules(name, ["lengen.core.bat", "lengen.tasks"])
    assert mutation.in_modules("lengen.tasks.x_get__mutmut_2", ["lengen.tasks"])


def test_score_counts_every_mutant_not_killed_except_listed_equivalents():
    results = {
        "lengen.a.x_f__mutmut_1": "killed",
        "lengen.a.x_f__mutmut_2": "survived",
        "lengen.a.x_f__mutmut_3": "survived",
        "lengen.a.x_g__mutmut_1": "no tests",
        "lengen.b.x_h__mutmut_1": "killed",
        "lengen.b.x_h__mutmut_2": "timeout",
    }
    table = mutation.score_table(results, {"lengen.a.x_f__mutmut_3": "same behaviour"})
    rows = table.set_index("module")
    assert rows.loc[
        "lengen.a", ["mutants", "killed", "survived", "no_tests", "equivalent"]
    ].tolist() == [4, 1, 1, 1, 1]
    assert rows.loc["lengen.a", "score"] == 1 / 3  # killed / (mutants - equivalents)
    assert rows.loc["lengen.b", "score"] == 1 / 2 and rows.loc["lengen.b", "other"] == "timeout 1"
    assert rows.loc["core (all)", "score"] == 2 / 5


def test_equivalence_rules_match_name_and_mutated_line(monkeypatch):
    """A rule matches by name pattern and a regular expression on the added lines, the removed
    lines (an argument dropped from a call over several lines adds none), or both."""
    lines = {
        "lengen.a.x_f__mutmut_1": ("+ device = None", "- device = 'cpu'"),
        "lengen.a.x_f__mutmut_2": ("+ x = 2", "- x = 1"),
        "lengen.b.x_g__mutmut_1": ("+ device = None", "- device = 'cpu'"),
        "lengen.a.x_f__mutmut_4": ("", "-         batch=250,"),
        "lengen.a.x_f__mutmut_5": ("", "-         n=2000,"),
    }
    diff = {name: {"added": a, "removed": r} for name, (a, r) in lines.items()}
    monkeypatch.setattr(mutation, "mutated_lines", lambda name: diff[name])
    results = {
        **dict.fromkeys(lines, "survived"),
        "lengen.a.x_f__mutmut_3": "killed",
        "lengen.a.x_f__mutmut_6": "not checked",
    }  # mutmut_6 is never shown: not a survivor
    rules = [
        {"name": "lengen.a.*", "added": "device = None", "reason": "cpu"},
        {"name": "lengen.a.*", "added": "^$", "removed": "batch=", "reason": "memory"},
        {"name": "lengen.b.*", "removed": "'gpu'", "reason": "never"},
    ]
    assert mutation.equivalents(results, rules) == {
        "lengen.a.x_f__mutmut_1": "cpu",
        "lengen.a.x_f__mutmut_4": "memory",
    }


def test_step_rates_sum_a_jobs_sittings_and_name_its_kind(tmp_path):
    """A resumed job's log holds two sittings (the bar's clock restarts); each counts its own steps
    over its own seconds; the kind is the estimate's longest match (rope_pose's underscore too)."""
    bar = "rope_pose/k1/seed2: {p}%|##| {n}/24000 [{t}<09:14, 10.8it/s, loss=0.1]"
    first = [bar.format(p=0, n=0, t="00:00"), bar.format(p=4, n=1000, t="01:40")]
    second = [bar.format(p=4, n=1000, t="00:02"), bar.format(p=12, n=3000, t="1:00:02")]
    log = tmp_path / "parity_scratchpad" / "train_rope_pose_k1_seed2.log"
    log.parent.mkdir()
    log.write_text("\r".join(first) + "\nresuming from step 1000\n" + "\r".join(second) + "\n")
    assert step_rates.sittings(log.read_text()) == [(1000, 100), (2000, 3600)]
    kinds = ["parity_scratchpad/rope_pose/k1", "parity_scratchpad/ppc/k1", "sparse_parity/neox"]
    assert step_rates.kind_of(log, kinds) == "parity_scratchpad/rope_pose/k1"
    neox = tmp_path / "sparse_parity" / "train_neox_k8_seed0.log"
    assert step_rates.kind_of(neox, kinds) == "sparse_parity/neox"
    estimate = {"kinds": [{"kind": k, "s_per_step": 0.5} for k in kinds]}
    (row,) = step_rates.rates(tmp_path, estimate)
    assert row["steps"] == 3000 and row["s_per_step"] == 3700 / 3000
    assert row["ratio"] == 3700 / 3000 / 0.5


def test_mutation_shards_resume_and_only_a_whole_core_is_a_score():
    """A shard not started is named by its patterns; a resumed one by its mutants still to check
    (mutmut retests every mutant it is named); a finished one runs nothing. The score is whole only
    when every shard has mutants and all are checked."""
    results = {
        "lengen.report.report.x_f__mutmut_1": "killed",
        "lengen.report.claims.base.x_g__mutmut_1": "not checked",
        "lengen.report.effects.x_h__mutmut_2": "check was interrupted by user",
        "lengen.tasks.majority.x_f__mutmut_1": "not checked",
        "lengen.core.batch.x_f__mutmut_1": "survived",
    }
    assert mutation.shard_selection("tasks", results) == ["lengen.tasks.*"]
    to_check = ["lengen.report.claims.base.x_g__mutmut_1", "lengen.report.effects.x_h__mutmut_2"]
    assert mutation.shard_selection("report", results) == to_check
    assert mutation.shard_selection("analysis", results) == []
    progress = mutation.shard_progress(results).set_index("shard")
    assert progress.loc["report"].tolist() == [3, 1] and progress.loc["analysis"].tolist() == [1, 1]
    assert not mutation.complete(results)
    done = dict.fromkeys(results, "killed")
    assert mutation.complete(done)
    assert not mutation.complete({n: st for n, st in done.items() if ".tasks." not in n})
    sittings = [
        {"shard": "report", "minutes": 50.0, "commit": "abc"},
        {"shard": "report", "minutes": 20.5, "commit": "abc"},
    ]
    times = mutation.shard_times(sittings, done).set_index("shard")
    assert times.loc["report", ["mutants", "minutes", "sittings"]].tolist() == [3, 70.5, 2]
    assert times.loc["tasks", "minutes"] == 0
    untimed = sittings + [{"shard": "report", "minutes": None, "checked": 40, "commit": "d"}]
    times = mutation.shard_times(untimed, done).set_index("shard")
    assert times.loc["report", ["minutes", "sittings", "untimed_checked"]].tolist() == [70.5, 3, 40]
    assert times.loc["report", "commits"] == "abc d" and times.loc["tasks", "untimed_checked"] == 0


def test_an_interrupted_mutation_sitting_stops_mutmut_and_is_still_logged(tmp_path, monkeypatch):
    """A shard's sitting killed by SIGTERM (a scheduler, `kill`) or Ctrl-C stops the whole mutmut
    process group and returns, so that its minutes are logged and the shard resumes; a failing
    mutmut is an error."""
    import os
    import signal
    import threading
    import time

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "mutmut"
    fake.write_text('#!/bin/sh\nsleep 30 & echo $! > "$PIDFILE"\nwait\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PIDFILE", str(tmp_path / "pid"))
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    start = time.time()
    assert mutation.run_mutmut(["lengen.tasks.*"], 1) is True
    assert time.time() - start < 20
    grandchild = int((tmp_path / "pid").read_text())
    time.sleep(0.2)
    stat = Path(f"/proc/{grandchild}/stat")  # the sleep mutmut started is gone too (or a zombie)
    assert not stat.exists() or stat.read_text().split(")")[1].split()[0] == "Z"
    assert signal.getsignal(signal.SIGTERM) is not None
    fake.write_text("#!/bin/sh\nexit 3\n")
    with pytest.raises(subprocess.CalledProcessError):
        mutation.run_mutmut([], 1)


def test_mutmut_reads_every_pragma_of_the_core():
    """The `# pragma: no mutate` comments of the mutated modules parse as mutmut reads them: a
    module-level `block` already covers the rest of its module, so a `start` after it stops
    mutmut before it generates one mutant (perplexity.py did so, found 2026-11-27). mutmut is a
    dev dependency: this never skips."""
    import glob
    import tomllib

    import libcst as cst
    import pytest
    from mutmut.mutation import pragma_handling as pragmas

    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]
    files = sorted({f for pattern in core for f in glob.glob(str(ROOT / pattern))})
    assert len(files) > 10, core
    for path in files:
        source = Path(path).read_text()
        try:
            pragmas.get_ignored_lines(path, source, cst.MetadataWrapper(cst.parse_module(source)))
        except pragmas.PragmaParseError as err:
            pytest.fail(f"mutmut cannot read {path}'s pragmas: {err}")


def test_every_equivalence_rule_names_a_function_of_todays_core():
    """tools/mutation_equivalent.yaml's `name` patterns follow the modules as they are: a rule
    whose module or function was moved or renamed would silently stop matching, and its mutants
    would count as missing tests (or, worse, a new function of that name would inherit it)."""
    import fnmatch
    import importlib.util
    import inspect

    import yaml

    mutation = load_script(ROOT / "tools" / "mutation.py")
    rules = yaml.safe_load((ROOT / "tools" / "mutation_equivalent.yaml").read_text())
    core = [p for patterns in mutation.SHARDS.values() for p in patterns]
    for rule in rules:
        pattern = rule.get("name")
        if pattern is None:
            continue
        if ".x_" not in pattern and ".xǁ" not in pattern:  # a whole package ("lengen.tasks.*")
            package = pattern.removesuffix(".*")
            assert importlib.util.find_spec(package) and f"{package}.*" in core, pattern
            continue
        if ".xǁ" in pattern:  # a method: mutmut names it xǁClassǁmethod
            module_name, _, rest = pattern.rstrip("*").partition(".xǁ")
            cls_name, _, method = rest.partition("ǁ")
            assert any(fnmatch.fnmatch(pattern, c) for c in core), f"{pattern}: in no shard"
            module = importlib.import_module(module_name)
            assert callable(getattr(getattr(module, cls_name, None), method, None)), pattern
            continue
        module_name, _, function = pattern.rstrip("*").partition(".x_")
        assert any(fnmatch.fnmatch(pattern, c) for c in core), f"{pattern}: in no shard"
        module = importlib.import_module(module_name)
        names = {n for n, _ in inspect.getmembers(module, inspect.isfunction)}
        assert function in names, f"{pattern}: {module_name} has no function {function}"


def test_a_resumed_mutation_run_tests_with_todays_tests(tmp_path):
    """mutmut copies a test file into mutants/ only once: sync_tests brings today's tests (new
    and changed files) into an existing mutants/, and does nothing before there is one."""
    mutation = load_script(ROOT / "tools" / "mutation.py")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("new")
    (tmp_path / "tests" / "test_b.py").write_text("added")
    assert not mutation.sync_tests(tmp_path) and not (tmp_path / "mutants").exists()
    (tmp_path / "mutants" / "tests").mkdir(parents=True)
    (tmp_path / "mutants" / "tests" / "test_a.py").write_text("old")
    assert mutation.sync_tests(tmp_path)
    assert (tmp_path / "mutants" / "tests" / "test_a.py").read_text() == "new"
    assert (tmp_path / "mutants" / "tests" / "test_b.py").read_text() == "added"


def test_the_docs_block_renders_the_score_and_the_shards(tmp_path, monkeypatch):
    results = {
        "lengen.a.x_f__mutmut_1": "killed",
        "lengen.a.x_f__mutmut_2": "survived",
        "lengen.b.x_g__mutmut_1": "killed",
    }
    score = mutation.score_table(results, {})
    shards = pd.DataFrame(
        [
            {
                "shard": "report",
                "mutants": 3,
                "minutes": 12.34,
                "sittings": 2,
                "untimed_checked": 0,
                "commits": "abc def",
            }
        ]
    )
    body = mutation.docs_block(score, shards)
    assert "| a | 2 | 1 | 1 | 0 | 0 | 0.50 |" in body and "| b | 1 | 1 | 0 | 0 | 0 | 1.00 |" in body
    assert "| **core (all)** | 3 | 2 | 1 | 0 | 0 | 0.67 |" in body
    assert "| report | 3 | 12.3 | 2 | 0 | abc def |" in body
    assert body.endswith("Lowest module: a at 0.50; the whole core at 0.67.")
    doc = tmp_path / "testing.md"
    doc.write_text(
        "before\n<!-- mutation:score begin (tools/mutation.py --write-docs) -->\nold\n"
        "<!-- mutation:score end -->\nafter\n"
    )
    score.to_csv(tmp_path / "score.csv", index=False)
    shards.to_csv(tmp_path / "shards.csv", index=False)
    monkeypatch.setattr(mutation, "OUT", tmp_path / "score.csv")
    monkeypatch.setattr(mutation, "SHARD_TIMES", tmp_path / "shards.csv")
    mutation.write_docs(doc)
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old" not in text
    assert mutation.docs_block(score, shards) in text
    doc.write_text("no block")
    with pytest.raises(SystemExit, match="no <!-- mutation:score begin"):
        mutation.write_docs(doc)


def test_a_sitting_is_logged_with_the_commit_it_started_at(tmp_path, monkeypatch):
    """A shard's sitting records its minutes, the mutants of that shard it checked, and the commit
    it started at (the code mutated, the tests copied), not the one HEAD has when it ends."""
    import json

    monkeypatch.setattr(mutation, "SITTINGS", tmp_path / "m" / "sittings.json")
    before = {
        "lengen.tasks.x_f__mutmut_1": "not checked",
        "lengen.tasks.x_f__mutmut_2": "killed",
        "lengen.report.report.x_g__mutmut_1": "not checked",
    }
    after = {
        **before,
        "lengen.tasks.x_f__mutmut_1": "survived",
        "lengen.report.report.x_g__mutmut_1": "killed",
    }
    mutation.log_sitting("tasks", before, after, 12.34, "abc1234")
    mutation.log_sitting("report", before, after, 1.0, "def5678")
    first, second = json.loads((tmp_path / "m" / "sittings.json").read_text())
    assert (first["shard"], first["minutes"], first["checked"], first["commit"]) == (
        "tasks",
        12.3,
        1,
        "abc1234",
    )
    assert (second["checked"], second["commit"]) == (1, "def5678")


def test_a_sittings_script_is_one_block_bash_reads_before_running():
    """tools/reference_run.sh runs for hours from the checkout one edits: its body is one `{ ...
    }` block ending the file, which bash parses whole before running any of it, so an edit of the
    file during a sitting cannot change the sitting (bash reads a plain script as it goes; an edit
    ended the c21ffa7 run's third sitting with rc 127)."""
    text = (ROOT / "tools" / "reference_run.sh").read_text()
    lines = text.splitlines()
    start = lines.index("set -euo pipefail") + 1
    assert lines[start].startswith("{ ") and lines[-1] == "}"
    assert lines[-2] == "exit $rc"  # nothing after the block is ever read
    body = [line for line in lines[:start] if line and not line.startswith("#")]
    assert body == ["set -euo pipefail"]  # only comments before it
    assert subprocess.run(["bash", "-n", str(ROOT / "tools" / "reference_run.sh")]).returncode == 0


def test_the_five_run_plan_is_the_committed_one_and_orders_what_fits():
    """tools/budget_plan.py: the committed plan is what the tool makes from today's committed
    step rates and the runs it was planned from (a changed rate rewrites it), which a reference's
    tables give in the same columns; its wall hours only grow
    down the table, the rows that fit 12 h come first, and an arm's job-hours are its runs x its
    minutes per run."""
    plan = load_script(ROOT / "tools" / "budget_plan.py")
    committed = ROOT / "benchmarks" / "measured" / "2026-12-06-cpu" / "budget_plan.md"
    assert committed.read_text() == plan.markdown(), "python tools/budget_plan.py --out " + str(
        committed.relative_to(ROOT)
    )
    runs = plan.reference_runs(ROOT / "reference" / "default")
    assert list(runs.columns) == list(pd.read_csv(ROOT / plan.RUNS).columns) and len(runs)
    table, factor = plan.plan()
    assert factor > 0 and table["wall h, cumulative"].is_monotonic_increasing
    fits = table["wall h, cumulative"] <= plan.BUDGET_H
    assert fits.iloc[0] and not (fits.astype(int).diff().fillna(0) > 0).any()  # one cut
    planned = table["runs (today -> planned)"].str.split(" -> ").str[1].astype(int)
    minutes = table["min per run"].astype(float)
    assert ((planned * minutes / 60 - table["job-h"].astype(float)).abs() <= 0.1).all()


def test_a_training_setting_is_named_in_few_files_from_the_yaml_to_the_optimizer():
    """tools/setting_route.py: `lr` and `steps` reach the optimizer naming at most 4 files, the
    tier YAML included, for every task's training job (the spec travels whole through the rule,
    the plan and the task's train_spec); the walk sees code, not docstrings or comments."""
    from lengen import tasks

    route = load_script(ROOT / "tools" / "setting_route.py")
    for task in tasks.REGISTRY:
        for setting in ("lr", "steps"):
            found = route.route(setting, task)
            assert len(found) <= 4, (task, setting, found)
            assert "src/lengen/core/specs.py" in found  # its one field: type, bound, doc
    source = (
        '"""lr in a docstring"""\n# lr\nx = spec.train.lr\nf(lr=1)\nd["lr"]\nlrs = 1\n'
        "lr = 2\n\n\nclass C:\n    lr: float = 1\n"
    )
    assert route.names(source, "lr") == [3, 4, 5, 11]  # not a local variable (line 7)
    assert route.names("rule a:\n    params: lr=config['lr']\n", "lr") == [2]  # a .smk


def test_regenerate_states_each_tiers_peak_disk_and_keeps_what_follows(tmp_path):
    """tools/regenerate.py rewrites the Tiers table's peak disk cells to the code's estimate (a
    new task in a tier grows it), keeping a measurement that follows and every other cell."""
    regenerate = load_script(ROOT / "tools" / "regenerate.py")
    rows = [
        "| smoke | `config/smoke.yaml` | any CPU | ~9.9 MB, 10.6 MB measured | fast | toy |",
        "| gpu | `config/gpu.yaml` | one GPU | ~1.0 GB | est. 35 h | the grid |",
        "| default | `config/config.yaml` | 2-core CPU | stale words | hours | small |",
    ]
    readme = tmp_path / "README.md"
    readme.write_text("# intro\n\n" + "\n".join(rows) + "\n\nafter\n")
    regenerate.rewrite_peak_disk(readme)
    got = readme.read_text().splitlines()
    smoke = regenerate.peak_disk(ROOT / "config" / "smoke.yaml")
    gpu = regenerate.peak_disk(ROOT / "config" / "gpu.yaml")
    default = regenerate.peak_disk(ROOT / "config" / "config.yaml")
    assert (
        got[2]
        == f"| smoke | `config/smoke.yaml` | any CPU | {smoke}, 10.6 MB measured | fast | toy |"
    )
    assert got[3] == f"| gpu | `config/gpu.yaml` | one GPU | {gpu} | est. 35 h | the grid |"
    assert "a training job beside the first" in gpu  # checkpoints of GBs: stated apart
    assert got[4].startswith(f"| default | `config/config.yaml` | 2-core CPU | {default}")
    assert (got[0], got[-1]) == ("# intro", "after")
    before = readme.read_text()
    regenerate.rewrite_peak_disk(readme)
    assert readme.read_text() == before  # a second run changes nothing


def test_a_reference_runs_time_counts_each_sittings_wall_and_its_jobs_cpu(tmp_path):
    """`reference_run.sh --time` sums the sittings (one ended, one stopped without an end line: its
    last Snakemake timestamp ends it) and credits a job's CPU time to the sitting that finished it:
    a job interrupted in the first sitting counts in the second only."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    bench = tmp_path / f"ref-{commit}" / "results" / "default" / "benchmarks"
    bench.mkdir(parents=True)
    for name, cpu in [("a.tsv", 3600.0), ("b.tsv", 1800.0)]:
        (bench / name).write_text(f"s\tcpu_time\n9999\t{cpu}\n")

    def job(jobid, name):
        return (
            f"rule train:\n    output: x\n    jobid: {jobid}\n"
            f"    benchmark: results/default/benchmarks/{name}\n    reason: Missing output files\n"
        )

    (tmp_path / f"default-{commit}.log").write_text(
        "=== start 2026-01-01T10:00:00Z\n"
        + job(1, "a.tsv")
        + job(2, "b.tsv")
        + "[Thu Jan  1 10:30:00 2026]\nFinished jobid: 1 (Rule: train)\n1 of 3 steps (33%) done\n"
        + "=== end rc=1 2026-01-01T11:00:00Z\n"
        + "=== start 2026-01-01T12:00:00Z\n"
        + job(7, "b.tsv")
        + "[Thu Jan  1 12:15:00 2026]\nFinished jobid: 7 (Rule: train)\n1 of 2 steps (50%) done\n"
        + "[Thu Jan  1 12:30:00 2026]\n"
    )
    out = subprocess.run(
        ["bash", str(ROOT / "tools" / "reference_run.sh"), "--time", commit],
        env={**os.environ, "RUNS_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == [
        "2026-01-01 10:00:00 -> 2026-01-01 11:00:00: 1.00 h (ended); "
        "1 jobs finished, their CPU 1.00 h, packing 2.00",
        "2026-01-01 12:00:00 -> 2026-01-01 12:30:00: 0.50 h (interrupted); "
        "1 jobs finished, their CPU 0.50 h, packing 2.00",
        "2 sittings, 1.50 h; jobs done: 2/3",
        "the finished jobs' CPU time: 1.50 h, at least 0.75 h on 2 cores",
    ]
    missing = subprocess.run(
        ["bash", str(ROOT / "tools" / "reference_run.sh"), "--time", commit],
        env={**os.environ, "RUNS_DIR": str(tmp_path / "elsewhere")},
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and f"default-{commit}.log: no such log" in missing.stderr
