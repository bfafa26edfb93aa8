"""A hash of the code a job runs, for the workflow's rules: Snakemake's own code trigger sees a
rule's shell line, not the modules it runs, so a changed task module would rerun nothing.

A rule runs `python -m lengen.<entry>`; `code_hash(entry)` hashes every lengen module that entry
imports, transitively (found by reading the sources' `import` statements, function-local ones
included, without importing anything: planning a run imports no torch), each as its syntax tree
with docstrings and config keys' docs (`setting(doc=...)`, lengen.core.settings) dropped. A
comment, a docstring, a key's doc or a blank line changes no hash; a changed
statement in any module the job runs changes its rule's params, and Snakemake reruns the job
(docs/recovery.md). A job of one task (a training, an evaluation) hashes its own task module, not
the others the task registry imports (`code_hash(entry, task=...)`).
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # src/lengen


def module_file(name: str, root: Path = PACKAGE) -> Path | None:
    """The source file of lengen module `name` (a package's __init__.py) under `root` (the
    package's folder), None if there is none (a name imported from a module, e.g.
    lengen.core.batch.IGNORE)."""
    parts = name.split(".")[1:]
    base = root.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported(path: Path, root: Path = PACKAGE) -> set[str]:
    """The lengen modules a source file imports (anywhere in it), and its package's __init__."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("lengen")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lengen"):
            for alias in node.names:  # `from lengen.x import y`: y a module, or a name in x
                sub = f"{node.module}.{alias.name}"
                found.add(sub if module_file(sub, root) else node.module)
    return {m for m in found if module_file(m, root)}


@cache
def closure(
    entry: str, root: Path = PACKAGE, skip: frozenset[Path] = frozenset()
) -> tuple[Path, ...]:
    """Every lengen source file `python -m <entry>` runs: the entry, what it imports,
    transitively, and each module's enclosing packages (but the files in `skip`, and what only
    they import)."""
    todo, seen = [entry], set()
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(2, len(parts) + 1):  # lengen.a.b also runs lengen.a's __init__
            parent = ".".join(parts[:i])
            path = module_file(parent, root)
            if path is not None and path not in seen and path not in skip:
                seen.add(path)
                todo += sorted(imported(path, root))
    return tuple(sorted(seen))


def other_tasks(task: str, root: Path = PACKAGE) -> frozenset[Path]:
    """The task modules a job of `task` (an experiment: lengen.tasks.<task>) never calls: every
    other tasks/<name>.py that its own module does not import. The task registry imports them
    all, but a job runs its own task's code (and the shared tasks.base) alone."""
    if module_file(f"lengen.tasks.{task}", root) is None:
        raise ValueError(f"no task module lengen.tasks.{task} under {root}")
    folder = root / "tasks"  # what the task module imports, not through the registry's __init__
    own = set(closure(f"lengen.tasks.{task}", root, frozenset({folder / "__init__.py"})))
    return frozenset(
        p for p in folder.glob("*.py") if p.stem not in ("__init__", "base") and p not in own
    )


def normalized(path: Path) -> str:
    """A source file's syntax tree without docstrings: what runs, not how it is written."""
    return _normalized(path.read_text(), str(path))


@cache
def _normalized(source: str, name: str) -> str:
    """normalized's work, once per distinct source text: a task's rules ask code_hash once per
    job (the hash depends on the job's experiment), and parsing every module again for each of
    a paper tier's ~300 jobs made `snakemake -n` take ~25 s longer."""
    tree = ast.parse(source, name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setting"
        ):  # a config key's doc: config/README.md's words
            node.keywords = [k for k in node.keywords if k.arg != "doc"]
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False)


def code_hash(entry: str, root: Path = PACKAGE, task: str | None = None) -> str:
    """Short hash of the code `python -m <entry>` runs (closure, normalized); for a job of one
    task (`task`, its experiment), without the other task modules (other_tasks): a change to
    sparse parity's labels reruns sparse parity's jobs, not the language model's."""
    digest = hashlib.sha256()
    skip = other_tasks(task, root) if task else frozenset()
    for path in closure(entry, root, skip):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(normalized(path).encode())
    return digest.hexdigest()[:12]
