"""Provenance stamped on every result file: config hash, seed, package versions and git commit.

Tidy tables carry it as constant columns (so it survives `combine` and any pandas merge), PNG
figures in their text metadata, markdown reports in a header line. `config_hash` is the hash of the
config slice the file was computed from (a job sees only its slice, see lengen.core.specs), so two
files with the same hash came from the same settings.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import pandas as pd

# Keys that say where a run lives, not what it computes: the MLflow store (its URI is an
# absolute path), the results and reports folders, the packed token file, a C4 shard folder.
MACHINE_LOCAL = frozenset({"tracking", "results_dir", "reports_dir", "train_tokens", "c4_dir"})


def science(obj):
    """A config, spec or slice without its MACHINE_LOCAL keys (at any depth)."""
    if isinstance(obj, dict):
        return {k: science(v) for k, v in obj.items() if k not in MACHINE_LOCAL}
    if isinstance(obj, list | tuple):
        return [science(v) for v in obj]
    return obj


def config_hash(obj: dict) -> str:
    """Short stable hash of a JSON-serialisable dict's science (`science`): the same run in two
    clones, two results folders or two MLflow stores has the same hash."""
    return hashlib.sha256(json.dumps(science(obj), sort_keys=True).encode()).hexdigest()[:12]


PACKAGES = (
    "lengen",
    "torch",
    "deepspeed",
    "transformers",
    "tokenizers",
    "datasets",
    "mlflow",
    "snakemake",
    "numpy",
    "pandas",
    "seaborn",
)
COLUMNS = ("config_hash", "seed", "git_commit", "versions")
# a reference judged or drawn again (lengen.report.rejudge) keeps the training commit as
# `git_commit` and names the code that judged its verdicts or drew its figures in these
JUDGED_AT, DRAWN_AT = "judged_at", "drawn_at"
# read these back as text: a hash or commit that happens to be all digits must not become an int
DTYPES = {"config_hash": str, "git_commit": str, "versions": str}
PNG_KEY = "lengen:provenance"


@functools.cache
def git_commit() -> str:
    """HEAD of the source checkout, with '-dirty' for uncommitted tracked changes. A copy of a
    checkout without its .git (a machine the tree was copied to) has no HEAD of its own, even
    where it lies inside another checkout (whose HEAD is not this code's: the copy's files are not
    tracked there): then the commit the copy was made from, if the environment says it
    (LENGEN_SOURCE_COMMIT, set by whoever copied a clean tree), else 'unknown'."""
    src = Path(__file__).resolve().parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(src), *args], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()

    try:
        git("ls-files", "--error-unmatch", Path(__file__).name)  # fails outside our checkout
        head = git("rev-parse", "HEAD")
        # the committed results under reference/ are rewritten by `python -m
        # lengen.report.refresh`, not by a code change
        dirty = git(
            "status", "--porcelain", "--untracked-files=no", "--", ":/", ":(top,exclude)reference"
        )
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("LENGEN_SOURCE_COMMIT", "unknown")
    return head + ("-dirty" if dirty else "")


@functools.cache
def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (which model file a run or table came from)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def versions() -> str:
    """'python=3.11.9 torch=2.13.0 ...' for the packages that shape the numbers."""
    found = [f"python={platform.python_version()}"]
    for name in PACKAGES:
        try:
            found.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return " ".join(found)


def record(config: Mapping, seed: int | str) -> dict[str, str | int]:
    """The provenance of a result computed from `config` (a config slice) with `seed`."""
    return {
        "config_hash": config_hash(dict(config)),
        "seed": seed,
        "git_commit": git_commit(),
        "versions": versions(),
    }


def stamp(table: pd.DataFrame, config: Mapping, seed: int | str) -> pd.DataFrame:
    """The table with the provenance columns (an existing per-row `seed` column is kept)."""
    columns = record(config, seed)
    if "seed" in table:
        del columns["seed"]
    return table.assign(**columns)


def png_metadata(config: Mapping, seed: int | str, trained_at: str | None = None) -> dict[str, str]:
    """savefig(metadata=...) for a PNG: provenance as one JSON text chunk. `trained_at`: a
    reference's figure drawn again from its tables keeps the commit that made them as its
    `git_commit` (a reference is one run of one commit) and names the drawing code's as
    DRAWN_AT."""
    found = record(config, seed)
    if trained_at is not None:
        found |= {"git_commit": trained_at, DRAWN_AT: found["git_commit"]}
    return {PNG_KEY: json.dumps(found, sort_keys=True)}


def read_png(path: str | Path) -> dict:
    """The provenance recorded in a PNG written with png_metadata."""
    from PIL import Image

    with Image.open(path) as image:
        return json.loads(image.text[PNG_KEY])


def recorded_commits(path: str | Path) -> set[str]:
    """The commits a result file records: a CSV's `git_commit` column, a PNG's provenance chunk
    (empty for a file that records none)."""
    path = Path(path)
    if path.suffix == ".csv":
        table = pd.read_csv(path, dtype=str, usecols=lambda c: c == "git_commit")
        return set(table.get("git_commit", pd.Series(dtype=str)).dropna())
    if path.suffix == ".png":
        try:
            return {str(read_png(path)["git_commit"])}
        except (KeyError, ValueError, OSError):
            return set()  # a PNG without provenance (none is written so)
    return set()


def markdown_line(config: Mapping, seed: int | str) -> str:
    """One markdown line with the provenance, for the head of a report."""
    r = record(config, seed)
    return (
        f"Provenance: config hash `{r['config_hash']}`, seed {r['seed']}, "
        f"git commit `{r['git_commit']}`, versions: {r['versions']}."
    )


def table_seeds(tables: pd.DataFrame) -> str:
    """The seeds of the rows a derived file (figure, report) rests on, e.g. '0,1,2'."""
    if "seed" not in tables:
        return ""
    return ",".join(str(s) for s in sorted(tables["seed"].dropna().unique()))
