"""Which MLflow store a setup marker was made for, without importing MLflow (the workflow reads
it when it parses: lengen.core.tracking pulls MLflow in).

The setup rules (workflow/rules/mlflow.smk) write `<results_dir>/mlflow.ready` and one
`mlflow/<experiment>.ready` per branch once the store and its experiments exist. A marker
records the store it marks: for a SQLite store, its file's device and inode. When that file is
gone or another file stands in its place (a lost or replaced mlflow.db), the markers are stale:
the workflow removes them, so the setup rules run again and a plain rerun completes (the jobs
that read a marker take it as `ancient`, so a new marker reruns no training)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def store_path(uri: str) -> Path | None:
    """The SQLite file of a store (None for a tracking server)."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def identity(uri: str) -> dict | None:
    """What a marker records of its store: a SQLite file's path, device and inode (None for a
    tracking server, or a SQLite file not yet made)."""
    path = store_path(uri)
    if path is None or not path.is_file():
        return None
    st = os.stat(path)
    return {"path": str(path), "dev": st.st_dev, "inode": st.st_ino}


def stale_markers(results_dir: str | Path, uri: str) -> tuple[list[Path], str]:
    """The setup markers of a results folder that no longer mark its store, and why ("" when
    none): the SQLite file is gone, or it is another file than the one they were made for (a
    marker of older code, without a record, is judged by the file's presence alone)."""
    ready = Path(results_dir) / "mlflow.ready"
    path = store_path(uri)
    if path is None or not ready.is_file():
        return [], ""
    try:
        recorded = json.loads(ready.read_text()).get("store")
    except (OSError, ValueError, AttributeError):
        recorded = None
    now = identity(uri)
    if now is None:
        why = f"MLflow store {path} is gone"
    elif recorded is not None and (recorded.get("dev"), recorded.get("inode")) != (
        now["dev"],
        now["inode"],
    ):
        why = f"MLflow store {path} was replaced since its setup ran"
    else:
        return [], ""
    markers = [ready, *sorted((Path(results_dir) / "mlflow").glob("*.ready"))]
    return markers, why
