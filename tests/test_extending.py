"""docs/extending.md, checked: a new generation task is its module and one registry line (2
files) plus its tier-YAML section (its figure is config: a `figures` key). The task here is a
copy of `majority` under a new name, added to a copy of the project through exactly those steps;
the workflow then plans its trainings, evaluations, table and figure, and `lengen sample` prints
it; then one command (tools/regenerate.py) leaves the whole default suite green, unedited. A new
figure of an existing kind is config alone. (A new position scheme that only changes IDs, one
file: tests/test_positions.py.)"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT
from .helpers import load_script
from .test_workflow import job_stats

NAME = "toy_majority"


def _copy_project(to: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for rel in files:
        src, dst = ROOT / rel, to / rel
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())


def _add_toy_task(root: Path, name: str = NAME) -> list[str]:
    """The documented steps, by hand as a user takes them: a copy of majority's module under
    `name`, its registry line and import, its section at the end of the smoke tier's YAML;
    returns the files they touched (tier YAMLs apart)."""
    src = root / "src" / "lengen"
    module = (src / "tasks" / "majority.py").read_text()  # 1. the task module
    module = module.replace('"majority"', f'"{name}"').replace("fig_majority", f"fig_{name}")
    (src / "tasks" / f"{name}.py").write_text(module)
    init = src / "tasks" / "__init__.py"  # 2. one registry line (and its import)
    head = "from lengen.tasks import ("
    lines = init.read_text().replace(head, f"from lengen.tasks import {name}\n{head}").split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith('    "majority": majority,'))
    lines.insert(at + 1, f'    "{name}": {name},')
    init.write_text("\n".join(lines))
    tier = root / "config" / "smoke.yaml"  # and its section in the tier YAML, with its figure,
    section = copy.deepcopy(yaml.safe_load(tier.read_text())["majority"])  # added at the end
    section["figures"] = {f"fig_{name}": {**section["figures"]["fig_majority"], "title": "Toy"}}
    text = tier.read_text().rstrip("\n") + "\n\n"
    tier.write_text(text + yaml.safe_dump({name: section}, sort_keys=False))
    return [f"src/lengen/tasks/{name}.py", "src/lengen/tasks/__init__.py"]


def test_a_new_generation_task_is_two_files_and_its_tier_section(tmp_path):
    """docs/extending.md's steps: the task module (its section's SectionConfig inside: the
    schema takes its keys from it) and one registry line; the workflow plans it, `lengen sample`
    prints it."""
    root = tmp_path / "project"
    _copy_project(root)
    touched = _add_toy_task(root)
    assert len(touched) == 2
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    fig = f"reports/smoke/fig_{NAME}.png"
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        fig,
        "-n",
        "--cores",
        "2",
        "--configfile",
        "config/smoke.yaml",
    ]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stats = job_stats(proc)  # its 3 models (one per variant), each evaluated, the figure
    models = len(yaml.safe_load((root / "config" / "smoke.yaml").read_text())[NAME]["variants"])
    assert stats["synthetic_train"] == stats["generation_eval"] == models
    assert stats["figure"] == 1
    assert f"results/smoke/{NAME}/" in proc.stdout
    sample = subprocess.run(
        [sys.executable, "-m", "lengen.cli", "sample", NAME, "--length", "5", "--n", "1"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    row = json.loads(sample.stdout.splitlines()[0])
    assert row["length"] == 5 and len(row["tokens"]) == 8


@pytest.mark.slow  # a checkout of the project, its regeneration and the whole default suite
def test_a_new_task_then_one_command_leaves_the_whole_suite_green(tmp_path):
    """docs/extending.md's whole path, short of the smoke reference's from-scratch run: the
    task added by its steps to a checkout of the project (its history too: the tests that judge
    a reference read the commit that made it), then `python tools/regenerate.py`; where before
    the command the smoke plan's test fails, after it the whole default suite passes, no test
    edited (about as long as the suite itself)."""
    root = tmp_path / "project"
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(root)], check=True)
    _copy_project(root)  # the working tree as it is, uncommitted changes included
    _add_toy_task(root, "vote")  # not NAME: the suite's own test adds that one
    for args in (["add", "-A"], ["commit", "-qm", "a toy task"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    golden = "tests/test_plan.py::test_a_dry_run_plans_the_golden_jobs"
    before = subprocess.run(
        [*pytest_cmd, golden], cwd=root, env=env, capture_output=True, text=True
    )
    assert before.returncode != 0 and "test_a_dry_run_plans_the_golden_jobs[smoke]" in (
        before.stdout
    ), before.stdout[-2000:]
    subprocess.run(
        [sys.executable, "tools/regenerate.py"], cwd=root, env=env, check=True, capture_output=True
    )
    after = subprocess.run(pytest_cmd, cwd=root, env=env, capture_output=True, text=True)
    assert after.returncode == 0, after.stdout[-5000:]
    assert "vote" in (root / "tests" / "golden" / "plans" / "smoke.json").read_text()
    assert "`vote." in (root / "config" / "README.md").read_text()


@pytest.mark.slow
def test_a_new_figure_of_an_existing_kind_is_config_only(tmp_path):
    """A `figures` key of a generation task (panels, title) or of sparse parity (a K_train list)
    that the registry does not know is a figure of its own: validated, listed in REPORT.md's
    figures, planned by the one figure rule from the tier YAML alone; a key that would overwrite
    another file of the run is refused, naming it."""
    from lengen.config import artifacts, config

    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg["parity_scratchpad"]["figures"]["fig_ppc_alone"] = {"panels": ["ppc"], "title": "PPC"}
    cfg["sparse_parity"]["figures"]["fig_one_k"] = cfg["sparse_parity"]["k_train"][:1]
    path = tmp_path / "tier.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    listed = artifacts.report_figures(config.load(path))
    assert {"fig_ppc_alone.png", "fig_one_k.png"} <= set(listed)
    for stem, rule in (("fig_ppc_alone", "figure"), ("fig_one_k", "figure")):
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            f"reports/smoke/{stem}.png",
            "-n",
            "--cores",
            "2",
            "--configfile",
            str(path),
        ]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert job_stats(proc)[rule] == 1
    bad = copy.deepcopy(cfg)
    bad["parity_scratchpad"]["figures"]["fig1_sparse_parity"] = {"panels": ["ppc"]}
    bad["sparse_parity"]["figures"]["fig_bad_k"] = [99]
    bad["variable_assignment"]["figures"]["fig_ppc_alone"] = {"panels": ["ppc"]}  # twice
    with pytest.raises(config.ConfigError) as err:
        config.validate(bad)
    assert "parity_scratchpad.figures.fig1_sparse_parity" in str(err.value)
    assert "sparse_parity.figures.fig_bad_k: K_train [99] not in k_train" in str(err.value)
    twice = "variable_assignment.figures.fig_ppc_alone: fig_ppc_alone.png is another file"
    assert twice in str(err.value)


def test_a_new_claim_touches_its_experiment_module_alone(tmp_path):
    """docs/extending.md, "A claim": one file, its experiment's claims module
    (lengen.report.claims.<experiment>), gets the rule (RULES) and the row (claims); in a copy
    of the package with only that file changed, the registry holds the rule, the report judges
    the row by its threshold on the default reference and counts its sentence once."""
    import shutil

    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "src" / "lengen", src / "lengen", ignore=shutil.ignore_patterns("__pycache__")
    )
    module = src / "lengen" / "report" / "claims" / "majority.py"
    text = module.read_text()
    text = text.replace(
        "\nRULES = (\n",
        """\nRULES = (
    Rule(sentence="XX-1", section="Sec. 9", paper="a toy sentence", window="every length",
         threshold=0.9, gate="none", interval=RUN_OUTCOMES, reason="a test"),
""",
        1,
    )
    text = text.replace(
        "    return [\n",
        """    return [
        Claim("XX-1", "Sec. 9", "a toy sentence", "a constant", lambda tables: 0.95,
              "value >= 0.9", lambda v: v >= RULES[0].threshold),
""",
        1,
    )
    module.write_text(text)
    script = f"""
import tempfile, yaml
from pathlib import Path
from lengen.config import artifacts
from lengen.config.config import validate
from lengen.report import report, rules
whole = validate(yaml.safe_load(Path({str(ROOT / "config" / "config.yaml")!r}).read_text()))
cfg = artifacts.report_config(whole)
ref = Path({str(ROOT / "reference" / "default")!r})
paths = {{k: str(ref / Path(v).name) for k, v in artifacts.report_tables(cfg).items()}}
out = Path({str(tmp_path / "REPORT.md")!r})
rows = report.write_report(cfg, out, paths, None, None, [])
mine = rows[rows.id == "XX-1"].iloc[0]
print("XX-1" in rules.RULES, mine.verdict, mine.counted, mine.sentence)
"""
    env = {**os.environ, "PYTHONPATH": str(src)}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["True", "reproduced", "yes", "XX-1"]
    assert "| XX-1 " in (tmp_path / "REPORT.md").read_text()


@pytest.mark.slow
def test_a_figure_of_a_new_kind_is_one_object_and_its_entry(tmp_path):
    """docs/extending.md, "A figure": a new kind is one FigureKind (its job, drawer and caption)
    in figures.py's KINDS, and its figure a FIGURES entry (artifacts.py); in a copy of the
    project with only those two files changed, the one figure rule plans it, its job carries
    its caption, the CLI draws it, and the registry checks pass."""
    root = tmp_path / "project"
    _copy_project(root)
    src = root / "src" / "lengen"
    figures = src / "report" / "figures.py"  # 1. the kind: its job, drawer and caption
    text = figures.read_text()
    text = text.replace(
        "KINDS: dict[str, FigureKind] = {",
        "def _draw_toy(table, args, meta):\n"
        "    plt, _ = _pyplot()\n"
        "    fig, ax = plt.subplots()\n"
        '    ax.hist(table["accuracy"])\n'
        "    _save(fig, args.out, 100, meta)\n\n\n"
        'TOY = FigureKind("toy", lambda cfg, fig: ('
        '[artifacts.table(cfg, "sparse_parity")], []),'
        ' _draw_toy, lambda cfg: "A toy histogram of every accuracy of the sparse-parity '
        'table, one bar per bin, drawn to check that a kind is one object.")\n\n'
        "KINDS: dict[str, FigureKind] = {",
    )
    assert "        ATTENTION,\n    )" in text
    text = text.replace("        ATTENTION,\n    )", "        ATTENTION,\n        TOY,\n    )")
    figures.write_text(text)
    artifacts = src / "config" / "artifacts.py"  # 2. its registry entry
    text = artifacts.read_text().replace(
        '    "theory_figure": Figure("theory", "theory", None, ""),\n',
        '    "theory_figure": Figure("theory", "theory", None, ""),\n'
        '    "fig_toy": Figure("sparse_parity", "toy", None, "Toy"),\n',
    )
    artifacts.write_text(text)
    changed = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.read_bytes() != (ROOT / p.relative_to(root)).read_bytes()
    )
    assert changed == ["src/lengen/config/artifacts.py", "src/lengen/report/figures.py"]
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "reports/smoke/fig_toy.png",
        "-n",
        "-p",
        "--cores",
        "1",
        "--configfile",
        "config/smoke.yaml",
    ]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert job_stats(proc)["figure"] == 1
    assert "lengen.report.figures toy --tables reports/smoke/sparse_parity_accuracy.csv" in (
        proc.stdout
    )
    out = tmp_path / "toy.png"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "lengen.report.figures",
            "toy",
            "--tables",
            str(ROOT / "reference" / "smoke" / "sparse_parity_accuracy.csv"),
            "--out",
            str(out),
        ],
        cwd=root,
        env=env,
        check=True,
    )
    assert out.stat().st_size > 1000
    caption = subprocess.run(
        [
            sys.executable,
            "-c",
            "from lengen.config import config; from "
            "lengen.report import figures; print(figures.figure_job(config.load("
            "'config/smoke.yaml'), 'fig_toy').caption)",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert caption.stdout.startswith("A toy histogram")
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_figure_jobs.py",
            "-k",
            "kind",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout[-3000:]


SETTING_PATHS = {  # docs/extending.md, "A setting's path": the files, in order
    "lr": ["config/<tier>.yaml", "src/lengen/core/specs.py", "src/lengen/train/lifecycle.py"],
    "fuse_runs": [
        "config/<tier>.yaml",
        "src/lengen/core/specs.py",
        "src/lengen/config/plan.py",
        "workflow/rules/synthetic.smk",
        "workflow/rules/generation.smk",
    ],
}
# lr: 8 files crossed before the schema was made from the fields, 7 before the spec was counted
# as what it is, one object the rule, the plan and train.py pass on naming no setting
PATH_LIMITS = {"lr": 4, "fuse_runs": 5}


@pytest.mark.parametrize("key", sorted(SETTING_PATHS))
def test_a_settings_path_is_the_files_docs_name(key):
    """Issue 62: the files a setting crosses from its YAML key to where it is used are the ones
    docs/extending.md names, in order, and no more than PATH_LIMITS: every product file whose
    code names the key is on the path, each file on it exists, and the YAML and the schema
    hold the key."""
    import re

    path = SETTING_PATHS[key]
    doc = (ROOT / "docs" / "extending.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| ")]
    row = next(r for r in rows if re.search(rf"[`.]{key}`", r.split("|")[1]))
    assert int(row.split("|")[2]) == len(path)
    assert re.findall(r"`((?:config|src|workflow)/[^`]+)`", row.split("| ")[-1])[: len(path)] == (
        path
    )
    assert len(path) <= PATH_LIMITS[key]
    for name in path[1:]:
        assert (ROOT / name).is_file(), name
    assert re.search(
        rf"\b{key}:",
        (ROOT / "config" / "gpu.yaml").read_text() + (ROOT / "config" / "config.yaml").read_text(),
    )
    assert re.search(rf"^\s+{key}:", (ROOT / path[1]).read_text(), re.M)
    code = [
        *(ROOT / "src" / "lengen").rglob("*.py"),
        *(ROOT / "workflow" / "rules").glob("*.smk"),
        ROOT / "Snakefile",
    ]
    names = load_script(ROOT / "tools" / "setting_route.py").names  # what a code token names
    naming = {str(p.relative_to(ROOT)) for p in code if names(p.read_text(), key)}
    assert naming and naming <= set(path), naming - set(path)
