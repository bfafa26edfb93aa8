"""Shared fixtures: the smoke config, a temporary MLflow store, a train spec for tiny runs, and
the device of the tests that have a GPU path.

`pytest --device cuda -m device` runs every test that takes the `device` fixture on the GPU (model
equivalence with transformers in fp32 and under bf16 autocast, training and resume through the
DeepSpeed engine, KV-cache decoding, the leave-one-out batch); without the option they run on the
CPU like every other test. One process holds one DeepSpeed accelerator, so the device is chosen
once per pytest run, not per test.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    parser.addoption(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="device of the tests marked `device` (their GPU paths: --device cuda -m device)",
    )
    parser.addoption(
        "--slow",
        action="store_true",
        help="also run the tests marked `slow` (minutes each: the whole smoke DAG against its "
        "reference, kill -9 resumes, fresh-clone plans; CI's second step: pytest --slow -m slow)",
    )
    parser.addoption(
        "--slurm",
        action="store_true",
        help="run the tests marked `slurm`: the smoke tier on a one-node SLURM cluster that "
        "tools/slurm_cluster.sh starts (root, Debian; ~16 min; pytest --slurm -m slurm)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "device: has a GPU path; runs on --device (default cpu)")
    config.addinivalue_line("markers", "slurm: on a real one-node SLURM cluster (opt-in: --slurm)")
    config.addinivalue_line("markers", "slow: minutes-long end-to-end check (opt-in: --slow)")
    device = config.getoption("--device")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise pytest.UsageError("--device cuda: torch sees no CUDA device")
    os.environ["DS_ACCELERATOR"] = device  # before anything imports deepspeed


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--slow"):  # the default run stays short; CI runs these after it
        slow = [item for item in items if "slow" in item.keywords]
        config.slow_deselected = len(slow)  # README states both counts (tests/test_docs.py)
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if "slow" not in item.keywords]
    for item in items:  # `-m device` selects exactly the tests that take the device fixture
        if "device" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.device)
        if "slurm" in item.keywords and not config.getoption("--slurm"):
            item.add_marker(pytest.mark.skip(reason="opt-in: pytest --slurm -m slurm"))


@pytest.fixture
def device(request) -> str:
    """The --device of this pytest run: "cpu" (default) or "cuda"."""
    return request.config.getoption("--device")


@pytest.fixture(scope="session")
def smoke_config() -> dict:
    """The smoke tier as a dict (validated by the tests that need validation)."""
    return yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())


@pytest.fixture
def tiny_spec(tmp_path, smoke_config) -> dict:
    """A sparse-parity train spec on the smoke tier, tracked in a fresh SQLite store."""
    from lengen.core import tracking
    from lengen.tasks import sparse_parity

    cfg = copy.deepcopy(smoke_config)
    cfg["results_dir"] = str(tmp_path / "results")
    spec = sparse_parity.train_spec(cfg, 2)
    tracking.prepare_store(spec["tracking"]["uri"], [spec["tracking"]["experiment"]])
    return spec


@pytest.fixture(autouse=True)
def no_active_mlflow_run_left():
    """A test that fails mid-run leaves MLflow's active run set in this process, and every later
    test that starts a run fails with "Run ... is already active" (CI, 2026-11-27): end it."""
    yield
    import sys

    mlflow = sys.modules.get("mlflow")
    while mlflow is not None and mlflow.active_run() is not None:
        try:
            mlflow.end_run("FAILED")  # pops the run first, then closes it in its store
        except Exception:  # noqa: BLE001 - its store may be another test's, or gone
            pass
