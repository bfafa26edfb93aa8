"""One workflow writes a results folder at a time. Snakemake's own lock lives in each checkout's
.snakemake folder, so two checkouts (or two copies of one) given the same `results_dir` once ran
every job twice into it, and MLflow held each metric twice. The workflow takes this lock when it
starts executing jobs (the Snakefile's onstart; a dry run takes none) and gives it back when it
ends; a second workflow is refused, naming the first.

The lock is results_dir/.lengen-writer (JSON: host, process id, checkout, start time), created
atomically. A lock whose process is gone from this host (a kill -9, a lost terminal) is taken
over, saying so; one held from another host cannot be checked from here: the message says whose
it is and to delete the file only once that workflow has stopped.
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
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    me = {"host": socket.gethostname(), "pid": os.getpid(),
          "checkout": str(Path(checkout).resolve()),
          "since": time.strftime("%Y-%m-%d %H:%M:%S")}  # fmt: skip
    note = None
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _holder(path)
            if holder.get("host") == me["host"] and holder.get("pid") == me["pid"]:
                return None  # this workflow's own (taken once already)
            if holder.get("host") == me["host"] and not _alive(int(holder.get("pid", -1))):
                path.unlink(missing_ok=True)
                note = (f"{path}: its workflow (process {holder.get('pid')}, checkout "
                        f"{holder.get('checkout')}) is gone; this one takes the results folder")
                continue
            raise ResultsLocked(
                f"{folder} is being written by another workflow (host {holder.get('host')}, "
                f"process {holder.get('pid')}, checkout {holder.get('checkout')}, since "
                f"{holder.get('since')}): wait for it to end, or give this one another "
                f"`results_dir`; if that workflow has stopped, delete {path}"
            ) from None
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        return note
    raise ResultsLocked(f"{path}: could not be taken (another workflow took it meanwhile)")


def release(results_dir: str | Path) -> None:
    """Give the lock back, if this process holds it."""
    path = Path(results_dir) / LOCK
    holder = _holder(path) if path.exists() else {}
    if holder.get("host") == socket.gethostname() and holder.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def _holder(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # cut by a kill mid-write, or gone meanwhile
        return {"host": "?", "pid": -1, "checkout": "?", "since": "?"}
