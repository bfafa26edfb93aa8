"""The plan of a tier's synthetic training runs and their jobs: config in, runs and jobs out
(pure functions but `unfinished`, which looks at the run folders; no torch, no Snakemake). The
workflow's rules (workflow/rules/synthetic.smk,
sparse_parity.smk, generation.smk), the figures' jobs (lengen.report.figures) and the
time estimates (benchmarks/schedule.py) all ask it, so which runs a tier trains, where each one
lives and which fused group trains it are decided here once.

A run of a synthetic task is (experiment, variant, setting value, run): sparse parity's K_train,
a generation task's jump / depth / longest training length (the task's SETTING). Its folder is
results/<experiment>/<variant>/<setting>/seed<run> (the setting as K8, k2, d3, ...). With
`runtime.fuse_runs` > 1 a variant's runs train fuse_runs to a job as one fused model
(lengen.train.group), in the order `runs` gives: its settings' runs one after another (they share
every shape: the setting is data). Sparse parity's extra `schemes` models (one run each at
schemes.k_train, not in the paper) always train one by one.

    plan.runs(cfg, "parity_scratchpad", "ppc")       # every Run of a variant, in fused order
    plan.groups(cfg, "parity_scratchpad", "ppc")     # the fused groups' members
    plan.trained(cfg, run)                            # what its evaluation waits for
    plan.group_jobs(cfg)                              # {rule: fused jobs}
    plan.unfinished(plan.training_jobs(cfg))          # trainings begun and not ended (reads disk)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from lengen import tasks
from lengen.core.files import MODEL, STARTED
from lengen.core.settings import setting
from lengen.core.specs import RuntimeConfig

SPARSE_PARITY = "sparse_parity"


def fuse_runs(cfg: dict) -> int:
    """The tier's runtime.fuse_runs (absent: RuntimeConfig's default)."""
    return cfg["runtime"].get("fuse_runs", RuntimeConfig.fuse_runs)


def prefix(experiment: str) -> str:
    """A run's setting as its folder names it: K (sparse parity's K_train), else the generation
    task's SETTING.prefix (k: jump, d: depth, ...)."""
    if experiment == SPARSE_PARITY:
        return "K"
    return tasks.generation_tasks()[experiment].SETTING.prefix


def experiments(cfg: dict) -> list[str]:
    """The synthetic experiments the config trains runs of: sparse parity and every
    generation-scored task with a section."""
    return [e for e in (SPARSE_PARITY, *tasks.generation_tasks()) if e in cfg]


@dataclass(frozen=True)
class Run:
    """One training run: its experiment, variant, setting value and run index (seed: the
    config's + run)."""

    experiment: str
    variant: str
    value: int
    run: int

    @property
    def setting(self) -> str:
        return f"{prefix(self.experiment)}{self.value}"

    def folder(self, cfg: dict) -> str:
        """results/<experiment>/<variant>/<setting>/seed<run>: its model.pt, eval.csv, spec."""
        return "/".join(
            [cfg["results_dir"], self.experiment, self.variant, self.setting, f"seed{self.run}"]
        )

    def model(self, cfg: dict) -> str:
        return f"{self.folder(cfg)}/model.pt"

    def eval(self, cfg: dict) -> str:
        return f"{self.folder(cfg)}/eval.csv"

    def spec(self, cfg: dict) -> dict:
        """Its training job's spec (the task module's builder)."""
        if self.experiment == SPARSE_PARITY:
            return tasks.get(SPARSE_PARITY).train_spec(cfg, self.value, self.variant, self.run)
        return tasks.generation_spec(cfg, self.experiment, self.variant, self.value, self.run)


def variants(cfg: dict, experiment: str) -> list[str]:
    """An experiment's variants (sparse parity's extra `schemes` models after its own)."""
    section = cfg[experiment]
    schemes = (section.get("schemes") or {}) if experiment == SPARSE_PARITY else {}
    return [*section["variants"], *schemes.get("variants", {})]


def is_scheme(cfg: dict, experiment: str, variant: str) -> bool:
    """Whether a variant is one of sparse parity's extra `schemes` models (one run each)."""
    return experiment == SPARSE_PARITY and variant not in cfg[experiment]["variants"]


def values(cfg: dict, experiment: str, variant: str) -> list[int]:
    """The setting values a variant trains: sparse parity's k_train (a scheme model: its one
    schemes.k_train), a generation task's jumps / depths as the variant sees its section."""
    if experiment == SPARSE_PARITY:
        sp = cfg[SPARSE_PARITY]
        return [sp["schemes"]["k_train"]] if is_scheme(cfg, experiment, variant) else sp["k_train"]
    setting = tasks.generation_tasks()[experiment].SETTING
    return tasks.variant_section(cfg[experiment], variant)[setting.values]


def run_count(cfg: dict, experiment: str, variant: str) -> int:
    """Runs per setting value (seeds seed, seed + 1, ...); a scheme model: one."""
    if is_scheme(cfg, experiment, variant):
        return 1
    return cfg[experiment]["variants"][variant]["runs"]


def runs(cfg: dict, experiment: str, variant: str, only: list[int] | None = None) -> list[Run]:
    """Every run of a variant (at the setting values `only`, else all), in the order fused
    groups take them: each value's runs one after another."""
    return [
        Run(experiment, variant, value, run)
        for value in (values(cfg, experiment, variant) if only is None else only)
        for run in range(run_count(cfg, experiment, variant))
    ]


def evals(
    cfg: dict, experiment: str, variants_: list[str] | None = None, only: list[int] | None = None
) -> list[str]:
    """eval.csv of every run of the given variants (default: the experiment's own, not sparse
    parity's scheme models), at the setting values `only` (default: each variant's own)."""
    chosen = cfg[experiment]["variants"] if variants_ is None else variants_
    return [r.eval(cfg) for v in chosen for r in runs(cfg, experiment, v, only)]


def fused(cfg: dict, experiment: str, variant: str) -> bool:
    """Whether a variant's runs train in fused groups (fuse_runs > 1; never a scheme model)."""
    return fuse_runs(cfg) > 1 and not is_scheme(cfg, experiment, variant)


def groups(cfg: dict, experiment: str, variant: str) -> list[list[Run]]:
    """A fused variant's groups: fuse_runs consecutive runs each, the last what is left."""
    every, n = runs(cfg, experiment, variant), fuse_runs(cfg)
    return [every[i : i + n] for i in range(0, len(every), n)]


def group(cfg: dict, experiment: str, variant: str, index: int) -> list[Run]:
    """The members of a variant's fused group `index` (the rule's `group` wildcard)."""
    return groups(cfg, experiment, variant)[index]


def group_index(cfg: dict, run: Run) -> int:
    """Which of its variant's fused groups trains a run."""
    return runs(cfg, run.experiment, run.variant).index(run) // fuse_runs(cfg)


def marker(cfg: dict, experiment: str, variant: str, index: int, what: str) -> str:
    """A fused group job's marker file: `done` (trained) or `evaluated`."""
    return "/".join([cfg["results_dir"], experiment, variant, f"fused{index}.{what}"])


def trained(cfg: dict, run: Run) -> str:
    """What a run's evaluation waits for: its model.pt, or its fused group's `done` marker."""
    if not fused(cfg, run.experiment, run.variant):
        return run.model(cfg)
    return marker(cfg, run.experiment, run.variant, group_index(cfg, run), "done")


def group_jobs(cfg: dict) -> dict[str, int]:
    """The fused training jobs a tier runs, by the rule that runs them ({} when runs train one
    by one): every fused variant's groups."""
    if fuse_runs(cfg) <= 1:
        return {}
    count = sum(
        math.ceil(len(runs(cfg, e, v)) / fuse_runs(cfg))
        for e in experiments(cfg)
        for v in cfg[e]["variants"]
    )
    return {"synthetic_train_group": count} if count else {}


def launcher(cfg: dict, gpus: int | None = None) -> str:
    """What a training job's command starts its module with: `python -m` for one process, the
    deepspeed launcher for several GPUs per job (the runtime's gpus_per_job unless a section sets
    its own, as natural_language.gpus_per_job does). The launcher takes the job's devices from
    CUDA_VISIBLE_DEVICES, which `devices` (one machine) or SLURM sets: given --num_gpus it would
    ignore them and take devices 0..N-1, whoever holds them. tests/test_train.py runs this very
    line."""
    gpus = gpus or cfg["runtime"]["gpus_per_job"]
    if cfg["runtime"]["device"] == "cuda" and gpus > 1:
        return "deepspeed --module"
    return "python -m"  # the interpreter of the active environment (envs/lengen.yaml)


def devices(cfg: dict, gpus: int) -> str:
    """What a job's command starts with so that it runs on `gpus` devices of its own: on a GPU
    tier, lengen.core.gpus (one machine: N devices no other running job holds; under SLURM, the
    allocation's); nothing on a CPU tier."""
    if cfg["runtime"]["device"] != "cuda":
        return ""
    share = cfg.get("jobs_per_gpu", JOBS_PER_GPU)
    return f"python -m lengen.core.gpus {int(gpus)}{f' --share {share}' if share > 1 else ''} --"


@dataclass(frozen=True)
class JobConfig:
    """What one kind of job asks a machine or a cluster for (a tier's `jobs.<kind>`); each field
    a config key (lengen.core.settings): a fixed `runtime`, or for a training kind its measured
    `step_s` with a `margin` (job_minutes; lengen.config.config checks which)."""

    cpus: int = setting(doc="CPU cores (SLURM --cpus-per-task)", minimum=1)
    mem_mb: int = setting(doc="memory in MB (SLURM --mem)", minimum=100)
    runtime: int | None = setting(
        None,
        null=False,
        doc="minutes one job asks for (SLURM --time); a training kind may give "
        "step_s and margin instead",
        minimum=1,
        maximum=43200,
    )
    step_s: float | None = setting(
        None,
        null=False,
        doc="a training kind's measured seconds per optimizer step (its "
        "slowest, on the GPU named beside it): each job asks for its own steps x step_s x margin "
        "+ startup_min minutes",
        exclusiveMinimum=0,
        maximum=3600,
    )
    margin: float | None = setting(
        None,
        null=False,
        doc="how much slower than step_s a job may step and still finish "
        "(another GPU, a shared file system), with step_s",
        minimum=1,
        maximum=10,
    )
    startup_min: int = setting(
        10,
        doc="minutes a training job spends before and after its steps (imports, engine, "
        "checkpoints, model files), with step_s",
        minimum=0,
        maximum=120,
    )
    max_runtime: int | None = setting(
        None,
        null=False,
        doc="the most minutes one submission of a training kind asks for, with "
        "step_s (a partition's MaxTime): a job stopped there keeps its checkpoints and resumes "
        "when Snakemake retries it (the profile's retries)",
        minimum=1,
        maximum=43200,
    )
    disk_mb: int | None = setting(
        None,
        null=False,
        doc="peak disk of one job of this kind, MB (its checkpoints and model "
        "files under results_dir); a synthetic training job's is checked against what its "
        "group's checkpoints need, and `lengen.config.cluster` against the free space there",
        minimum=1,
    )


JOBS_PER_GPU = 1  # a tier's jobs_per_gpu where it says none (lengen.config.tier): a GPU per job
STARTUP_MIN = JobConfig.startup_min  # a training job's minutes around its steps, by default


TRAINING_KINDS = ("train", "natural_language_train")  # the `jobs` kinds that have steps


def job_minutes(job: dict, steps: int | None = None, capped: bool = True) -> int:
    """The minutes a job of this `jobs` kind asks for (SLURM --time): its fixed `runtime`, or
    for a training kind that gives `step_s`, its own steps x step_s x margin + startup_min (the
    measured step time with a stated margin, never a sum of its group's rules), at most
    `max_runtime` unless `capped` is False (what the whole training needs)."""
    if "step_s" not in job:
        return job["runtime"]
    if steps is None:
        raise ValueError("a job kind with step_s asks for minutes by its steps: give them")
    need = math.ceil(steps * job["step_s"] * job["margin"] / 60) + job.get(
        "startup_min", STARTUP_MIN
    )
    return min(need, job["max_runtime"]) if capped and "max_runtime" in job else need


def gpus_per_job(cfg: dict) -> dict[str, int]:
    """The GPUs each kind of training job asks for, by the config key that sets it."""
    asked = {"runtime.gpus_per_job": cfg["runtime"]["gpus_per_job"]}
    if "natural_language" in cfg:
        nl = cfg["natural_language"].get("gpus_per_job", cfg["runtime"]["gpus_per_job"])
        asked["natural_language.gpus_per_job"] = nl
    return asked


def eval_gpus(cfg: dict) -> int:
    """GPUs of an evaluation job: one where the tier trains on GPUs, else none."""
    return min(1, cfg["runtime"]["gpus_per_job"])


def training_jobs(cfg: dict) -> dict[str, list[str]]:
    """Each synthetic training job's output (a run's model.pt, or its fused group's `done`
    marker) -> the folders of the runs it trains."""
    jobs: dict[str, list[str]] = {}
    for experiment in experiments(cfg):
        for variant in variants(cfg, experiment):
            for run in runs(cfg, experiment, variant):
                jobs.setdefault(trained(cfg, run), []).append(run.folder(cfg))
    return jobs


def unfinished(jobs: dict[str, list[str]]) -> dict[str, str]:
    """The training jobs (output -> the folders they train) whose training began and did not end:
    a folder with its spec.json, MLflow run id or checkpoints but no model.pt (a kill of a forced
    rerun, a deleted model.pt). Snakemake alone would not redo them once their evaluation has run
    (a missing file between two present ones is not remade), so the workflow forces them
    (Snakefile). The one function here that reads the disk. {output: what was found}."""
    found = {}
    for output, folders in jobs.items():
        for folder in map(Path, folders):
            began = [name for name in STARTED if (folder / name).exists()]
            if began and not (folder / MODEL).exists():
                found[output] = f"{folder} has {', '.join(began)} but no {MODEL}"
                break
    return found
