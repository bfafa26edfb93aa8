"""Run specs: the self-contained JSON each workflow job receives, built from a validated config.

A job sees only its own slice of the config, so Snakemake's params trigger reruns only where the
slice changed (e.g. editing a figure's style reruns that figure, not the trainings).
"""

from __future__ import annotations

from lengen import tasks
from lengen.config import read_ds_config, tracking_uri
from lengen.positions import model_position
from lengen.tracking import experiment_name


def runtime(cfg: dict, ds_config: str | None = None) -> dict:
    """The runtime section of a spec, with the DeepSpeed config JSON (`ds_config`: this
    experiment's, else the runtime's) read in, so that editing the file reruns the trainings."""
    out = {k: v for k, v in cfg["runtime"].items() if k != "ds_config"}
    path = ds_config or cfg["runtime"].get("ds_config")
    if path:
        out["ds_config"] = read_ds_config(path)
    return out


def sparse_parity_train(cfg: dict, k_train: int, variant: str | None = None) -> dict:
    """Spec of the sparse-parity model of one variant (default: the first) trained with
    K_train = k_train (Sec. 5.1); the variant's model keys override the section's model."""
    sp = cfg["sparse_parity"]
    variant = variant or next(iter(sp["variants"]))
    schemes = sp.get("schemes", {}).get("variants", {})  # the extra figure's NoPE / ALiBi models
    var = sp["variants"][variant] if variant in sp["variants"] else schemes[variant]
    return {
        "experiment": "sparse_parity",
        "variant": variant,
        "run_name": f"{variant}/K{k_train}",
        "seed": cfg["seed"],
        "task": {
            "k_train": k_train,
            "n": sp["n"],
            "train_min_len": sp["train_min_len"],
            "train_max_len": sp["train_max_len"],
            "l_max": sp["l_max"],
        },
        "model": {
            "position": var.get("position", "rope"),
            **sp["model"],
            **var.get("model", {}),
        },
        "train": sp["train"],
        "runtime": runtime(cfg),
        "tracking": {
            "uri": tracking_uri(cfg),
            "experiment": experiment_name(cfg["tracking"]["experiment_prefix"], "sparse_parity"),
        },
    }


def scratchpad_train(cfg: dict, experiment: str, variant: str, value: int, run: int) -> dict:
    """Spec of run `run` of a generation-scored task's variant (a scratchpad task, Sec. 5.2) at
    its setting `value` (jump, depth: the task's SETTING); the task section is the task's own
    `task_spec`.

    Run r trains from seed cfg.seed + r; every run is scored on the same test set (cfg.seed).
    """
    section, task_module = cfg[experiment], tasks.get(experiment)
    var = section["variants"][variant]
    task = task_module.task_spec(section, var, value)
    return {
        "experiment": experiment,
        "variant": variant,
        "run_name": f"{variant}/{task_module.SETTING.key[0]}{value}/seed{run}",
        "seed": cfg["seed"] + run,
        "task": task,
        "model": {
            **section["model"],
            **var.get("model", {}),
            **model_position(var["scheme"]),
            "l_max": section["l_max"],
        },
        "train": {**section["train"], **var.get("train", {})},
        "runtime": runtime(cfg),
        "tracking": {
            "uri": tracking_uri(cfg),
            "experiment": experiment_name(cfg["tracking"]["experiment_prefix"], experiment),
        },
    }


NL_DIR = "natural_language"


def natural_language_train(cfg: dict, which: str) -> dict:
    """Spec of h_short (context L, PoSE from `pose_start` on) or h_long (context Lbar) (App. F)."""
    nl = cfg["natural_language"]
    short = which == "short"
    task = {
        "context": nl["short_context"] if short else nl["long_context"],
        "l_max": nl["long_context"] + 1,  # PoSE IDs in [1, Lbar]: the test sequence's true IDs
        "pose_start": nl["short"]["pose_start"] if short else None,
        "train_tokens": f"{cfg['results_dir']}/{NL_DIR}/tokens/train.bin",
    }
    return {
        "experiment": "natural_language",
        "run_name": f"h_{which}",
        "seed": cfg["seed"],
        "task": task,
        "model": {"position": "rope", "l_max": nl["long_context"] + 1, **nl["model"]},
        "train": nl[which]["train"],
        "runtime": runtime(cfg, nl.get("ds_config")),
        "tracking": {
            "uri": tracking_uri(cfg),
            "experiment": experiment_name(cfg["tracking"]["experiment_prefix"], "natural_language"),
        },
    }
