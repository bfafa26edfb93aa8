"""One workflow writes a results folder at a time. Snakemake's own lock lives in each checkout's
.snakemake folder, so two checkouts (or two copies of one) given the same `results_dir` once ran
every job twice into it, and MLflow held each metric twice. The workflow takes this lock when it
starts executing jobs (the Snakefile's onstart; a dry run takes none) and gives it back when it
ends; a second workflow is refused, naming the first.

The lock is results_dir/.lengen-writer (JSON: host, process id, checkout, start time), created
atomically whole (written beside it, then hard-linked into place: a kill cannot leave it cut). A
lock whose process is gone from this host (a kill -9, a lost terminal) is taken over, saying so,
and so is an empty or unreadable one (no holder to name: cut by a kill under older code); one held
from another host cannot be checked from here: the message says whose it is and to delete the
file only once that workflow has stopped.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from lengen.core.cli import KnownError

LOCK = ".lengen-writer"


class ResultsLocked(KnownError, RuntimeError):
    """Another workflow is writing the results folder: the message names it."""


class ResultsUnwritable(KnownError, OSError):
    """The results folder cannot be made or written (no write access, a full disk)."""


def _unwritable(folder: Path, err: OSError) -> ResultsUnwritable:
    why = {13: "no write access", 28: "its disk is full", 30: "a read-only file system"}
    return ResultsUnwritable(
        f"{folder}: the workflow cannot write its results there ({why.get(err.errno, err.strerror)}"
        f": {err.filename or folder}): give `results_dir` a folder you can write, or free space "
        "there"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def claim(results_dir: str | Path, checkout: str | Path) -> str | None:
    """Take the results folder's lock for this process; ResultsLocked naming the holder if a
    live workflow holds it. A line to print when a dead holder's lock was taken over, else None."""
    folder = Path(results_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _unwritable(folder, err) from None
    path = folder / LOCK
    me = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "checkout": str(Path(checkout).resolve()),
        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    note = None
    for _ in range(2):
        try:
            created = _create(path, me)
        except OSError as err:  # no write access, a full disk: named, nothing left behind
            raise _unwritable(folder, err) from None
        if created:
            return note
        holder = _holder(path)
        if holder is None:  # empty or unreadable: no workflow to name, nothing to wait for
            path.unlink(missing_ok=True)
            note = f"{path}: empty or unreadable (cut by a kill); this workflow takes the folder"
            continue
        if holder.get("host") == me["host"] and holder.get("pid") == me["pid"]:
            return None  # this workflow's own (taken once already)
        if holder.get("host") == me["host"] and not _alive(int(holder.get("pid", -1))):
            path.unlink(missing_ok=True)
            note = (
                f"{path}: its workflow (process {holder.get('pid')}, checkout "
                f"{holder.get('checkout')}) is gone; this one takes the results folder"
            )
            continue
        raise ResultsLocked(
            f"{folder} is being written by another workflow (host {holder.get('host')}, "
            f"process {holder.get('pid')}, checkout {holder.get('checkout')}, since "
            f"{holder.get('since')}): wait for it to end, or give this one another "
            f"`results_dir`; if that workflow has stopped, delete {path}"
        )
    raise ResultsLocked(f"{path}: could not be taken (another workflow took it meanwhile)")


def _create(path: Path, holder: dict) -> bool:
    """Create the lock file whole, or find it there (False): its content is written to a file
    of this process's beside it, then hard-linked to its name, which fails if the name exists."""
    part = path.with_name(f"{path.name}.{holder['pid']}.part")
    try:
        part.write_text(json.dumps(holder))  # a full disk fails here: the part goes too
        os.link(part, path)
    except FileExistsError:
        return False
    finally:
        part.unlink(missing_ok=True)
    return True


def release(results_dir: str | Path) -> None:
    """Give the lock back, if this process holds it."""
    path = Path(results_dir) / LOCK
    holder = (_holder(path) if path.exists() else None) or {}
    if holder.get("host") == socket.gethostname() and holder.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def _holder(path: Path) -> dict | None:
    """The lock's holder, or None where the file is empty or unreadable (or gone meanwhile)."""
    try:
        holder = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) and "pid" in holder else None
