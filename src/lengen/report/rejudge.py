"""Judge a committed reference again by today's rules, without retraining (issue 64, item 5):

    eval "$(python -m lengen.core.floats)"   # the CPU kernels the references are made with
    python -m lengen.report.rejudge --configfile config/config.yaml

Without the `eval` line it refuses to start (lengen.core.floats.unpinned): other kernels move the
recomputed numbers' last digits.

A change of the statistics or of a rule changes verdicts, not tables. This rewrites the
reference's REPORT.md, REPORT.html and verdicts.csv (reference/<tier>/) from its committed tidy
tables by today's rules (lengen.report.report), with a section comparing the verdicts it
replaces. The report names both commits: the one that trained (the tables' `git_commit`) and the
one that judged (this checkout's HEAD; a checkout with uncommitted changes is refused unless
`--allow-dirty`, for a check). Its figures are drawn again from the same committed tables by
today's drawing code (a band's meaning, a title, a legend's place are the report's, not the
run's). The config is the tier file as it was at the commit that trained the reference
(`trained_config`: the tier may have moved on since, to more runs or other arms), validated by
today's code; its hash must be the tables', so that the rules read the windows and thresholds the
run was made for.

No workflow job imports this module: a maintainer runs it by hand after a change of
lengen.report.effects or a claim's rule, then commits the reference (docs/rules.md, History).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

from lengen.config import artifacts
from lengen.config.config import ConfigError, load, read_tier_at, validate
from lengen.config.figure_jobs import to_json
from lengen.core import floats, provenance
from lengen.core.cli import command_parser, one_line_errors
from lengen.report import report
from lengen.report.reference import reference_dir


def trained_commits(paths: dict[str, str]) -> list[str]:
    """The commits the reference's tables were made at (their git_commit column)."""
    found = set()
    for path in paths.values():
        if Path(path).exists():
            found |= provenance.recorded_commits(path)
    return sorted(found)


def trained_config(path: str | Path, root: Path) -> dict:
    """The tier file `path` (relative to `root`, the checkout) validated as it was at the commit
    that trained the tier's committed reference (its tables' git_commit); today's file when the
    reference records no single commit, or where the checkout has no git history of it (said on
    stderr; rejudge's hash check then names what is wrong)."""
    whole = load(root / path)
    ref = root / reference_dir(whole["tier"])
    cfg = artifacts.report_config(whole)
    tables = {k: str(ref / Path(v).name) for k, v in artifacts.report_tables(cfg).items()}
    trained = trained_commits(tables)
    if len(trained) != 1:
        return whole
    try:
        return validate(read_tier_at(path, trained[0].removesuffix("-dirty"), root))
    except ConfigError as err:  # no git history here (a copy, a shallow clone): today's file,
        print(f"{err}; judging with today's {path}", file=sys.stderr)  # which rejudge's hash
        return whole  # check then refuses where it is not the reference's


def rejudge(whole: dict, root: Path, allow_dirty: bool = False) -> pd.DataFrame:
    """Rewrite reference/<tier>/'s REPORT.md, REPORT.html and verdicts.csv from its tables;
    returns the new verdict rows. Raises SystemExit naming what is wrong: no reference, a dirty
    checkout, tables of another config or of several commits."""
    # the slice as the workflow's report rule passes it (JSON with sorted keys: the variants, and
    # so the report's rows, in the order a run of the tier gives them)
    cfg = json.loads(to_json(artifacts.report_config(whole)))
    ref = root / reference_dir(cfg["tier"])
    old = ref / artifacts.VERDICTS
    if not old.is_file():
        raise SystemExit(f"{old}: no committed reference to judge again")
    judging = provenance.git_commit()
    if judging.endswith("-dirty") and not allow_dirty:
        raise SystemExit(
            f"the checkout has uncommitted changes ({judging}): commit them first, so "
            "that the verdicts name the code that judged them"
        )
    paths = {k: str(ref / Path(v).name) for k, v in artifacts.report_tables(cfg).items()}
    trained = trained_commits(paths)
    if len(trained) != 1:
        raise SystemExit(
            f"{ref}: its tables were made at {trained or 'no recorded commit'}; a "
            "reference is one run of one commit"
        )
    before = pd.read_csv(old, dtype=str)
    hashes = set(before["config_hash"].dropna())
    mine = provenance.record(cfg, cfg["seed"])["config_hash"]
    if hashes != {mine}:
        raise SystemExit(
            f"{old}: made with config hash {sorted(hashes)}, this config's is {mine}: "
            "judge it with the config it was run with"
        )
    figures = sorted(p.name for p in ref.glob("*.png"))
    was = sorted(set(before["git_commit"].dropna()))
    judged = (
        f"Trained at commit `{trained[0]}`; judged again at commit `{judging}` by "
        "`lengen.report.rejudge` (today's rules and statistics on the committed tables, no "
        f"model retrained; the verdicts it replaces were judged at `{', '.join(was)}`)."
    )
    cfg = {**cfg, "reports_dir": str(reference_dir(cfg["tier"]))}
    with tempfile.TemporaryDirectory() as tmp:
        previous = Path(tmp) / "previous_verdicts.csv"
        shutil.copy(old, previous)
        out = Path(tmp) / "out"
        out.mkdir()
        rows = report.write_report(
            cfg,
            out / artifacts.REPORT,
            paths,
            previous,
            f"the verdicts these tables had before (judged at `{', '.join(was)}`)",
            figures,
            judged=judged,
            trained_at=trained[0],
        )
        # a reference is one run of one commit: its verdicts keep the commit that trained as
        # `git_commit` and name the judging code's as `judged_at`
        verdicts = pd.read_csv(out / artifacts.VERDICTS, dtype=str)
        verdicts = verdicts.assign(
            **{provenance.JUDGED_AT: verdicts["git_commit"]}, git_commit=trained[0]
        )
        verdicts.to_csv(out / artifacts.VERDICTS, index=False)
        for name in (
            artifacts.REPORT,
            artifacts.REPORT_HTML,
            artifacts.VERDICTS,
            artifacts.RUNS_FIGURE,
        ):
            shutil.copy(out / name, ref / name)
    redraw(whole, ref, figures, trained[0])
    return rows


def redraw(whole: dict, ref: Path, names: list[str], trained_at: str) -> None:
    """Draw the reference's figures (`names`, its PNG files) again from its committed tables:
    each figure job of the tier (lengen.report.figures.figure_job) with the tidy table in place
    of the per-model eval tables it reads in a run (the same rows: the run's `run` ids); each
    PNG keeps the commit that trained (`trained_at`) and names the drawing code's."""
    from lengen.core.provenance import DTYPES
    from lengen.report import figures as drawing

    for stem in artifacts.drawn_figures(whole):
        if f"{stem}.png" not in names:
            continue
        job = drawing.figure_job(whole, stem)
        args = drawing.cli_parser().parse_args(
            [job.kind, *job.args, "--out", str(ref / f"{stem}.png")]
        )
        reads = drawing.KINDS[job.kind].reads
        if reads == "nothing":
            table = pd.DataFrame()
        elif reads == "eval":  # results/<tier>/<task>/<variant>/<model>/<seed>/eval.csv
            runs = {"/".join(Path(p).parts[-4:-1]) for p in job.tables}
            tidy = ref / Path(artifacts.table(whole, job.section)).name
            table = pd.read_csv(tidy, dtype=DTYPES)
            table = table[table.run.astype(str).isin(runs)]
        else:
            table = pd.concat(
                [pd.read_csv(ref / Path(p).name, dtype=DTYPES) for p in job.tables],
                ignore_index=True,
            )
        drawing.render(args, table, trained_at)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: python -m lengen.report.rejudge --configfile config/<tier>.yaml."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument("--configfile", required=True, help="the tier's whole config YAML")
    parser.add_argument("--project", type=Path, default=Path("."), help="the checkout's root")
    parser.add_argument("--allow-dirty", action="store_true")
    args = parser.parse_args(argv)
    whole = trained_config(args.configfile, args.project)
    if missing := floats.unpinned():
        raise SystemExit(
            f"{', '.join(missing)} not set: this shell's CPU kernels may sum in another order "
            "than the reference's, and move its numbers' last digits; run "
            'eval "$(python -m lengen.core.floats)" first'
        )
    rows = rejudge(whole, args.project, args.allow_dirty)
    print(report.summary(rows), file=sys.stderr)


if __name__ == "__main__":
    main()
