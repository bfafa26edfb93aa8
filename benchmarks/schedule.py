"""A tier's training jobs and its training hours from per-job hours: one device, jobs one after
another; and one node of `node_gpus` devices (single-device jobs longest first onto the least
busy device; a job of g devices takes the g least busy, its one-device time divided by g). No
torch (lengen.tasks plans without it): step_time.py, checkpoint.py and tools/times.py (the times
README and docs state) share it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from lengen import tasks
from lengen.tasks import natural_language


@dataclass
class Kind:
    """One kind of training job: a representative spec and how many runs of it the tier has."""

    name: str
    spec: dict
    jobs: int
    gpus: int = 1  # devices per job (the language models: natural_language.gpus_per_job)


def job_kinds(cfg: dict, lm_tokens: Path | None = None) -> list[Kind]:
    """The tier's training runs grouped into kinds of equal step cost, each with a representative
    spec: sparse parity per variant (K_train changes no shape), the scratchpad tasks per
    (variant, setting), each language model. The language models read `lm_tokens` (random
    tokens of the tokenizer's size: the step's cost does not depend on the text; None: counting
    only). A kind's `jobs` counts runs, fused or not (fused_group_jobs counts the fused jobs)."""
    kinds = []
    if "sparse_parity" in cfg:
        sp, task = cfg["sparse_parity"], tasks.get("sparse_parity")
        for variant in sp["variants"]:
            spec = task.train_spec(cfg, max(sp["k_train"]), variant)
            runs = sp["variants"][variant]["runs"]
            kinds.append(Kind(f"sparse_parity/{variant}", spec, len(sp["k_train"]) * runs))
        schemes = sp.get("schemes") or {}  # the extra figure's NoPE / ALiBi models, one each
        for variant in schemes.get("variants", {}):
            spec = task.train_spec(cfg, schemes["k_train"], variant)
            kinds.append(Kind(f"sparse_parity/{variant}", spec, 1))
    for exp, task in tasks.generation_tasks().items():
        if exp not in cfg:
            continue
        setting = task.SETTING
        for variant, var in cfg[exp]["variants"].items():
            section = tasks.variant_section(cfg[exp], variant)  # its own jumps / depths
            for value in section[setting.values]:
                spec = tasks.generation_spec(cfg, exp, variant, value, 0)
                name = f"{exp}/{variant}/{setting.prefix}{value}"
                kinds.append(Kind(name, spec, var["runs"]))
    if "natural_language" in cfg:
        nl = cfg["natural_language"]
        for which in ("short", "long"):
            spec = natural_language.train_spec(cfg, which)
            spec["task"]["train_tokens"] = str(lm_tokens)
            gpus = nl.get("gpus_per_job", 1) if cfg["runtime"]["device"] == "cuda" else 1
            kinds.append(Kind(f"natural_language/h_{which}", spec, 1, max(1, gpus)))
    return kinds


def job_table(kinds: list[Kind]) -> dict[str, dict]:
    """Kind name -> {jobs, steps, gpus}: what a tier trains, as step_time.py's JSON records it."""
    return {k.name: {"jobs": k.jobs, "steps": k.spec["train"]["steps"], "gpus": k.gpus}
            for k in kinds}  # fmt: skip


def training_hours(jobs: dict[str, dict], s_per_step: dict[str, float], node_gpus: int) -> dict:
    """node_hours of a job table (job_table's form) at each kind's seconds per step."""
    hours = []  # (hours on one device, devices asked for)
    for kind, job in jobs.items():
        hours += [(s_per_step[kind] * job["steps"] / 3600, job["gpus"])] * job["jobs"]
    return node_hours(hours, node_gpus)


def fused_group_jobs(cfg: dict) -> dict[str, int]:
    """The workflow's fused training jobs (runtime.fuse_runs > 1) by rule: each sparse-parity
    variant's (K_train, run) members and each generation-task variant's (setting, run) members,
    fuse_runs to a job (workflow/rules: sp_members, fused_members); {} when runs train one by
    one. The extra schemes figure's sparse-parity models train one by one."""
    fuse = cfg["runtime"].get("fuse_runs", 1)
    if fuse <= 1:
        return {}
    jobs = {}
    if "sparse_parity" in cfg:
        sp = cfg["sparse_parity"]
        jobs["sparse_parity_train_group"] = sum(
            math.ceil(len(sp["k_train"]) * var["runs"] / fuse) for var in sp["variants"].values()
        )
    groups = 0
    for exp, task in tasks.generation_tasks().items():
        for variant, var in cfg.get(exp, {}).get("variants", {}).items():
            values = tasks.variant_section(cfg[exp], variant)[task.SETTING.values]
            groups += math.ceil(len(values) * var["runs"] / fuse)
    if groups:
        jobs["generation_train_group"] = groups
    return jobs


def node_hours(jobs: list[tuple[float, int]], node_gpus: int) -> dict:
    """{jobs, one_device_h, node_h, node_gpus} for (hours on one device, devices asked) jobs."""
    one = sum(h for h, _ in jobs)
    busy = [0.0] * node_gpus
    for hours, gpus in sorted(jobs, reverse=True):
        if gpus > 1:  # a multi-device job on the g least busy: it starts when all are free
            g = min(gpus, node_gpus)
            free = sorted(range(node_gpus), key=busy.__getitem__)[:g]
            start = max(busy[i] for i in free)
            for i in free:
                busy[i] = start + hours / g
        else:
            i = min(range(node_gpus), key=busy.__getitem__)
            busy[i] += hours
    return {"jobs": len(jobs), "one_device_h": one, "node_h": max(busy), "node_gpus": node_gpus}
