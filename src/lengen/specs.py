"""Run specs: the self-contained JSON each workflow job receives, built from a validated config.

A job sees only its own slice of the config, so Snakemake's params trigger reruns only where the
slice changed (e.g. editing a figure's style reruns that figure, not the trainings).
"""

from __future__ import annotations

from lengen.config import tracking_uri
from lengen.tracking import experiment_name

EXPERIMENTS = ("sparse_parity",)


def sparse_parity_train(cfg: dict, k_train: int) -> dict:
    """Spec of the sparse-parity model trained with K_train = k_train (Sec. 5.1)."""
    sp = cfg["sparse_parity"]
    return {
        "experiment": "sparse_parity",
        "run_name": f"K{k_train}",
        "seed": cfg["seed"],
        "task": {
            "k_train": k_train,
            "n": sp["n"],
            "train_min_len": sp["train_min_len"],
            "train_max_len": sp["train_max_len"],
            "l_max": sp["l_max"],
        },
        "model": {"position": "rope", **sp["model"]},
        "train": sp["train"],
        "runtime": cfg["runtime"],
        "tracking": {
            "uri": tracking_uri(cfg),
            "experiment": experiment_name(cfg["tracking"]["experiment_prefix"], "sparse_parity"),
        },
    }


def experiments(cfg: dict) -> list[str]:
    """Full MLflow experiment names of this config."""
    return [experiment_name(cfg["tracking"]["experiment_prefix"], e) for e in EXPERIMENTS]
