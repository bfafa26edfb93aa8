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

import yaml

from lengen.config import artifacts
from lengen.config.config import validate
from lengen.report import report

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- verdicts: begin (tools/readme_verdicts.py) -->", "<!-- verdicts: end -->"


def block(root: Path = ROOT) -> str:
    """The README block: the summary of the default config's rules on reference/default/."""
    whole = validate(yaml.safe_load((root / "config" / "config.yaml").read_text()))
    cfg = artifacts.report_config(whole)
    ref = root / "reference" / "default"
    paths = {k: str(ref / Path(v).name) for k, v in artifacts.report_tables(cfg).items()}
    with tempfile.TemporaryDirectory() as tmp:
        rows = report.write_report(cfg, Path(tmp) / "REPORT.md", paths, None, None, [])
    first, rest = report.summary(rows).split("\n", 1)  # the tally, wrapped as README's prose
    return "\n".join([BEGIN, textwrap.fill(first, 100), rest, END])


def replaced(text: str, new: str) -> str:
    """README text with its block replaced by `new`."""
    head, rest = text.split(BEGIN, 1)
    return head + new + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python tools/readme_verdicts.py",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--write", action="store_true", help="replace the block in README.md")
    args = parser.parse_args(argv)
    new = block()
    if args.write:
        readme = ROOT / "README.md"
        readme.write_text(replaced(readme.read_text(), new))
    else:
        print(new)


if __name__ == "__main__":
    main()
