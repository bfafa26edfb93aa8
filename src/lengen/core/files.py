"""Small state files written whole or not at all: a kill or a full disk mid-write leaves the old
file (or none), never a cut one (a 0-byte spec.json would otherwise stop a resume)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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


class UnreadableState(RuntimeError):
    """A state file exists but cannot be read (empty, cut, not what it should hold)."""


def read_state(path: Path, what: str) -> str:
    """A state file's text, stripped; UnreadableState naming the file when it is empty."""
    text = Path(path).read_text().strip()
    if not text:
        raise UnreadableState(
            f"{path}: empty ({what}); it was cut by a kill or a full disk. Delete it to start "
            "over, or restore it"
        )
    return text
