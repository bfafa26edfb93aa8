"""Copy a finished from-scratch run of a tier into its committed reference, reference/<tier>/:

    python -m lengen.report.refresh --configfile config/config.yaml [--project <checkout>]

The refresh refuses a run of another tier or config (its config hash), an incomplete run (every
table the report reads, every figure it lists, REPORT.md and verdicts.csv), a run made from
uncommitted code (`--allow-dirty` to override, for a smoke check) or from more than one commit (a
reference is a from-scratch run of one named commit), and a run that would drop files of the
current reference (`--allow-removal`); it builds the new folder beside the old one and swaps it in
whole. A run of a commit whose science differs from HEAD's is accepted: main never waits for a
reference run. The reference names its commit in every file, and the refresh says where HEAD's
science has moved since (`science_changes`), so that a reader knows what the reference is of.

The science of a commit is what decides a run's files, and nothing else:
- the code every job runs and the code that plans the jobs: each lengen module the workflow
  imports or runs with `python -m` (or names in a rule's code hash), and lengen.core.floats (run
  before every reference run: it pins the CPU kernels), with what they import
  (lengen.config.code's closure), as syntax trees without docstrings or a setting's doc, so a
  comment, a docstring or a config key's description changes no science (the config schema is
  code: the settings dataclasses, whose defaults and types are science);
- the rule files and the Snakefile as snakefmt writes them (a reformatting is no change; without
  snakefmt installed, line for line), the rest of workflow/, the environments and the DeepSpeed
  JSON files line for line;
- pyproject.toml's package: its dependencies, Python, scripts, package data and build (not the
  dev and mutation extras or the linters' and pytest's settings);
- the tier's own config, through its config hash (the other tiers' files are not this run's).
A long reference run (hours on 2 cores: README, Tiers; in sittings from one pinned worktree)
therefore survives commits that change tests, docs, docstrings, other tiers or this module; no
job imports it.

No workflow job imports this module: a maintainer runs it by hand after a from-scratch run of
committed code (docs/pipeline.md, "Results, references, MLflow"; tools/reference_run.sh), and it
stays beside lengen.report.reference, whose comparison it commits.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from lengen.config.artifacts import REPORT, REPORT_HTML, VERDICTS
from lengen.core.cli import command_parser, one_line_errors
from lengen.report.reference import read, reference_dir

LINE_FOR_LINE = ("workflow", "Snakefile", "envs", "config/*.json")
PYPROJECT = "pyproject.toml"
NOT_SCIENCE_EXTRAS = ("dev", "mutation")  # tools for us, not for a run
_RUNS = re.compile(r"python -m (lengen[\w.]*)|code_hash\(\"(lengen[\w.]*)\"\)")
# run before every reference run (its exports pin the CPU kernels: the numbers depend on it)
OUTSIDE_THE_WORKFLOW = ("lengen.core.floats",)
_IMPORTS = re.compile(r"^\s*(?:from (lengen[\w.]*) import ([\w, ]+)|import (lengen[\w.]*))", re.M)


def _rule_files(tree: Path) -> list[Path]:
    """The Snakemake files of a source tree: its Snakefile and every .smk under workflow/."""
    files = [tree / "Snakefile", *sorted((tree / "workflow").rglob("*.smk"))]
    return [f for f in files if f.is_file()]


def entries(tree: Path) -> set[str]:
    """The lengen modules the workflow of a source tree runs (`python -m`, or a rule's code
    hash names) or imports to plan, and those run before it (OUTSIDE_THE_WORKFLOW)."""
    found = set(OUTSIDE_THE_WORKFLOW)
    for f in _rule_files(tree):
        text = f.read_text()
        found |= {a or b for a, b in _RUNS.findall(text)}
        # `from lengen import tasks` plans with lengen.tasks
        for module, names, plain in _IMPORTS.findall(text):
            found |= {plain} if plain else {f"{module}.{n.strip()}" for n in names.split(",")}
    return found


def _git(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(project), *args], capture_output=True)


def _tree(project: Path, commit: str, into: Path) -> bool:
    """Extract the commit's src, workflow and Snakefile into `into`; False if git cannot."""
    paths = ("src", "workflow", "Snakefile", PYPROJECT)
    done = _git(project, "archive", "--format=tar", commit, *paths)
    if done.returncode != 0:
        return False
    with tarfile.open(fileobj=BytesIO(done.stdout)) as tar:
        tar.extractall(into, filter="data")
    return True


def _rules(name: str) -> bool:
    """A Snakemake file: the Snakefile or a .smk."""
    return name == "Snakefile" or name.endswith(".smk")


def _formatted(tree: Path, settings: Path) -> dict[str, str]:
    """Each Snakemake file of an extracted source tree (its project path) as snakefmt writes
    it with the checkout's settings (`settings`, its pyproject.toml: the same for every tree,
    whatever the tree's own says), formatted in place by one snakefmt call; as it is where
    snakefmt is not installed or cannot parse it (snakefmt leaves such a file untouched)."""
    files = _rule_files(tree)
    command = [sys.executable, "-m", "snakefmt", "--config", str(settings), *map(str, files)]
    subprocess.run(command, capture_output=True)
    return {str(f.relative_to(tree)): f.read_text() for f in files}


def _package(path: Path) -> object:
    """pyproject.toml less what no run uses: the dev tools' extras, the [tool] settings other
    than setuptools' (None when absent)."""
    import tomllib

    if not path.is_file():
        return None
    toml = tomllib.loads(path.read_text())
    extras = toml.get("project", {}).get("optional-dependencies", {})
    for name in NOT_SCIENCE_EXTRAS:
        extras.pop(name, None)
    toml["tool"] = {k: v for k, v in toml.get("tool", {}).items() if k == "setuptools"}
    return toml


def _code(tree: Path, names: set[str]) -> dict[str, str]:
    """Each source file (its project path) the entries run, as its docstring-free syntax tree."""
    from lengen.config.code import closure, normalized

    root = tree / "src" / "lengen"
    files = {f for name in sorted(names) for f in closure(name, root)}
    return {str(f.relative_to(tree)): normalized(f) for f in files}


def science_changes(commit: str, project: Path) -> list[str] | None:
    """What differs in science (this module's docstring) between `commit` and the checkout's
    HEAD, as project paths; None when git cannot tell (not a checkout, an unknown commit)."""
    diff = _git(project, "diff", "--name-only", commit, "HEAD", "--", *LINE_FOR_LINE)
    if diff.returncode != 0:
        return None
    changed = {f for f in diff.stdout.decode().split() if not _rules(f)}
    with tempfile.TemporaryDirectory() as tmp:
        then, now = Path(tmp, "then"), Path(tmp, "now")
        if not (_tree(project, commit, then) and _tree(project, "HEAD", now)):
            return None
        if _package(then / PYPROJECT) != _package(now / PYPROJECT):
            changed.add(PYPROJECT)
        settings = Path(project) / PYPROJECT
        old, new = _formatted(then, settings), _formatted(now, settings)
        changed |= {f for f in old.keys() | new.keys() if old.get(f) != new.get(f)}
        names = entries(then) | entries(now)
        old, new = _code(then, names), _code(now, names)
        changed |= {f for f in old.keys() | new.keys() if old.get(f) != new.get(f)}
    return sorted(changed)


def expected_files(whole: dict) -> set[str]:
    """Every file a finished run of the config leaves in its reports directory that the
    reference keeps: REPORT.md (and REPORT.html, its rendering), verdicts.csv, the figure of
    every run, the tables the report reads, the figures it lists."""
    from lengen.config import artifacts

    tables = artifacts.report_tables(artifacts.report_config(whole)).values()
    return (
        {REPORT, REPORT_HTML, VERDICTS, artifacts.RUNS_FIGURE}
        | {Path(t).name for t in tables}
        | set(artifacts.report_figures(whole))
    )


def file_commits(reports: Path) -> dict[str, Path]:
    """Each commit a run's files were made at (a CSV's `git_commit` column, a PNG's provenance
    chunk), with the first file that names it (issue 65: one figure redrawn from uncommitted
    code made the run dirty while its verdicts.csv was clean)."""
    from lengen.core import provenance

    found: dict[str, Path] = {}
    for path in sorted(reports.iterdir()):
        for commit in provenance.recorded_commits(path):
            found.setdefault(commit, path)
    return found


def check_run(reports: Path, whole: dict, project: Path, allow_dirty: bool) -> list[Path]:
    """The files to copy, once the run in `reports` is shown to be a complete run of this
    config (its tier, its config hash) made by one commit's committed code; else SystemExit
    saying what is wrong."""
    from lengen.config import artifacts
    from lengen.core import provenance

    verdicts = read(reports / VERDICTS)
    if verdicts is None or not (reports / REPORT).exists():
        raise SystemExit(f"{reports}: no {REPORT} and {VERDICTS}; run the tier to the end first")
    tier = whole["tier"]
    if f"Tier `{tier}`." not in (reports / REPORT).read_text():
        raise SystemExit(f"{reports / REPORT}: not a run of tier {tier!r}; refusing to refresh")
    want = provenance.config_hash(artifacts.report_config(whole))
    hashes = sorted(set(verdicts["config_hash"].astype(str)))
    if hashes != [want]:
        raise SystemExit(
            f"{reports / VERDICTS}: config hash {', '.join(hashes)}, but this tier's config "
            f"gives {want}: the run was made from another config; rerun it"
        )
    made = file_commits(reports)  # every table's and figure's, not the verdicts' alone
    dirty = sorted((c, f) for c, f in made.items() if c.endswith("-dirty"))
    if dirty and not allow_dirty:
        raise SystemExit(
            f"{dirty[0][1]}: made from uncommitted code ({dirty[0][0]}); commit, rerun from "
            "scratch, then refresh (or pass --allow-dirty)"
        )
    commits = sorted({c.removesuffix("-dirty") for c in made})
    if len(commits) > 1:
        where = ", ".join(
            f"{made.get(c, made.get(c + '-dirty')).name} at {c[:12]}" for c in commits
        )
        raise SystemExit(
            f"{reports}: made at {len(commits)} commits ({where}): a reference is a from-scratch "
            "run of one commit; rerun it in one worktree (tools/reference_run.sh)"
        )
    for commit, where in sorted(made.items()):
        if commit.endswith("-dirty"):
            continue
        changed = science_changes(commit, project)
        if changed is None:
            raise SystemExit(f"{where}: commit {commit} is not in {project}'s history")
        if changed:  # accepted: the reference is of its commit, which every file names
            print(
                f"{reports}: a run of {commit[:12]}; HEAD's science has moved since, in "
                f"{', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}",
                file=sys.stderr,
            )
    missing = sorted(n for n in expected_files(whole) if not (reports / n).is_file())
    if missing:
        raise SystemExit(f"{reports}: incomplete run, missing {', '.join(missing)}")
    kept = {".csv", ".md", ".png"}  # not Snakemake's report.html (5 MB, this machine's paths)
    return sorted(
        p for p in reports.iterdir() if p.is_file() and (p.suffix in kept or p.name == REPORT_HTML)
    )


def refresh(
    reports: Path,
    dest: Path,
    whole: dict,
    project: Path = Path("."),
    allow_dirty: bool = False,
    allow_removal: bool = False,
) -> list[Path]:
    """Replace a tier's reference directory with a finished run's reports, once check_run has
    accepted the run and, unless allow_removal, no file of the current reference would be lost;
    the new folder is built beside the old and swapped in whole."""
    files = check_run(reports, whole, project, allow_dirty)
    lost = (
        sorted({p.name for p in dest.glob("*")} - {f.name for f in files}) if dest.exists() else []
    )
    if lost and not allow_removal:
        raise SystemExit(
            f"{dest}: the run has no {', '.join(lost[:5])}{' ...' if len(lost) > 5 else ''}; "
            "refusing to shrink the reference (pass --allow-removal if they are gone on purpose)"
        )
    new, old = dest.with_name(dest.name + ".new"), dest.with_name(dest.name + ".old")
    for stale in (new, old):
        shutil.rmtree(stale, ignore_errors=True)
    new.mkdir(parents=True)
    for f in files:
        shutil.copy2(f, new / f.name)
    if dest.exists():
        dest.rename(old)
    new.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return [dest / f.name for f in files]


# pragma: no mutate block  (CLI wiring)
@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: refresh a tier's committed reference from a finished run of that tier."""
    from lengen.config.config import load

    parser = command_parser(__spec__, __doc__)
    parser.add_argument("--configfile", type=Path, required=True, help="the tier's config YAML")
    parser.add_argument("--allow-dirty", action="store_true", help="accept uncommitted code")
    parser.add_argument(
        "--allow-removal",
        action="store_true",
        help="accept a run without some of the current reference's files",
    )
    parser.add_argument("--project", type=Path, default=Path("."), help="the checkout (default: .)")
    args = parser.parse_args(argv)
    cfg = load(args.configfile)
    dest = reference_dir(cfg["tier"], args.project)
    files = refresh(
        Path(cfg["reports_dir"]), dest, cfg, args.project, args.allow_dirty, args.allow_removal
    )
    print(f"{dest}: {len(files)} files from {cfg['reports_dir']}", file=sys.stderr)


if __name__ == "__main__":
    main()
