"""The committed reference results of each tier, and a run compared with them.

A run writes only under its own `reports_dir` (inside `results_dir`, never committed), so a fresh
clone's `snakemake --cores all` trains, evaluates and reports everything. The results we publish
live in `reference/<tier>/` of the project, which no rule writes: they are copied there from a
finished from-scratch run by an explicit command,

    python -m lengen.report.reference refresh --configfile config/config.yaml

which refuses a run of another tier or config (its config hash), an incomplete run (every table
the report reads, every figure it lists, REPORT.md and verdicts.csv), a run made from
uncommitted code (`--allow-dirty` to override, for a smoke check) or from a commit whose science
differs from HEAD's, and a run that would drop files of the current reference
(`--allow-removal`); it builds the new folder beside the old one and swaps it in whole.

Every REPORT.md has a section "This run beside the reference and the paper": per claim, the
verdict of this run and of the committed reference of the same tier (same / differs), the number
each measured and by how much they differ (within the reference's 95% CI where the row has one),
and the paper's statement.
"""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import pandas as pd

from lengen.config.artifacts import REPORT, VERDICTS
from lengen.core import provenance
from lengen.core.cli import command_parser


def reference_dir(tier: str, project: Path | str = ".") -> Path:
    """reference/<tier>/ of the project checkout: the committed results of that tier."""
    return Path(project) / "reference" / tier


def read(path: str | Path | None) -> pd.DataFrame | None:
    """A verdicts.csv (None when the path is None or absent)."""
    if path is None or not Path(path).exists():
        return None
    return pd.read_csv(path, dtype={"id": str, **provenance.DTYPES}, keep_default_na=False,
                       na_values={"value": [""], "ci_low": [""], "ci_high": [""]})  # fmt: skip


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def compare_number(run: pd.Series, ref: pd.Series) -> str:
    """How this run's number compares with the reference's: identical, within / outside the
    reference's 95% CI (where the row has one), or the difference."""
    a, b = _num(run.get("value")), _num(ref.get("value"))
    if math.isnan(a) and math.isnan(b):
        return "no number in either"
    if math.isnan(a) or math.isnan(b):
        return "a number in only one of them"
    if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
        return "identical"
    diff = f"{a - b:+.3f}"
    lo, hi = _num(ref.get("ci_low")), _num(ref.get("ci_high"))
    if not (math.isnan(lo) or math.isnan(hi)):
        inside = "within" if lo <= a <= hi else "outside"
        return f"{diff}, {inside} the reference's 95% CI [{lo:.3f}, {hi:.3f}]"
    return f"{diff} (no interval in this row)"


COLUMNS = ["id", "paper", "reference", "this run", "verdict", "number"]


def _shown(row: pd.Series | None) -> str:
    return "(no such claim)" if row is None else f"{row['verdict']}: {row['measured']}"


def compare(run: pd.DataFrame, ref: pd.DataFrame | None) -> pd.DataFrame:
    """One row per claim of this run (and per claim only the reference has): the two verdicts,
    same / differs (new / missing where only one has the claim), the two numbers and how they
    compare, the paper's statement."""
    refs = {} if ref is None else {r["id"]: r for _, r in ref.iterrows()}
    pairs = [(r, refs.pop(r["id"], None)) for _, r in run.iterrows()]
    pairs += [(None, other) for other in refs.values()]
    rows = []
    for mine, other in pairs:
        if mine is None or other is None:
            verdict, number = ("new" if other is None else "missing"), "-"
        else:
            verdict = "same" if mine["verdict"] == other["verdict"] else "differs"
            number = compare_number(mine, other)
        either = mine if mine is not None else other
        rows.append([either["id"], either["paper"], _shown(other), _shown(mine), verdict, number])
    return pd.DataFrame(rows, columns=COLUMNS)


def section(run: pd.DataFrame, ref: pd.DataFrame | None, label: str) -> list[str]:
    """REPORT.md's comparison section (markdown lines); `label` names the reference's place."""
    lines = ["## This run beside the reference and the paper", ""]
    if ref is None:
        return lines + [
            f"No committed reference for this tier (`{label}` does not exist): nothing to compare "
            "with. The paper's statement of each claim is in the table above.",
            "",
        ]
    table = compare(run, ref)
    same = int((table.verdict == "same").sum())
    differ = table[table.verdict != "same"]
    commits = sorted(set(ref["git_commit"])) if "git_commit" in ref else []
    head = (
        f"Reference: `{label}` (git commit {', '.join(f'`{c}`' for c in commits) or 'unknown'}). "
        f"**{same} of {len(table)} verdicts are the same as the reference's**"
    )
    head += "." if differ.empty else ("; not the same: " + ", ".join(
        f"{r.id} ({r.verdict})" for r in differ.itertuples()) + ".")  # fmt: skip
    identical = int((table.number == "identical").sum())
    measured = int((~table.number.isin(["no number in either", "-"])).sum())
    return lines + [
        head,
        f"{identical} of {measured} measured numbers are identical to the reference's (a run of "
        "the same code, config and seed on the same kind of machine repeats them exactly).",
        "",
        table.to_markdown(index=False),
        "",
    ]


SCIENCE_PATHS = (
    "src",
    "workflow",
    "Snakefile",
    "config/*.yaml",
    "config/*.json",
    "envs",
    "pyproject.toml",
)


def expected_files(whole: dict) -> set[str]:
    """Every file a finished run of the config leaves in its reports directory that the
    reference keeps: REPORT.md, verdicts.csv, the tables the report reads, the figures it
    lists."""
    from lengen.config import artifacts

    tables = artifacts.report_tables(artifacts.report_config(whole)).values()
    return (
        {REPORT, VERDICTS} | {Path(t).name for t in tables} | set(artifacts.report_figures(whole))
    )


def science_changes(commit: str, project: Path) -> list[str] | None:
    """The science paths (SCIENCE_PATHS) that differ between `commit` and the checkout's HEAD;
    None when git cannot tell (not a checkout, an unknown commit)."""
    import subprocess

    cmd = ["git", "-C", str(project), "diff", "--name-only", commit, "HEAD", "--", *SCIENCE_PATHS]
    done = subprocess.run(cmd, capture_output=True, text=True)
    return done.stdout.split() if done.returncode == 0 else None


def check_run(reports: Path, whole: dict, project: Path, allow_dirty: bool) -> list[Path]:
    """The files to copy, once the run in `reports` is shown to be a complete run of this
    config (its tier, its config hash) made by code whose science is HEAD's; else SystemExit
    saying what is wrong."""
    from lengen.config import artifacts

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
    commits = sorted(set(verdicts["git_commit"].astype(str)))
    dirty = [c for c in commits if c.endswith("-dirty")]
    if dirty and not allow_dirty:
        raise SystemExit(
            f"{reports / VERDICTS}: made from uncommitted code ({dirty[0]}); commit, rerun from "
            "scratch, then refresh (or pass --allow-dirty)"
        )
    for commit in (c for c in commits if not c.endswith("-dirty")):
        changed = science_changes(commit, project)
        if changed is None:
            raise SystemExit(f"{reports / VERDICTS}: commit {commit} is not in {project}'s history")
        if changed:
            raise SystemExit(
                f"{reports / VERDICTS}: made at {commit[:12]}, whose science differs from HEAD's "
                f"in {', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}: rerun at HEAD"
            )
    missing = sorted(n for n in expected_files(whole) if not (reports / n).is_file())
    if missing:
        raise SystemExit(f"{reports}: incomplete run, missing {', '.join(missing)}")
    kept = {".csv", ".md", ".png"}
    return sorted(p for p in reports.iterdir() if p.is_file() and p.suffix in kept)


def refresh(
    reports: Path, dest: Path, whole: dict, project: Path = Path("."), allow_dirty: bool = False,
    allow_removal: bool = False,
) -> list[Path]:  # fmt: skip
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
def main(argv: list[str] | None = None) -> None:
    """CLI: refresh a tier's committed reference from a finished run of that tier."""
    import yaml

    from lengen.config.config import validate

    parser = command_parser(__spec__, __doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("refresh", help="copy a finished run's reports to reference/<tier>/")
    p.add_argument("--configfile", type=Path, required=True, help="the tier's config YAML")
    p.add_argument("--allow-dirty", action="store_true", help="accept uncommitted code")
    p.add_argument("--allow-removal", action="store_true",
                   help="accept a run without some of the current reference's files")  # fmt: skip
    p.add_argument("--project", type=Path, default=Path("."), help="the checkout (default: .)")
    args = parser.parse_args(argv)
    cfg = validate(yaml.safe_load(args.configfile.read_text()))
    dest = reference_dir(cfg["tier"], args.project)
    files = refresh(Path(cfg["reports_dir"]), dest, cfg, args.project, args.allow_dirty,
                    args.allow_removal)  # fmt: skip
    print(f"{dest}: {len(files)} files from {cfg['reports_dir']}", file=sys.stderr)


if __name__ == "__main__":
    main()
