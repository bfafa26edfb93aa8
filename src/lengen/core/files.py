"""Small state files written whole or not at all: a kill or a full disk mid-write leaves the old
file (or none), never a cut one (a 0-byte spec.json would otherwise stop a resume)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path

from lengen.core.cli import KnownError, recognises


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, flush it to disk, then rename it over
    `path` (a rename within one folder is atomic)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# A training run's folder (lengen.train writes it; the workflow reads it to find a run whose
# training began and did not end: lengen.config.plan.unfinished)
MODEL = "model.pt"  # written last, once the run ended
CHECKPOINTS = "ckpt"  # a run trained alone's checkpoints
GROUP_CHECKPOINTS = "group_ckpt"  # a fused group's, in its first member's folder
FINISHED = "finished"  # a hard link to the finished model.pt and what made it, for a retry
STARTED = ("spec.json", "mlflow_run_id", CHECKPOINTS, GROUP_CHECKPOINTS)  # a training began


class UnreadableState(KnownError, RuntimeError):
    """A state file exists but cannot be read (empty, cut, not what it should hold)."""


def read_state(path: Path, what: str, deleting: str) -> str:
    """A state file's text, stripped; UnreadableState naming the file when it is empty, with
    what deleting it does (`deleting`, e.g. "Delete it to ...": each caller's own, true, advice)."""
    text = Path(path).read_text().strip()
    if not text:
        raise UnreadableState(
            f"{path}: empty ({what}); it was cut by a kill or a full disk. {deleting}, or "
            "restore it"
        )
    return text


class NoSpace(KnownError, OSError):
    """A write failed because the disk it writes to is full: the message names the path."""


LOW_SPACE = 64 * 2**20  # bytes free below which a failed write is put down to a full disk
_WRITE_FAILURES = ("iostream error", "failed writing", "unexpected pos", "no space left")


def free_mb(path: Path) -> float:
    """Free space, in MB, on the disk of `path` (its nearest existing folder)."""
    here = Path(path).absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    return shutil.disk_usage(here).free / 2**20


@recognises
def full_disk(err: BaseException) -> NoSpace | None:
    """A write a full disk refused where no `space_for` names it (a table, a log, a figure): one
    line with the file (when the error names it) and the free space."""
    if not (isinstance(err, OSError) and err.errno == errno.ENOSPC) or isinstance(err, NoSpace):
        return None
    where = Path(err.filename) if err.filename else Path.cwd()
    named = f" of {where}" if err.filename else ""
    return NoSpace(
        errno.ENOSPC,
        f"no space left on the disk{named} ({free_mb(where):.0f} MB "
        "free): free space there and rerun",
    )


@contextlib.contextmanager
def space_for(path: Path, what: str):
    """Turn a failed write on a full disk into NoSpace naming the path, the free space and the
    recovery. torch.save reports a full disk as "basic_ios::clear: iostream error" (a
    RuntimeError) or "PytorchStreamWriter failed writing file", and the log, on the same disk,
    is then cut mid-traceback; this one line says what happened."""
    try:
        yield
    except (OSError, RuntimeError) as err:
        full = isinstance(err, OSError) and err.errno == errno.ENOSPC
        failed_write = full or any(m in str(err).lower() for m in _WRITE_FAILURES)
        free = free_mb(path)
        if not (full or (failed_write and free * 2**20 < LOW_SPACE)):
            raise
        raise NoSpace(
            errno.ENOSPC,
            f"no space left on the disk of {path} ({free:.0f} MB free) while writing "
            f"{what}: free space there and rerun; the last complete checkpoint is kept",
        ) from err
