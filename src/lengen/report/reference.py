"""The committed reference results of each tier, and a run compared with them.

A run writes only under its own `results_dir` and `reports_dir` (never committed), so a fresh
clone's `snakemake --cores all` trains, evaluates and reports everything. The results we publish
live in `reference/<tier>/` of the project, which no rule writes: they are copied there from a
finished from-scratch run by an explicit command, `python -m lengen.report.refresh` (its checks
are in that module, which no job runs).

Every REPORT.md has a section "This run beside the reference and the paper": per claim, the
verdict of this run and of the committed reference of the same tier (same / differs), the number
each measured and by how much they differ (within the reference's 95% CI where the row has one),
and the paper's statement.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from lengen.core import provenance


def markdown_table(table: pd.DataFrame) -> str:
    """A markdown (pipe) table of the frame, cells unpadded (a padded table repeats its widest
    cell's width on every line: REPORT.md's reached 14,000 characters a line), `|` escaped."""

    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(map(cell, table.columns)) + " |"
    rule = "|" + "---|" * len(table.columns)
    rows = ["| " + " | ".join(map(cell, row)) + " |" for row in table.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def reference_dir(tier: str, project: Path | str = ".") -> Path:
    """reference/<tier>/ of the project checkout: the committed results of that tier."""
    return Path(project) / "reference" / tier


def read(path: str | Path | None) -> pd.DataFrame | None:
    """A verdicts.csv (None when the path is None or absent)."""
    if path is None or not Path(path).exists():
        return None
    return pd.read_csv(
        path,
        dtype={"id": str, **provenance.DTYPES},
        keep_default_na=False,
        na_values={"value": [""], "ci_low": [""], "ci_high": [""]},
    )


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


PROVENANCE = (("config_hash", "config hash"), ("git_commit", "commit"))


def _values(table: pd.DataFrame, column: str) -> str:
    found = sorted({str(v) for v in table[column]}) if column in table else []
    return ", ".join(f"`{v}`" for v in found) or "unknown"


def provenance_line(run: pd.DataFrame, ref: pd.DataFrame) -> str:
    """What the two were made from, and which of config hash and commit differ: said before any
    verdict is called the same (a different config makes "same" a coincidence of words)."""
    mine = {c: _values(run, c) for c, _ in PROVENANCE}
    theirs = {c: _values(ref, c) for c, _ in PROVENANCE}
    differ = [name for c, name in PROVENANCE if mine[c] != theirs[c]]
    made = (
        f"This run: config hash {mine['config_hash']}, commit {mine['git_commit']}. The "
        f"reference: config hash {theirs['config_hash']}, commit {theirs['git_commit']}. "
    )
    if not differ:
        return made + "Same config and code: a verdict or number that differs is the machine's."
    if "config hash" in differ:
        return made + (
            f"They differ in {' and '.join(differ)}: the reference was made from another "
            'config, so "same" below means the same words, not a repeat of the run.'
        )
    return made + "They differ in the commit: the same config run by other code."


def section(run: pd.DataFrame, ref: pd.DataFrame | None, label: str) -> list[str]:
    """REPORT.md's comparison section (markdown lines); `label` names the reference's place;
    the provenance of both first (provenance_line), then the verdicts side by side."""
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
    head = (
        f"Reference: {label}. {provenance_line(run, ref)} "
        f"**{same} of {len(table)} verdicts are the same as the reference's**"
    )
    head += (
        "."
        if differ.empty
        else (
            "; not the same: "
            + ", ".join(f"{r.id} ({r.verdict})" for r in differ.itertuples())
            + "."
        )
    )
    identical = int((table.number == "identical").sum())
    measured = int((~table.number.isin(["no number in either", "-"])).sum())
    return lines + [
        head,
        f"{identical} of {measured} measured numbers are identical to the reference's (a run of "
        "the same code, config and seed on the same kind of machine repeats them exactly).",
        "",
        markdown_table(table),
        "",
    ]


def table_differences(run_dir: str | Path, ref_dir: str | Path) -> tuple[int, list[str]]:
    """Every table of `ref_dir` (a committed reference) against the one of the same name in
    `run_dir` (a run's reports folder), provenance aside (config hash, seed, versions, commit,
    when judged): how many tables were compared, and a line per difference (a table missing on
    either side, another set of columns or rows, the first cell that differs, to the last bit)."""
    run_dir, ref_dir = Path(run_dir), Path(ref_dir)
    stamps = [*provenance.COLUMNS, provenance.JUDGED_AT]
    found = []
    ref_names = sorted(p.name for p in ref_dir.glob("*.csv"))
    run_names = sorted(p.name for p in run_dir.glob("*.csv"))
    for name in sorted(set(run_names) - set(ref_names)):
        found.append(f"{run_dir / name}: a table the reference does not have")
    for name in ref_names:
        if name not in run_names:
            found.append(f"{run_dir / name}: missing (the reference has it)")
            continue
        golden = pd.read_csv(ref_dir / name).drop(columns=stamps, errors="ignore")
        table = pd.read_csv(run_dir / name).drop(columns=stamps, errors="ignore")
        if list(table.columns) != list(golden.columns):
            found.append(
                f"{run_dir / name}: columns {list(table.columns)}, the reference's "
                f"{list(golden.columns)}"
            )
            continue
        if len(table) != len(golden):
            found.append(f"{run_dir / name}: {len(table)} rows, the reference's {len(golden)}")
            continue
        differs = (~((table == golden) | (table.isna() & golden.isna()))).to_numpy()
        if differs.any():
            row, col = next(zip(*differs.nonzero(), strict=True))
            found.append(
                f"{run_dir / name}: row {row + 2} {table.columns[col]} = "
                f"{table.iat[row, col]!r}, the reference's {golden.iat[row, col]!r} "
                f"({int(differs.sum())} cells differ)"
            )
    return len(ref_names), found


def main(argv: list[str] | None = None) -> None:
    """CLI: a run's reports against a committed reference, every number, provenance aside."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m lengen.report.reference",
        description="A run's tables against a committed reference's, every number to the last "
        "bit, leaving provenance out (config hash, seed, versions, commit): exit 0 when they are "
        "the same, 1 (a line per difference) when not. E.g. `python -m lengen.report.reference "
        "reports/smoke reference/smoke` after the smoke tier.",
    )
    parser.add_argument("run", type=Path, help="the run's reports folder (reports/<tier>)")
    parser.add_argument("reference", type=Path, help="the reference (reference/<tier>)")
    args = parser.parse_args(argv)
    for folder in (args.run, args.reference):
        if not folder.is_dir():
            parser.error(f"{folder}: no such folder")
    count, found = table_differences(args.run, args.reference)
    for line in found:
        print(line, file=sys.stderr)
    if found:
        raise SystemExit(1)
    print(
        f"{args.run}: every number of the reference's {count} tables the same "
        f"({args.reference}), provenance aside"
    )


if __name__ == "__main__":
    main()
