"""A tier's training jobs and its training hours from per-job hours: one device, jobs one after
another; and one node of `node_gpus` devices (single-device jobs longest first onto the least
busy device; a job of g devices takes the g least busy, its one-device time divided by g). No
torch (lengen.tasks plans without it): step_time.py, checkpoint.py and tools/times.py (the times
README and docs state) share it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lengen.config import plan
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
    only). A kind's `jobs` counts runs, fused or not (lengen.config.plan.group_jobs counts the
    fused jobs)."""
    kinds = []
    for exp in plan.experiments(cfg):  # the synthetic runs, as the workflow plans them
        for variant in plan.variants(cfg, exp):
            runs = plan.runs(cfg, exp, variant)
            if exp == plan.SPARSE_PARITY:  # K_train changes no shape: one kind per variant
                spec = plan.Run(exp, variant, max(r.value for r in runs), 0).spec(cfg)
                kinds.append(Kind(f"{exp}/{variant}", spec, len(runs)))
                continue
            for value in plan.values(cfg, exp, variant):
                run = plan.Run(exp, variant, value, 0)
                kinds.append(
                    Kind(
                        f"{exp}/{variant}/{run.setting}",
                        run.spec(cfg),
                        plan.run_count(cfg, exp, variant),
                    )
                )
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
    return {
        k.name: {"jobs": k.jobs, "steps": k.spec["train"]["steps"], "gpus": k.gpus} for k in kinds
    }


def training_hours(jobs: dict[str, dict], s_per_step: dict[str, float], node_gpus: int) -> dict:
    """node_hours of a job table (job_table's form) at each kind's seconds per step."""
    hours = []  # (hours on one device, devices asked for)
    for kind, job in jobs.items():
        hours += [(s_per_step[kind] * job["steps"] / 3600, job["gpus"])] * job["jobs"]
    return node_hours(hours, node_gpus)


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
