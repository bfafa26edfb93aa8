"""Rewrite every file the tests hold to the code, after a change meant to change them (a new
task, scheme, figure, claim or config key: docs/extending.md):

    python tools/regenerate.py                     # the fast ones (about a minute)
    python tools/regenerate.py --smoke-reference   # and reference/smoke/, from a smoke run

- config/README.md's table of keys (`python -m lengen.config.keys`);
- docs/rules.md's table of rules (`python -m lengen.report.rules`);
- README.md's verdict block (tools/readme_verdicts.py) and its Tiers table's peak disk, each
  tier's as `python -m lengen.config.config` estimates it (what follows, a measurement, kept);
- the Python's layout (imports sorted, `ruff format`, on the folders the tests hold to it);
- tests/golden/plans/<tier>.json, every tier's planned jobs (tools/planned_jobs.py, on a
  simulated machine of 8 GPUs, as the test plans them);
- with --smoke-reference: reference/smoke/, the smoke tier run from scratch and refreshed
  (lengen.report.refresh: commit first, the reference names its commit).

Read the diff before committing: each file changes only where what runs changed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPUS = ",".join(map(str, range(8)))  # the golden plans' machine (tests/test_plan.py)


def run(*cmd: str, **env: str) -> str:
    """A command in the project root; its stdout (its stderr passes through)."""
    proc = subprocess.run(
        cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, text=True, check=True
    )
    return proc.stdout


def replace_table(path: Path, header: str, table: str) -> None:
    """Replace the markdown table that starts at `header` in `path` by `table`."""
    text = path.read_text()
    start = text.index(header)
    end = re.compile(r"\n(?!\|)").search(text, start)
    text = text[:start] + table.strip() + (text[end.start() :] if end else "\n")
    path.write_text(text)


def replace_block(path: Path, begin: str, end: str, body: str) -> None:
    """Replace what lies between the lines starting `begin` and `end` in `path` by `body`."""
    text = path.read_text()
    i = text.index(begin)
    i = text.index("\n", i) + 1
    j = text.index(end, i)
    path.write_text(text[:i] + body.strip() + "\n" + text[j:])


PYTHON = ("src", "tests", "tools", "probes", "benchmarks")  # laid out by ruff format
# a Tiers row of README.md: | tier | `config/<tier>.yaml` | hardware | peak disk | ...
TIER_ROW = re.compile(r"^(\| [\w-]+ \| `(config/[\w-]+\.yaml)` \| [^|]+ \| )([^|]+?)( \|.*)$", re.M)
ESTIMATE = re.compile(r"^~[\d.]+ [KMGT]?B(, \+[\d.]+ [KMGT]?B a training job beside the first)?")


def peak_disk(config: Path) -> str:
    """A tier's peak disk as README's Tiers table states it (lengen.config.config.disk_mb): the
    total, and a training job's checkpoints where they reach a GB."""
    from lengen.config.config import disk_mb, gb, load

    disk = disk_mb(load(config))
    text = f"~{gb(disk['total'])}"
    if disk["checkpoints"] >= 1024:
        text += f", +{gb(disk['checkpoints'])} a training job beside the first"
    return text


def rewrite_peak_disk(readme: Path) -> None:
    """Each Tiers row's peak disk cell to the code's estimate, what follows it kept."""

    def cell(m: re.Match) -> str:
        old = m[3]
        rest = old[ESTIMATE.match(old).end() :] if ESTIMATE.match(old) else ""
        return m[1] + peak_disk(ROOT / m[2]) + rest + m[4]

    readme.write_text(TIER_ROW.sub(cell, readme.read_text()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--smoke-reference",
        action="store_true",
        help="also run the smoke tier from scratch and refresh reference/smoke/",
    )
    args = parser.parse_args(argv)
    py = sys.executable
    replace_table(
        ROOT / "config" / "README.md", "| key | type |", run(py, "-m", "lengen.config.keys")
    )
    replace_block(
        ROOT / "docs" / "rules.md",
        "<!-- rules: begin",
        "<!-- rules: end -->",
        run(py, "-m", "lengen.report.rules"),
    )
    run(py, "tools/readme_verdicts.py", "--write")
    rewrite_peak_disk(ROOT / "README.md")
    run(py, "-m", "ruff", "check", "--select", "I", "--fix", "--quiet", *PYTHON)  # imports
    run(py, "-m", "ruff", "format", "--quiet", *PYTHON)
    run(py, "tools/planned_jobs.py", "--write", LENGEN_GPUS=GPUS)
    if args.smoke_reference:
        shutil.rmtree(ROOT / "results" / "smoke", ignore_errors=True)
        shutil.rmtree(ROOT / "reports" / "smoke", ignore_errors=True)
        run(py, "-m", "snakemake", "--cores", "all", "--configfile", "config/smoke.yaml")
        run(py, "-m", "lengen.report.refresh", "--configfile", "config/smoke.yaml")
    print(
        "rewritten: config/README.md, docs/rules.md, README.md's verdicts and peak disk, "
        "tests/golden/plans/, the Python's layout"
        + (", reference/smoke/" if args.smoke_reference else "")
    )


if __name__ == "__main__":
    main()
