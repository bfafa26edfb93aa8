"""Generated spans of README.md and docs/*.md: `<!-- TAG:KEY -->VALUE<!-- /TAG -->`, whose VALUE
a tool writes from its committed registry, one reader, checker and writer for each:

    tools/times.py   TAG time   benchmarks/measured/times.yaml
    tools/counts.py  TAG n      benchmarks/measured/counts.yaml

tests/test_docs.py fails on any span that differs from what its tool writes (`problems`)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def documents(root: Path = ROOT) -> list[Path]:
    """What the spans stand in: README.md and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


class Spans:
    """The spans of one tag, whose values come from `registry` (a path, for messages)."""

    def __init__(self, tag: str, registry: str):
        self.tag, self.registry = tag, registry
        self.pattern = re.compile(rf"<!-- {tag}:(\w+) -->(.*?)<!-- /{tag} -->", re.S)

    def rewritten(self, doc: str, values: dict[str, str]) -> str:
        """`doc` with every span's value (an unknown key left as it is, for `problems`)."""
        tag = self.tag
        return self.pattern.sub(
            lambda m: f"<!-- {tag}:{m[1]} -->{values.get(m[1], m[2])}<!-- /{tag} -->", doc
        )

    def problems(self, values: dict[str, str], root: Path = ROOT) -> list[str]:
        """What differs: a span's value, a span naming no key, a key with no span."""
        used, out = set(), []
        for path in documents(root):
            for key, shown in self.pattern.findall(path.read_text()):
                used.add(key)
                if key not in values:
                    out.append(f"{path.name}: <!-- {self.tag}:{key} --> names no key of "
                               f"{self.registry}")  # fmt: skip
                elif shown != values[key]:
                    out.append(f"{path.name}: {key} reads {shown!r}, {self.registry} gives "
                               f"{values[key]!r}")  # fmt: skip
        return out + [f"{self.registry}: {key} appears in no document"
                      for key in values if key not in used]  # fmt: skip

    def write(self, values: dict[str, str], root: Path = ROOT) -> None:
        """Every document's spans rewritten."""
        for path in documents(root):
            path.write_text(self.rewritten(path.read_text(), values))
