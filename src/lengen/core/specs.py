"""Run specs: the self-contained JSON each workflow job receives, and its typed form.

A job sees only its own slice of the config, so Snakemake's params trigger reruns only where the
slice changed (e.g. editing a figure's style reruns that figure, not the trainings). Each job parses
its JSON once, at its entry point (`lengen.tasks.parse_spec`), into the dataclasses below; the
trainer, the task modules and the evaluator take the typed `Spec`, so a key such as `k_train` can
be followed from the config section (the task's builder) through `sparse_parity.TaskSpec.k_train`
to the eval table's `k_train` column and the figure drawn from it. Each task module builds its own
sections (`sparse_parity.train_spec`, `natural_language.train_spec`,
`lengen.tasks.generation_spec` for the generation-scored tasks) and `run_spec` wraps them in what
every job shares. `Spec.source` keeps the JSON itself: it is what model.pt stores, what MLflow
logs and what the provenance hash is taken of.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lengen.core.cli import KnownError
from lengen.core.settings import setting


class SpecError(KnownError, ValueError):
    """A spec section with a key its dataclass does not have, without a required one, or with a
    value of the wrong type."""


def _fits(value, hint) -> bool:
    """Whether a JSON value fits a field's type hint (int, float, str, bool, dict, tuple, a
    dataclass already built, unions with None; anything else is accepted)."""
    if hint is Any:
        return True
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return ok and math.isfinite(value)
    origin = typing.get_origin(hint) or hint
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:  # tuple[int, ...]: any length
            args = (args[0],) * len(value) if isinstance(value, tuple) else ()
        return (
            isinstance(value, tuple)
            and len(value) == len(args)
            and all(_fits(v, h) for v, h in zip(value, args, strict=True))
        )
    if isinstance(origin, type):
        return isinstance(value, origin)
    return True


def _build(cls, section: str, values: dict):
    """cls(**values), with an error naming the spec section and the keys when they do not fit."""
    if not isinstance(values, dict):
        raise SpecError(f"spec section {section!r}: a mapping of keys, not {values!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        known = sorted(names - {"source"})
        raise SpecError(f"spec section {section!r}: unknown key(s) {unknown}; known: {known}")
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [k for k in required if k not in values]
    if missing:
        raise SpecError(f"spec section {section!r}: missing key(s) {missing}")
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        if not _fits(value, hints[key]):
            raise SpecError(
                f"spec section {section!r}: {key} = {value!r} is not a (finite) "
                f"{getattr(hints[key], '__name__', hints[key])}"
            )
    return cls(**values)


def read_spec(arg: str) -> dict:
    """A job's --spec argument: a path to a spec JSON file (such as the spec.json beside every
    trained model) or the JSON text itself; SpecError naming what is wrong."""

    is_text = arg.lstrip().startswith("{")
    if not is_text and not Path(arg).is_file():
        raise SpecError(f"--spec {arg!r}: neither a file nor JSON text (a spec starts with '{{')")
    text = arg if is_text else Path(arg).read_text()
    where = "--spec" if is_text else arg
    try:
        values = json.loads(text, parse_constant=lambda c: float(c))
    except json.JSONDecodeError as err:
        raise SpecError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(values, dict):
        raise SpecError(f"{where}: a spec is a JSON object, not {type(values).__name__}")
    return values


EARLY_STOP = (
    "Stop before `steps` once the scored-token exact match on a fixed held-out draw from the "
    "training distribution (full k range, seed-derived) is >= target_accuracy at `patience` "
    "consecutive checks, one check every `every` steps, not before min_steps (>= steps: never "
    "on accuracy); or, with plateau_steps, once a check at or after that step is still below "
    'plateau_accuracy (default 0.6): "did not learn in N steps". The step and reason are logged '
    "(MLflow metric stopped_at, tag early_stop) and saved in model.pt."
)


@dataclass(frozen=True)
class EarlyStopSpec:
    """`train.early_stop` (lengen.train.train.EarlyStop): EARLY_STOP."""

    every: int = setting(doc="steps between held-out checks", minimum=1)
    target_accuracy: float = setting(
        doc="held-out exact match that counts as learned", exclusiveMinimum=0, maximum=1
    )
    patience: int = setting(doc="consecutive checks at target_accuracy before stopping", minimum=1)
    min_steps: int = setting(
        0, doc="no stop on accuracy before this step (>= steps: never)", minimum=0
    )
    n_examples: int = setting(512, doc="held-out examples per check", minimum=1)
    n_draws: int = setting(
        1,
        doc="training batches the held-out set is made of (each one "
        "length drawn from the training range; n_examples split evenly)",
        minimum=1,
    )
    plateau_steps: int | None = setting(
        None,
        doc="from this step on, a check below plateau_accuracy stops the run (did not learn)",
        minimum=1,
    )
    plateau_accuracy: float = setting(0.6, doc="the plateau stop's bar", minimum=0, maximum=1)


@dataclass(frozen=True)
class TrainSpec:
    """A spec's `train` section: optimizer, schedule, batch, curricula, checkpoints, early
    stopping. Each field is a config key (`train.<field>`; a variant's `train` overrides some):
    its type, default, bounds and doc are the schema's and config/README.md's
    (lengen.core.settings)."""

    steps: int = setting(
        doc="optimizer steps (a ceiling where early_stop is set); at most "
        "10,000,000 (the paper's: 50,000)",
        minimum=1,
        maximum=10_000_000,
    )
    batch_size: int = setting(
        doc="examples per optimizer step, all processes together; at "
        "most 1,048,576 (the paper's: 8,192)",
        minimum=1,
        maximum=1_048_576,
    )
    lr: float = setting(
        doc="AdamW's peak learning rate, in (0, 1] (the paper's: 5e-5 to 1e-3)",
        exclusiveMinimum=0,
        maximum=1,
    )
    weight_decay: float = setting(doc="AdamW's decoupled weight decay", minimum=0)
    warmup_steps: int = setting(doc="linear warm-up to lr over this many steps", minimum=0)
    schedule: str = setting(
        doc="the learning rate after warm-up: linear or cosine decay to "
        "min_lr_ratio x lr, or constant",
        enum=["linear", "cosine", "constant"],
    )
    micro_batch_size: int | None = setting(
        None,
        doc="examples per process per forward; batch_size / (processes x this) = "
        "gradient accumulation steps (App. F)",
        minimum=1,
    )
    min_lr_ratio: float = setting(
        0.0, doc="the schedule's final learning rate as a fraction of lr", minimum=0, maximum=1
    )
    betas: tuple[float, float] = setting(
        (0.9, 0.999),
        doc="AdamW's (beta1, beta2)",
        items={"exclusiveMinimum": 0, "exclusiveMaximum": 1},
    )
    grad_clip: float = setting(
        1.0,
        doc="clip the gradient's global L2 norm to this (0: no "
        "clipping; a fused group clips each run's own)",
        minimum=0,
    )
    checkpoint_every: int = setting(
        1000, doc="steps between checkpoints (a killed job resumes from the newest)", minimum=1
    )
    log_every: int = setting(50, doc="steps between logged losses (MLflow)", minimum=1)
    length_buckets: tuple[int, ...] = setting(
        (),
        doc="Sequence lengths a training batch is padded up to (the smallest edge >= its "
        "length; longer batches stay as drawn), the padding unscored: the loss and its gradient "
        "are the unpadded batch's, only the shapes fed change, so a compiled step (GPU tiers) "
        "builds one graph per edge instead of one per drawn length. Absent or [] = no padding.",
        items={"minimum": 1},
        uniqueItems=True,
    )
    k_curriculum_steps: int = setting(
        0,
        doc="0 = off (paper). Otherwise k ~ Unif([min(K_train, 1 + step // this)]): a "
        "departure from App. E.1 that lets small CPU models escape the parity plateau.",
        minimum=0,
    )
    jump_curriculum_steps: int = setting(
        0,
        doc="Parity with scratchpad only. 0 = off (paper). Otherwise the training jump is "
        "min(jump, 1 + step // this): jump 1 first, ending on the paper's format (a departure "
        "from App. E.2 that lets small CPU models escape the parity plateau at jumps >= 2).",
        minimum=0,
    )
    early_stop: EarlyStopSpec | None = setting(None, doc=EARLY_STOP)

    @classmethod
    def parse(cls, values: dict) -> TrainSpec:
        """From the JSON section (betas as a tuple, early_stop as its dataclass)."""
        values = dict(values)
        if "betas" in values:
            values["betas"] = tuple(values["betas"])
        if "length_buckets" in values:
            values["length_buckets"] = tuple(sorted(values["length_buckets"]))
        if values.get("early_stop"):
            values["early_stop"] = _build(EarlyStopSpec, "train.early_stop", values["early_stop"])
        return _build(cls, "train", values)


@dataclass(frozen=True)
class RuntimeConfig:
    """A tier's `runtime` section: how every training job runs (the tier's machine). Each field
    is a config key (its type, default, bound and doc the schema's and config/README.md's,
    lengen.core.settings); a job's spec carries them as its RuntimeSpec (`runtime` below), less
    fuse_runs (the plan's) and with ds_config's file read in."""

    device: str = setting(doc="where the models train and are scored", enum=["cpu", "cuda"])
    precision: str = setting(
        doc="training precision of the synthetic models (bf16: DeepSpeed's bf16 mode)",
        enum=["fp32", "bf16"],
    )
    zero_stage: int = setting(
        doc="DeepSpeed ZeRO stage of the synthetic models (the language "
        "models: natural_language.zero_stage)",
        enum=[0, 1, 2, 3],
    )
    gpus_per_job: int = setting(doc="GPUs per synthetic training job (0 on CPU)", minimum=0)
    threads_per_job: int = setting(
        doc="torch threads per job (1: jobs run in parallel, one per core)", minimum=1
    )
    ds_config: str | None = setting(
        None,
        doc="A DeepSpeed config JSON (path from the project root) merged over the computed "
        "one for every training job; batch keys it sets must agree with the train sections.",
    )
    progress: bool = setting(True, doc="progress bars on long work")
    fuse_runs: int = setting(
        1,
        doc="Train up to this many runs of one variant (sparse parity's K_train values, a "
        "generation task's jumps / depths, and their seeds: they share every shape) as one fused "
        "model in one job, and evaluate a generation task's group in one pass (lengen.train."
        "group: each keeps its own data, clipping, stop, model.pt and MLflow run); 1: one job per "
        "run. For a GPU, where a small model's step is bound by the host; on a CPU it gains "
        'nothing (docs/performance.md, "Fused runs").',
        minimum=1,
    )
    compile: str = setting(
        "none",
        doc="torch.compile the model of every training job (DeepSpeed's engine.compile): "
        "none (eager), default (Inductor), reduce-overhead (Inductor with CUDA graphs: for the "
        "host-bound 12 x 1024 models, 1.32x eager on an H100; CUDA only). A compiled step builds "
        "a graph per batch shape: set train.length_buckets with it.",
        enum=["none", "default", "reduce-overhead"],
    )


@dataclass(frozen=True)
class RuntimeSpec:
    """A spec's `runtime` section (lengen.train.runtime): device, precision, ZeRO stage, threads,
    and the DeepSpeed config JSON read in (None: the computed one alone)."""

    device: str
    precision: str
    zero_stage: int
    gpus_per_job: int = 0
    threads_per_job: int = 1
    progress: bool = True
    ds_config: dict | None = None
    compile: str = "none"  # none | default | reduce-overhead (schema: runtime.compile)
    loss_chunk_tokens: int = 0  # the loss in chunks of this many tokens (natural_language.*)


@dataclass(frozen=True)
class TrackingConfig:
    """A tier's `tracking` section (MLflow: one run per trained model and per figure); a job's
    spec carries its URI resolved and its experiment's name (TrackingSpec, `tracking_uri`)."""

    uri: str | None = setting(doc="null = sqlite:///<results_dir>/mlflow.db")
    experiment_prefix: str = setting(
        doc="MLflow experiment names are <prefix>/<section>", minLength=1
    )


@dataclass(frozen=True)
class TrackingSpec:
    """Where the run is logged: MLflow tracking URI and experiment name."""

    uri: str
    experiment: str


@dataclass(frozen=True)
class Spec:
    """One job's run spec, typed. `task` is the task module's own `TaskSpec` (e.g.
    `sparse_parity.TaskSpec`); `model` holds ModelConfig's keyword arguments (the vocabulary size
    comes from the task)."""

    experiment: str
    run_name: str
    seed: int
    task: Any
    model: dict
    train: TrainSpec
    runtime: RuntimeSpec
    tracking: TrackingSpec
    variant: str | None = None
    source: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def parse(cls, values: dict, task_specs: Mapping[str, type]) -> Spec:
        """The typed spec of a job's JSON (as run_spec builds it, or as stored in a model.pt);
        `task_specs` maps each experiment to its task's TaskSpec (lengen.tasks.parse_spec)."""
        if isinstance(values, Spec):
            return values
        values = dict(values)
        experiment = values.get("experiment")
        if experiment not in task_specs:
            raise SpecError(
                f"spec: experiment {experiment!r} is not a task; known: {sorted(task_specs)}"
            )
        task_cls = task_specs[experiment]
        sections = {
            "task": _build(task_cls, "task", values.get("task", {})),
            "model": dict(values.get("model", {})),
            "train": TrainSpec.parse(values.get("train", {})),
            "runtime": _build(RuntimeSpec, "runtime", values.get("runtime", {})),
            "tracking": _build(TrackingSpec, "tracking", values.get("tracking", {})),
        }
        return _build(cls, "spec", {**values, **sections, "source": values})

    def with_batch_size(self, batch_size: int) -> Spec:
        """The same spec drawing batches of `batch_size` (a process's micro-batch, a held-out
        draw); `source` still names the job's spec."""
        return dataclasses.replace(
            self, train=dataclasses.replace(self.train, batch_size=batch_size)
        )


def runtime(cfg: dict, ds_config: str | None = None) -> dict:
    """The runtime section of a spec, with the DeepSpeed config JSON (`ds_config`: this
    experiment's, else the runtime's) read in, so that editing the file reruns the trainings."""
    # ds_config is read in below; fuse_runs groups jobs (the plan's), it changes no job's spec
    out = {k: v for k, v in cfg["runtime"].items() if k not in ("ds_config", "fuse_runs")}
    path = ds_config or cfg["runtime"].get("ds_config")
    if path:
        out["ds_config"] = read_ds_config(path)
    return out


def run_spec(
    cfg: dict,
    experiment: str,
    run_name: str,
    seed: int,
    sections: dict,
    variant: str | None = None,
    ds_config: str | None = None,
) -> dict:
    """A job's spec: the task's own `sections` (task, model, train) inside what every job shares
    (its runtime and MLflow tracking). Each task module builds its sections (e.g.
    `tasks.sparse_parity.train_spec`; the generation-scored tasks through `generation_spec`)."""
    return {
        "experiment": experiment,
        **({"variant": variant} if variant is not None else {}),
        "run_name": run_name,
        "seed": seed,
        **sections,
        "runtime": runtime(cfg, ds_config),
        "tracking": {
            "uri": tracking_uri(cfg),
            "experiment": experiment_name(cfg["tracking"]["experiment_prefix"], experiment),
        },
    }


def experiment_name(prefix: str, experiment: str) -> str:
    """Full MLflow experiment name, e.g. 'lengen-default/sparse_parity'."""
    return f"{prefix}/{experiment}"


def tracking_uri(cfg: dict) -> str:
    """MLflow tracking URI: the configured one, or a SQLite file under results_dir."""
    uri = cfg["tracking"]["uri"]
    if uri:
        return uri
    return f"sqlite:///{Path(cfg['results_dir']).resolve() / 'mlflow.db'}"


def merge_dicts(base: dict, over: dict) -> dict:
    """`over` merged into a copy of `base`, nested dicts key by key (everything else replaces)."""
    out = dict(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merge_dicts(out[key], value) if both else value
    return out


def read_ds_config(path: str | Path) -> dict:
    """A DeepSpeed config JSON file as a dict (ValueError naming the file if it is not one); a
    relative path is taken from the working directory, else from the project root."""
    path = Path(path)
    if not path.is_absolute() and not path.exists():
        path = Path(__file__).resolve().parents[3] / path  # src/lengen/core/ -> the root
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


# What a DeepSpeed config JSON may add to the computed one: communication, buckets and
# bookkeeping, which change how a step is carried out, not what it computes. Every other key is
# the YAML's (precision, ZeRO stage, clipping, batch sizes, optimizer and schedule): a JSON that
# sets one is refused unless it agrees (ds_config_clashes), one that sets anything else is
# refused by name (ds_config_unknown).
DS_CONFIG_MAY_ADD = {
    "zero_optimization": {
        "allgather_bucket_size",
        "allgather_partitions",
        "contiguous_gradients",
        "overlap_comm",
        "reduce_bucket_size",
        "reduce_scatter",
        "round_robin_gradients",
        "stage3_max_live_parameters",
        "stage3_max_reuse_distance",
        "stage3_prefetch_bucket_size",
        "stage3_param_persistence_threshold",
        "sub_group_size",
        "use_multi_rank_bucket_allreduce",
    },
    "communication_data_type": None,
    "comms_logger": None,
    "flops_profiler": None,
    "steps_per_print": None,
    "wall_clock_breakdown": None,
    "memory_breakdown": None,
    "dump_state": None,
}
# The keys the YAML owns, each with the config key that sets it (a JSON may repeat its value)
DS_CONFIG_OWNED = {
    "train_batch_size": "train.batch_size",
    "train_micro_batch_size_per_gpu": "train.micro_batch_size",
    "gradient_accumulation_steps": "train.batch_size / train.micro_batch_size",
    "gradient_clipping": "train.grad_clip",
    "bf16.enabled": "runtime.precision",
    "fp16.enabled": "runtime.precision",
    "amp.enabled": "runtime.precision",
    "torch_autocast.enabled": "runtime.precision",
    "zero_optimization.stage": "runtime.zero_stage (natural_language.zero_stage for the language "
    "models)",
    "optimizer": "train.lr, train.betas and train.weight_decay (the trainer's AdamW)",
    "scheduler": "train.warmup_steps, train.schedule and train.min_lr_ratio",
}


PRECISION_SECTIONS = ("bf16", "fp16", "amp", "torch_autocast")


def bf16_section(zero_stage: int) -> str:
    """The DeepSpeed section that carries runtime.precision bf16. Without ZeRO (stage 0: every
    synthetic run and fused group), `torch_autocast`: fp32 weights, the forward under
    torch.autocast in bf16, the client's fused AdamW stepping the fp32 weights in one kernel.
    DeepSpeed's `bf16` section at stage 0 wraps the optimizer in its unfused fp16-style one (a
    bf16 module, fp32 master weights and gradients copied each step, an overflow check per
    tensor): on an H100 its copies and casts took 29 ms of a 149 ms fused step of 8 runs, with
    the GPU idle a third of the step (issue 63; benchmarks/measured/2026-11-27-h100). With ZeRO
    (the paper tier's language models, stage 2), `bf16`: DeepSpeed's ZeRO optimizer partitions
    those fp32 master weights across ranks."""
    return "torch_autocast" if zero_stage == 0 else "bf16"


def _dotted(user: dict, prefix: str = "") -> dict[str, object]:
    """A nested JSON object as {dotted key: value}, descending into objects."""
    out = {}
    for key, value in user.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and name not in DS_CONFIG_OWNED:
            out.update(_dotted(value, f"{name}."))
        else:
            out[name] = value
    return out


def ds_config_unknown(user: dict) -> list[str]:
    """The keys of a DeepSpeed config JSON that neither the YAML owns (DS_CONFIG_OWNED) nor a
    JSON may add (DS_CONFIG_MAY_ADD), each named in a message."""
    allowed = [k for k, sub in DS_CONFIG_MAY_ADD.items() if sub is None]
    allowed += [f"{k}.{s}" for k, sub in DS_CONFIG_MAY_ADD.items() if sub for s in sorted(sub)]
    return [
        f"ds_config sets {key}: not a key a ds_config may add (communication, buckets and logging "
        "only: lengen.core.specs.DS_CONFIG_MAY_ADD); what trains is set in the YAML"
        for key in _dotted(user)
        if key not in DS_CONFIG_OWNED
        and key.split(".")[0] not in PRECISION_SECTIONS
        and not any(key == a or key.startswith(f"{a}.") for a in allowed)
    ]


def ds_config_clashes(
    user: dict,
    grad_clip: float | None = None,
    bf16: bool | None = None,
    zero_stage: int | None = None,
) -> list[str]:
    """Where a DeepSpeed config JSON sets what the YAML owns (one source per setting: the
    config's train.grad_clip, runtime.precision, runtime.zero_stage, the trainer's optimizer and
    schedule) to another value than the given one (None: not compared); equal values pass. Each
    message names both keys. The batch keys are compared where the process count is known
    (lengen.train.runtime.deepspeed_config)."""
    keys = _dotted(user)
    precision = None if bf16 is None else "bf16" if bf16 else "fp32"
    # which section carries bf16 depends on the ZeRO stage (bf16_section): unknown, not compared
    section = None if zero_stage is None else bf16_section(zero_stage)
    mode = {
        s: None if bf16 is None or (bf16 and section is None) else bf16 and s == section
        for s in ("bf16", "torch_autocast")
    }
    want = {
        "gradient_clipping": grad_clip,
        "bf16.enabled": mode["bf16"],
        "fp16.enabled": None if bf16 is None else False,  # fp32 or bf16: never fp16
        "amp.enabled": None if bf16 is None else False,
        "torch_autocast.enabled": mode["torch_autocast"],
        "zero_optimization.stage": zero_stage,
    }
    found = [
        f"ds_config sets {key} = {keys[key]}, but {DS_CONFIG_OWNED[key]} gives "
        f"{precision if key.endswith('.enabled') else value}: set it there, not in the JSON"
        for key, value in want.items()
        if key in keys and value is not None and keys[key] != value
    ]
    for section in PRECISION_SECTIONS:  # a precision section may say `enabled`, nothing else
        extra = [k for k in keys if k.startswith(f"{section}.") and k != f"{section}.enabled"]
        found += [
            f"ds_config sets {k}: precision is runtime.precision's alone (set it there)"
            for k in extra
        ]
    found += [
        f"ds_config sets {key}: the YAML owns it ({DS_CONFIG_OWNED[key]}); set it there, not in "
        "the JSON"
        for key in ("optimizer", "scheduler")
        if key in keys
    ]
    return found
