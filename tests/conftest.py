"""Shared fixtures: the smoke config, a temporary MLflow store, a train spec for tiny runs."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DS_ACCELERATOR", "cpu")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def smoke_config() -> dict:
    """The smoke tier as a dict (validated by the tests that need validation)."""
    return yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())


@pytest.fixture
def tiny_spec(tmp_path, smoke_config) -> dict:
    """A sparse-parity train spec on the smoke tier, tracked in a fresh SQLite store."""
    from lengen.tasks import sparse_parity
    from lengen.train import tracking

    cfg = copy.deepcopy(smoke_config)
    cfg["results_dir"] = str(tmp_path / "results")
    spec = sparse_parity.train_spec(cfg, 2)
    tracking.prepare_store(spec["tracking"]["uri"], [spec["tracking"]["experiment"]])
    return spec
