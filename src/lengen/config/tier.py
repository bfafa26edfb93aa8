"""A tier's top level (`TierConfig`) and the JSON Schema of a whole tier, made from the settings
dataclasses (lengen.core.settings): the top level's, each task's section (its module's
`SectionConfig`, one property per task of lengen.tasks.REGISTRY) and the parts sections share
(`$defs`: the model, the training, a figure). A setting's type, bound, default and doc are
written once, in its field; config/README.md's table is made from the same schema
(lengen.config.keys). Plain types only: validating a config imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from lengen import tasks
from lengen.analysis.theory import TheoryConfig
from lengen.config.plan import JOBS_PER_GPU, JobConfig
from lengen.core.settings import described, object_schema, setting
from lengen.core.specs import RuntimeConfig, TrackingConfig, TrainSpec
from lengen.model.config import ModelConfig
from lengen.tasks.base import GenerationFigure

TIERS = ("smoke", "default", "gpu", "gpu-smoke", "paper")
# numpy's seeds are below 2^32, and run r of a variant draws with seed + r (runs <= 1,000)
MAX_RUNS = 1000
SEED_MAX = 2**32 - 1 - MAX_RUNS


@dataclass(frozen=True, kw_only=True)
class JobsConfig:
    """What each kind of job asks a cluster for (SLURM: --cpus-per-task, --mem, --time); the
    profile keeps only the site's settings. Every tier's YAML sets it; a config without it (one
    written before it existed, a probe's base) asks each job for its threads, 4 GB and an hour.
    small: tables, figures, report, theory, MLflow setup; train / eval: one synthetic model;
    natural_language_data: corpus and tokens; natural_language_train: one language model;
    natural_language_eval: Table 1, the sliding window, leave-one-out."""

    small: JobConfig = setting(doc="tables, figures, report, theory, MLflow setup")
    train: JobConfig = setting(doc="one synthetic model (or one fused group)")
    eval: JobConfig = setting(doc="one synthetic model's length sweep")
    natural_language_data: JobConfig = setting(doc="corpus shards, tokenizer, token files")
    natural_language_train: JobConfig = setting(doc="one language model")
    natural_language_eval: JobConfig = setting(doc="Table 1, the sliding window, leave-one-out")


@dataclass(frozen=True, kw_only=True)
class TierConfig:
    """A tier: one YAML file (config/*.yaml), its top-level keys; each task's section beside
    them is its module's SectionConfig (`schema`)."""

    tier: str = setting(
        enum=list(TIERS),
        doc="the tier's name: its reference folder reference/<tier>/ and its report's title",
    )
    seed: int = setting(
        minimum=0,
        maximum=SEED_MAX,
        doc="the seed every draw flows from (run r "
        "of a variant: seed + r); numpy's seeds are below 2^32, less 1,000 runs",
    )
    tests_the_paper: bool = setting(
        True,
        null=False,
        doc="false: a plumbing tier (smoke), whose "
        "models are too small to test the paper; its report counts "
        "no verdict and says so in its title",
    )
    results_dir: str = setting(
        minLength=1,
        doc="where a run writes models, tables, logs and MLflow (relative to the project)",
    )
    reports_dir: str = setting(
        minLength=1, doc="where a run writes its figures, tidy tables, REPORT.md and verdicts.csv"
    )
    tracking: TrackingConfig = setting(doc="MLflow: one run per trained model and per figure")
    runtime: RuntimeConfig = setting(doc="how every training job runs (the tier's machine)")
    jobs: JobsConfig | None = setting(None, null=False, doc=described(JobsConfig))
    jobs_per_gpu: int = setting(
        JOBS_PER_GPU,
        null=False,
        minimum=1,
        maximum=16,
        doc=(
            "on one machine, how many jobs a GPU takes at once (lengen.core.gpus): 1, a GPU is one "
            "job's; more only on purpose, for models small enough to share one (the gpu-smoke "
            "tier). Changes no result"
        ),
    )
    gpu_model: str | None = setting(
        None,
        pattern="^[A-Za-z0-9_.]+$",
        doc=(
            "the GPU type a SLURM job that asks for GPUs names (--gpus=TYPE:N), where a partition "
            "mixes types; the site's setting: the SLURM profile's `config: [gpu_model=h100]`. "
            "Changes no result"
        ),
    )
    theory: TheoryConfig | None = setting(
        None, null=False, doc="Executable theory (Sec. 3-4, App. C-D); exact risks, no training."
    )


def _overrides(node: dict) -> dict:
    """A section's schema as a variant's overrides of it: nothing required, no defaults of its
    own (the section's apply)."""
    return {k: v for k, v in node.items() if k not in ("required", "x-defaults")}


def schema() -> dict:
    """The JSON Schema of a tier: TierConfig's keys, one section per task (its module's
    SectionConfig; required where the module says SECTION_REQUIRED: the workflow's rules read
    it), and the shared parts task sections name by reference (lengen.tasks.base.ref)."""
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema", **object_schema(TierConfig)}
    for name, task in tasks.REGISTRY.items():
        out["properties"][name] = object_schema(task.SectionConfig)
        if getattr(task, "SECTION_REQUIRED", False):
            out["required"].append(name)
    model = object_schema(ModelConfig)
    out["$defs"] = {
        "lengths": {
            "type": "array",
            "items": {"type": "integer", "minimum": 2},
            "minItems": 1,
            "uniqueItems": True,
        },
        "runs": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_RUNS,
            "description": "training runs; at most 1,000 (the paper's: 10)",
        },
        "generation_figure": object_schema(GenerationFigure),
        # a section's model states its sizes and RoPE share (the defaults are GPT-NeoX's)
        "model": {**model, "required": ["n_layer", "n_head", "d_model", "rotary_pct"]},
        "model_keys": _overrides(model),
        "train": object_schema(TrainSpec),
        "train_keys": _overrides(object_schema(TrainSpec)),
    }
    return out
