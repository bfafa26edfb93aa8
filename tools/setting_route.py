"""The files a config setting crosses from a tier YAML to the optimizer, measured: the tier
YAML that sets it, then every file a training job runs (lengen.config.code.closure of
lengen.train.train, with that task's module alone, as the job's code hash counts it) whose code
names the setting (`names`: a field, an attribute such as `spec.train.lr`, a keyword, a string
that is the key alone; comments, docstrings and local variables do not count). The files that
carry the run's spec whole (the rule, the plan, a task's train_spec) name no setting and are
not on it.

    python tools/setting_route.py lr                  # every task's route
    python tools/setting_route.py steps --task sparse_parity

docs/extending.md's route rows quote it; tests/test_tools.py holds `lr` and `steps` to at most 4
files for every task.
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from pathlib import Path

from lengen import tasks
from lengen.config.code import PACKAGE, closure, other_tasks

YAML = "config/<tier>.yaml"


def names(source: str, setting: str) -> list[int]:
    """The lines where a file's code names `setting`: in Python, a dataclass field, an attribute
    (`spec.train.lr`), a keyword argument or a string that is the key alone (not a local
    variable of that name, a comment or a docstring); in a Snakemake file, which Python cannot
    parse, a name or such a string token."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a Snakefile / .smk: its tokens
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        return sorted(
            {
                t.start[0]
                for t in tokens
                if (t.type == tokenize.NAME and t.string == setting)
                or (t.type == tokenize.STRING and t.string.strip("\"'") == setting)
            }
        )
    return sorted(
        {
            node.lineno
            for node in ast.walk(tree)
            if (isinstance(node, ast.Attribute) and node.attr == setting)
            or (isinstance(node, ast.keyword) and node.arg == setting)
            or (isinstance(node, ast.Constant) and node.value == setting)
            or (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == setting
            )
        }
    )


def route(setting: str, task: str) -> dict[str, list[int]]:
    """The route of `setting` for one task's training job: the YAML, then file -> lines."""
    out = {YAML: []}
    for path in closure("lengen.train.train", skip=other_tasks(task)):
        lines = names(path.read_text(), setting)
        if lines:
            out[str(Path("src/lengen") / path.relative_to(PACKAGE))] = lines
    return out


def main(argv: list[str] | None = None) -> None:
    """CLI: print each task's route of a setting, a file per line, and its length."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("setting", help="a setting's key, e.g. lr")
    parser.add_argument("--task", choices=sorted(tasks.REGISTRY), help="one task (default: all)")
    args = parser.parse_args(argv)
    for task in [args.task] if args.task else sorted(tasks.REGISTRY):
        found = route(args.setting, task)
        print(f"{args.setting} ({task}): {len(found)} files")
        for file, lines in found.items():
            print(f"  {file}" + (f"  lines {', '.join(map(str, lines))}" if lines else ""))


if __name__ == "__main__":
    main()
