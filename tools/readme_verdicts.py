"""README's verdict block, from committed data: today's rules (lengen.report.report) applied to
the committed default reference's tables (reference/default/*.csv).

    python tools/readme_verdicts.py           # print the block
    python tools/readme_verdicts.py --write   # replace it in README.md

tests/test_docs.py fails when README.md's block differs from what this prints."""

from __future__ import annotations

import argparse
import tempfile
import textwrap
from pathlib import Path

from lengen.config import artifacts
from lengen.report import report
from lengen.report.rejudge import trained_config

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- verdicts: begin (tools/readme_verdicts.py) -->", "<!-- verdicts: end -->"
# the first screen's count of what each column decides (the block's first line)
TALLY_BEGIN, TALLY_END = "<!-- tally: begin (tools/readme_verdicts.py) -->", "<!-- tally: end -->"


def summary(root: Path = ROOT) -> str:
    """The summary of today's rules on reference/default/ (report.summary), with the default
    tier's config as the reference was made with it (rejudge.trained_config)."""
    whole = trained_config("config/config.yaml", root)
    cfg = artifacts.report_config(whole)
    ref = root / "reference" / "default"
    paths = {k: str(ref / Path(v).name) for k, v in artifacts.report_tables(cfg).items()}
    with tempfile.TemporaryDirectory() as tmp:
        rows = report.write_report(cfg, Path(tmp) / "REPORT.md", paths, None, None, [])
    return report.summary(rows)


def block(root: Path = ROOT, text: str | None = None) -> str:
    """The README block: the summary, its tally wrapped as README's prose."""
    first, rest = (text or summary(root)).split("\n", 1)
    return "\n".join([BEGIN, textwrap.fill(first, 100), rest, END])


def tally(root: Path = ROOT, text: str | None = None) -> str:
    """The first screen's tally: how many sentences each column decides (the summary's first
    line), between its markers."""
    first = (text or summary(root)).split("\n", 1)[0]
    return "\n".join([TALLY_BEGIN, textwrap.fill(first, 100), TALLY_END])


def replaced(text: str, new: str, begin: str = BEGIN, end: str = END) -> str:
    """README text with the block between `begin` and `end` replaced by `new`."""
    head, rest = text.split(begin, 1)
    return head + new + rest.split(end, 1)[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python tools/readme_verdicts.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--write", action="store_true", help="replace the block in README.md")
    args = parser.parse_args(argv)
    text = summary()
    new, first = block(text=text), tally(text=text)
    if args.write:
        readme = ROOT / "README.md"
        readme.write_text(
            replaced(replaced(readme.read_text(), new), first, TALLY_BEGIN, TALLY_END)
        )
    else:
        print(first, new, sep="\n\n")


if __name__ == "__main__":
    main()
