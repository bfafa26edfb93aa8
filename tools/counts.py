"""The counts README.md and docs/ state (runs, jobs, tests), from one registry:
benchmarks/measured/counts.yaml. Each entry is computed where the repository knows it (a rule's
constant, a tier's config, a tier's planned jobs, the last match in a committed log) or is a
recorded count (its date and how it was counted). `python tools/counts.py --write` writes every
`<!-- n:KEY -->...<!-- /n -->` span, as tools/times.py writes the times.

    python tools/counts.py           # print each key and its value
    python tools/counts.py --write   # rewrite the spans

tests/test_docs.py fails when a span differs from what this writes, when a key has no span, when
a span names no key, and when README.md or docs/ state a number of hours, minutes, jobs, tests
or runs outside a generated span (issue 65: one fact, one number)."""

from __future__ import annotations

import argparse
import importlib
import json
import re
from pathlib import Path

import yaml
from spans import ROOT, Spans

from lengen.config import plan
from lengen.config.config import load as load_config

COUNTS = "benchmarks/measured/counts.yaml"
SPANS = Spans("n", COUNTS)
# every generated part of a document: a span of any tool (`<!-- time:K -->`, `<!-- n:K -->`,
# `<!-- ref:... -->` ... `<!-- /time -->`) or a block (`<!-- NAME begin ... -->` ... `end -->`)
GENERATED = re.compile(
    r"<!-- (\w+):[^>]*-->.*?<!-- /\1 -->|<!-- [^>]*\bbegin\b[^>]*-->.*?<!-- [^>]*\bend -->", re.S
)
# a number of hours, minutes, jobs, tests or runs (a range, "~", thousands separators included)
NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
TYPED = re.compile(
    rf"(?<![\w.\-/=#])~?(?:{NUMBER})(?:\s?[-/]\s?(?:{NUMBER}))?"
    r"\s?(?:h|hours?|min|minutes?|jobs?|tests|runs?)\b"
)


def load(root: Path = ROOT) -> dict[str, dict]:
    """The registry: key -> entry."""
    return yaml.safe_load((root / COUNTS).read_text())


def value(entry: dict, root: Path = ROOT) -> int:
    """An entry's number: `python` (module:ATTRIBUTE, a rule's constant), `plan` (a tier's
    planned jobs: the rule jobs of tests/golden/plans/<tier>.json, which tests/test_workflow.py
    keeps equal to Snakemake's dry run), `log` + `pattern` (the first group of the pattern's last
    match in a committed log), `config` + `key` (a dotted key of a tier's YAML) or `value` (a
    recorded count); `config` + `count` (`runs`: a tier's synthetic training runs;
    `training_jobs`: the jobs that train them, a fused group one job)."""
    if "python" in entry:
        module, attr = entry["python"].split(":")
        return int(getattr(importlib.import_module(module), attr))
    if "plan" in entry:
        return len(json.loads((root / "tests" / "golden" / "plans" / f"{entry['plan']}.json")
                              .read_text()))  # fmt: skip
    if "log" in entry:
        found = re.findall(entry["pattern"], (root / entry["log"]).read_text())
        if not found:
            raise ValueError(f"{COUNTS}: {entry['log']} has no match of {entry['pattern']!r}")
        return int(found[-1])
    if "count" in entry:  # a tier's synthetic training runs, or the jobs that train them
        jobs = plan.training_jobs(load_config(root / entry["config"]))
        return len(jobs) if entry["count"] == "training_jobs" else sum(map(len, jobs.values()))
    if "config" in entry:
        node = yaml.safe_load((root / entry["config"]).read_text())
        for part in entry["key"].split("."):
            node = node[part]
        return int(node)
    return int(entry["value"])


def texts(root: Path = ROOT) -> dict[str, str]:
    return {key: f"{value(entry, root):,}" for key, entry in load(root).items()}


def typed(doc: str) -> list[tuple[int, str]]:
    """(line, text) of each number of hours, minutes, jobs, tests or runs outside generated
    spans and blocks."""
    blank = GENERATED.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), doc)
    return [(doc.count("\n", 0, m.start()) + 1, m[0]) for m in TYPED.finditer(blank)]


def problems(root: Path = ROOT) -> list[str]:
    """What differs: a span's value, an unknown key, a key with no span."""
    return SPANS.problems(texts(root), root)


def write(root: Path = ROOT) -> None:
    SPANS.write(texts(root), root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the spans")
    if parser.parse_args().write:
        write()
    else:
        for key, shown in texts().items():
            print(f"{key}: {shown}")


if __name__ == "__main__":
    main()
