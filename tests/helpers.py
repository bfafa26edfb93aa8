"""Test helpers: a complete, typed run spec from a few overrides (lengen.core.specs.Spec), a
spec or config on a device, and scripts outside the package loaded as modules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from lengen.core.specs import Spec
from lengen.tasks import parse_spec

TASK_DEFAULTS = {
    "sparse_parity": {"k_train": 2, "n": 20, "train_min_len": 8, "train_max_len": 16, "l_max": 40},
    "parity_scratchpad": {"jump": 1, "scheme": "ppc", "train_min_len": 4, "train_max_len": 10,
                          "l_max": 40},
    "variable_assignment": {"depth": 2, "scheme": "ppc", "train_min_len": 10,
                            "train_max_len": 20, "l_max": 60, "n_vars": 20, "scratchpad": True},
    "majority": {"train_max_len": 11, "scheme": "absolute", "train_min_len": 5, "l_max": 40},
    "natural_language": {"context": 16, "l_max": 33, "train_tokens": "unused/train.bin"},
}  # fmt: skip
TRAIN_DEFAULTS = {"steps": 100, "batch_size": 4, "lr": 1e-3, "weight_decay": 0.0,
                  "warmup_steps": 0, "schedule": "constant"}  # fmt: skip


def make_spec(experiment: str, task=None, train=None, model=None, **top) -> Spec:
    """A valid spec of `experiment`: the defaults above with the given keys replaced."""
    return parse_spec(
        {
            "experiment": experiment,
            "run_name": "test",
            "seed": 0,
            "task": {**TASK_DEFAULTS[experiment], **(task or {})},
            "model": model or {},
            "train": {**TRAIN_DEFAULTS, **(train or {})},
            "runtime": {"device": "cpu", "precision": "fp32", "zero_stage": 0},
            "tracking": {"uri": "sqlite:///unused.db", "experiment": "test"},
            **top,
        }
    )


def on_device(spec: dict, device: str) -> dict:
    """A job spec or tier config (dict, its `runtime` section) set to run on `device`: the GPU
    tiers' bf16 on cuda (config/gpu.yaml, config/paper.yaml), the CPU tiers' fp32 on cpu."""
    spec["runtime"].update(device=device, precision="bf16" if device == "cuda" else "fp32")
    return spec


def reproducible(device: str) -> dict:
    """assert_close tolerances for two trainings that should give the same weights: bitwise on
    CPU; on CUDA up to bf16 rounding, since some CUDA kernels (atomic adds in the embedding and
    attention backward) are not bitwise reproducible from run to run."""
    return {"rtol": 0, "atol": 0} if device == "cpu" else {"rtol": 1e-2, "atol": 1e-3}


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """A script outside the package (benchmarks/, probes/, tools/) as a module named `name` (its
    file stem by default), its folder importable as when it runs as `python DIR/NAME.py` (the
    runners and benchmarks import their siblings)."""
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def edited(section: dict, **edits) -> dict:
    """A deep copy of a config section with keys replaced; `a__b=v` sets section["a"]["b"]."""
    import copy

    out = copy.deepcopy(section)
    for path, value in edits.items():
        *parents, leaf = path.split("__")
        node = out
        for key in parents:
            node = node[key]
        node[leaf] = value
    return out


def sample_options(task) -> tuple:
    """A task's `lengen sample` options as a parser, and its --help text on one line."""
    import argparse

    parser = argparse.ArgumentParser()
    task.add_sample_arguments(parser)
    return parser, " ".join(parser.format_help().split())


def argparse_namespace(args, **more):
    """A parsed namespace with more attributes (what `lengen sample` adds: --n, --seed)."""
    import argparse

    return argparse.Namespace(**vars(args), **more)
