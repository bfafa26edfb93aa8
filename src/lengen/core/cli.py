"""The command-line front of every `python -m lengen.<module>` tool: one parser convention."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys


def command_parser(spec, doc: str | None) -> argparse.ArgumentParser:
    """An argparse parser whose usage line says `python -m <module>` (the module's __spec__; its
    file name otherwise) and whose description is the module docstring's first paragraph, whole
    (not its first line, cut mid-sentence)."""
    prog = f"python -m {spec.name}" if spec is not None else None
    return argparse.ArgumentParser(prog=prog, description=first_paragraph(doc))


def first_paragraph(doc: str | None) -> str:
    """A docstring's first paragraph, whole, on one line (argparse wraps it)."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


class KnownError(Exception):
    """An error whose message already says what is wrong, naming the file or key, and what to
    do. A tool's `main` (wrapped by `one_line_errors`) ends on one as one line, without a
    traceback; every other error keeps its traceback. The pipeline's own error classes
    (ConfigError, SpecError, TableError, UnreadableState, NoSpace, ...) derive from it."""


ERROR_FD = "LENGEN_ERROR_FD"  # a file descriptor the line goes to as well (the workflow's jobs:
# Snakemake's own stderr, so a job's error shows where Snakemake reports it, even when the job's
# log sits on a full disk; workflow/rules/common.smk opens it)
EXIT_KNOWN = 2  # a known error's exit status (argparse's for a bad argument)


def error_line(err: BaseException) -> str:
    """A known error as one line: its class and its message, whitespace folded."""
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


def one_line_errors(main):
    """Wrap a tool's `main`: a KnownError is printed as one line on stderr (and on the
    LENGEN_ERROR_FD descriptor, when set) and exits EXIT_KNOWN; anything else raises as before."""

    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except KnownError as err:
            line = error_line(err)
            print(line, file=sys.stderr, flush=True)
            fd = os.environ.get(ERROR_FD, "")
            if fd.isdigit():
                with contextlib.suppress(OSError):  # closed, or a broken pipe: stderr has it
                    os.write(int(fd), (line + "\n").encode())
            raise SystemExit(EXIT_KNOWN) from None

    return wrapped


def json_object(text: str) -> dict:
    """An argparse `type` for an argument that is a JSON object (a config slice the workflow
    passes): parsed, or argparse's one-line error saying what is wrong with it."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err.msg} at character {err.pos}): "
                                         f"{text[:80]!r}") from None  # fmt: skip
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"not a JSON object ({{...}}): {text[:80]!r}")
    return value
