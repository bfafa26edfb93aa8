"""The command-line front of every `python -m lengen.<module>` tool: one parser convention."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import gc
import json
import os
import sys


def command_parser(spec, doc: str | None) -> argparse.ArgumentParser:
    """An argparse parser whose usage line says `python -m <module>` (the module's __spec__; its
    file name otherwise) and whose description is the module docstring's first paragraph, whole
    (not its first line, cut mid-sentence)."""
    prog = f"python -m {spec.name}" if spec is not None else None
    return argparse.ArgumentParser(prog=prog, description=first_paragraph(doc))


class HelpDefaults(argparse.HelpFormatter):
    """argparse help that states each option's default where it has one (not None or False)
    and its help does not say it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        unset = default is None or default is False or default == argparse.SUPPRESS
        if action.option_strings and not unset and "default" not in text:
            text += " (default: %(default)s)"
        return text


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


def say(line: str) -> None:
    """A job's closing line, on the LENGEN_ERROR_FD descriptor when set (Snakemake's own output,
    where it reports the job) and on stderr (its log). The descriptor first: a log on a full
    disk (whose write fails) must not keep the line from Snakemake's output."""
    fd = os.environ.get(ERROR_FD, "")
    if fd.isdigit():
        with contextlib.suppress(OSError):  # closed, or a broken pipe: stderr has it
            os.write(int(fd), (line + "\n").encode())
    with contextlib.suppress(OSError):  # the log's disk full: the descriptor has it
        print(line, file=sys.stderr, flush=True)


# Functions that recognise a library's error as a known fault (a full SQLite store:
# lengen.core.tracking) and give the KnownError that says it, else None; a module that brings
# the library in registers its own (`recognises`)
_RECOGNISERS: list = []


def recognises(fn):
    """Register `fn(err) -> KnownError | None` with one_line_errors."""
    _RECOGNISERS.append(fn)
    return fn


def known(err: BaseException) -> KnownError | None:
    """`err` as a KnownError: itself, or what a registered recogniser makes of it."""
    if isinstance(err, KnownError):
        return err
    return next((k for fn in _RECOGNISERS if (k := fn(err)) is not None), None)


@functools.cache  # once per process, however many tools it runs
def quick_exit() -> None:
    """From now on, the process's exit skips the garbage collector's passes over the objects
    alive at exit (gc.freeze, the last thing before the interpreter tears its modules down; it
    still frees what reference counting frees, so every file is closed and flushed as before).
    A job that imported torch, MLflow and DeepSpeed spent 1-2 s in those passes after its work
    was done (benchmarks/job_phases.py)."""
    atexit.register(gc.freeze)  # atexit runs last-registered first, after every thread ended


def one_line_errors(main):
    """Wrap a tool's `main`: a KnownError (or an error a recogniser knows) is said as one line
    (`say`) and exits EXIT_KNOWN; anything else raises as before. The process's exit is quick
    (`quick_exit`)."""

    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        quick_exit()
        try:
            return main(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - recognised, or raised again as it was
            found = known(err)
            if found is None:
                raise
            say(error_line(found))
            raise SystemExit(EXIT_KNOWN) from None

    return wrapped


def json_object(text: str) -> dict:
    """An argparse `type` for an argument that is a JSON object (a config slice the workflow
    passes): parsed, or argparse's one-line error saying what is wrong with it."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(
            f"not JSON ({err.msg} at character {err.pos}): {text[:80]!r}"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"not a JSON object ({{...}}): {text[:80]!r}")
    return value
