"""The command-line front of every `python -m lengen.<module>` tool: one parser convention."""

from __future__ import annotations

import argparse


def command_parser(spec, doc: str | None) -> argparse.ArgumentParser:
    """An argparse parser whose usage line says `python -m <module>` (the module's __spec__; its
    file name otherwise) and whose description is the module docstring's first paragraph, whole
    (not its first line, cut mid-sentence)."""
    prog = f"python -m {spec.name}" if spec is not None else None
    return argparse.ArgumentParser(prog=prog, description=first_paragraph(doc))


def first_paragraph(doc: str | None) -> str:
    """A docstring's first paragraph, whole, on one line (argparse wraps it)."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())
