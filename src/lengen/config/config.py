"""Config loading and validation: one YAML per tier, checked against its schema (lengen.config.tier)
before any job."""

from __future__ import annotations

import math
from pathlib import Path

import jsonschema
import yaml

from lengen import tasks
from lengen.config import artifacts, plan
from lengen.config.tier import schema
from lengen.core.cli import EXIT_KNOWN, KnownError, one_line_errors
from lengen.core.positions import get_scheme
from lengen.core.specs import bf16_section, ds_config_clashes, ds_config_unknown, read_ds_config


class ConfigError(KnownError, ValueError):
    """A config key or value is invalid; the message names the key path."""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (PyYAML
    keeps the last value silently)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(
                    f"{key_node.start_mark.name}:{line}: duplicate key {key!r} (first on line "
                    f"{seen[key]}); keep one"
                )
            seen[key] = line
        return super().construct_mapping(node, deep)


def read_yaml(path: str | Path):
    """A YAML file's data, with duplicate keys an error naming the file, line and key, and a
    syntax error naming the file and line."""
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except (FileNotFoundError, IsADirectoryError, PermissionError) as err:
        what = {
            FileNotFoundError: "no such file",
            IsADirectoryError: "a folder, not a file",
            PermissionError: "not readable (permissions)",
        }[type(err)]
        raise ConfigError(f"{path}: {what}; a config is a YAML file (config/<tier>.yaml)") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not a UTF-8 text file (byte {err.start}: {err.reason}); a config is YAML"
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(err, "problem", None) or err
        raise ConfigError(f"{where}: not valid YAML ({problem})") from None


def nonfinite(obj, prefix: str = "") -> list[tuple[str, str]]:
    """(key path, message) for every number that is infinite or NaN (YAML's .inf / .nan and
    JSON's Infinity / NaN pass a schema's `type: number`)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return [(prefix or "<root>", f"{obj} is not a finite number")]
    if isinstance(obj, list):
        obj = dict(enumerate(obj))
    items = obj.items() if isinstance(obj, dict) else []
    return [e for k, v in items for e in nonfinite(v, f"{prefix}.{k}" if prefix else str(k))]


def _walk(obj, prefix: str = ""):
    """(key path, mapping) for every mapping in a config, itself first."""
    if isinstance(obj, dict):
        yield prefix, obj
        for k, v in obj.items():
            yield from _walk(v, f"{prefix}.{k}" if prefix else str(k))


def _general_checks(cfg: dict) -> list[tuple[str, str]]:
    """Constraints that hold wherever their keys appear: micro-batches that divide the batch,
    warm-up within the steps, eval lengths in increasing order, the run's outputs apart from its
    results and from the committed reference."""
    errors = []
    for path, d in _walk(cfg):
        batch, micro = d.get("batch_size"), d.get("micro_batch_size")
        if isinstance(batch, int) and isinstance(micro, int) and batch % micro:
            errors.append(
                (f"{path}.micro_batch_size", f"{micro} does not divide {path}.batch_size ({batch})")
            )
        if isinstance(d.get("steps"), int) and isinstance(d.get("warmup_steps"), int):
            if d["warmup_steps"] > d["steps"]:
                errors.append((f"{path}.warmup_steps", f"must be <= steps ({d['steps']})"))
        for key in ("lengths", "test_lengths"):
            values = d.get(key)
            if isinstance(values, list) and values != sorted(set(values)):
                errors.append((f"{path}.{key}" if path else key, "must be increasing, no repeats"))
    nl = cfg.get("natural_language", {})
    paths = {
        "results_dir": cfg["results_dir"],
        "reports_dir": cfg["reports_dir"],
        "natural_language.corpus.c4_dir": nl.get("corpus", {}).get("c4_dir"),
        "natural_language.tokenizer.dir": nl.get("tokenizer", {}).get("dir"),
    }
    for key, value in paths.items():
        if isinstance(value, str) and "$" in value:  # `datasets` expanded $HOME into a path
            errors.append(
                (
                    key,
                    f"{value!r} has a `$`: write the path itself (no variable is "
                    "expanded: a tool that expands it would write elsewhere)",
                )
            )
        elif isinstance(value, str) and value.startswith("~"):  # issue 66: a folder named `~`
            errors.append(
                (
                    key,
                    f"{value!r} starts with `~`: write the path itself (`~` is not "
                    "expanded: it would make a folder named ~ here)",
                )
            )
    reports, results = Path(cfg["reports_dir"]), Path(cfg["results_dir"])
    if reports.resolve() == results.resolve():
        errors.append(("reports_dir", "must differ from results_dir (reports_dir/ holds tables)"))
    for key in ("results_dir", "reports_dir"):
        if (inside := protected_folder(cfg[key])) is not None:
            errors.append(
                (
                    key,
                    f"{cfg[key]!r} is {Path(cfg[key]).resolve()}, inside {inside}: "
                    f"{PROTECTED[inside.name]}; no run writes there",
                )
            )
    return errors


# the project's folders a run never writes into, and why
PROTECTED = {
    "reference": "the committed results (a refresh replaces them, lengen.report.refresh)",
    "src": "the code",
    "config": "the tiers' configs",
    "tests": "the tests",
    ".git": "the repository",
}


def protected_folder(value: str) -> Path | None:
    """The project folder (PROTECTED) that `value` falls inside once resolved (`..`, symlinks,
    an absolute path), in the checkout it is run from or the one this package lives in; else
    None."""
    target = Path(value).resolve()
    checkouts = {Path.cwd().resolve(), Path(__file__).resolve().parents[3]}
    for root in checkouts:
        if not (root / "Snakefile").is_file():
            continue  # not a checkout of the project (an installed package's folder)
        for name in PROTECTED:
            folder = (root / name).resolve()
            if target == folder or folder in target.parents:
                return root / name
    return None


# "integer" is an int, not a float that happens to be whole (`steps: 6.0`), nor a bool
STRICT = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool)
    ),
)


def _path(error: jsonschema.ValidationError) -> str:
    """Dotted key path of a schema error, e.g. 'sparse_parity.train.lr'."""
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "additionalProperties":
        extra = set(error.instance) - set(error.schema.get("properties", {}))
        parts.append(",".join(sorted(extra)))
    if error.validator == "required":
        missing = [r for r in error.validator_value if r not in error.instance]
        parts.append(",".join(missing))
    return ".".join(parts) or "<root>"


def _theory_checks(cfg: dict) -> list[tuple[str, str]]:
    """Every theory test length is at least twice the training length (Lbar >= 2L, Prop. C.3)."""
    th = cfg.get("theory")
    if not th:
        return []
    short = [n for n in th["test_lengths"] if n < 2 * th["L"]]
    return (
        [
            (
                "theory.test_lengths",
                f"{short} below 2L = {2 * th['L']}: the risks are stated "
                "for Lbar >= 2L (Prop. C.3)",
            )
        ]
        if short
        else []
    )


def _cross_checks(cfg: dict) -> list[tuple[str, str]]:
    """Constraints between keys that JSON Schema cannot express."""
    errors = []
    rt = cfg["runtime"]
    threads = rt["threads_per_job"]
    if rt.get("compile") == "reduce-overhead" and rt["device"] != "cuda":
        errors.append(("runtime.compile", "reduce-overhead (CUDA graphs) needs device cuda"))
    for kind in ("train", "eval") if "jobs" in cfg else ():  # a model's job runs its threads
        if cfg["jobs"][kind]["cpus"] < threads:
            errors.append((f"jobs.{kind}.cpus", f"must be >= runtime.threads_per_job ({threads})"))
    generation = tasks.generation_tasks()
    for name, task in tasks.REGISTRY.items():
        if name not in cfg:
            continue
        errors += _model_checks(name, cfg[name])
        if name in generation:  # the checks every generation-scored task shares, then its own
            errors += _generation_checks(name, cfg[name])
        else:
            errors += task.config_checks(name, cfg[name])
    for key, path in (
        ("runtime.ds_config", cfg["runtime"].get("ds_config")),
        ("natural_language.ds_config", cfg.get("natural_language", {}).get("ds_config")),
    ):
        if path:
            try:
                user = read_ds_config(path)
            except (OSError, ValueError) as err:
                errors.append((key, str(err)))
                continue
            # the train sections the JSON applies to: the language models', or every one
            scope = cfg["natural_language"] if key.startswith("natural") else cfg
            stage = scope.get("zero_stage", rt["zero_stage"])
            clips = {t["grad_clip"] for _, t in _walk(scope) if "grad_clip" in t and "steps" in t}
            found = ds_config_unknown(user)
            found += ds_config_clashes(user, bf16=rt["precision"] == "bf16", zero_stage=stage)
            found += [m for clip in sorted(clips) for m in ds_config_clashes(user, grad_clip=clip)]
            errors += [(key, m) for m in found]
    return errors + _memory_checks(cfg) + _disk_checks(cfg)


def _models(name: str, section: dict) -> dict[str, dict]:
    """Every model a section builds, by key path: the section's `model`, and each variant's (or
    extra scheme's) own `model` keys over it."""
    base = section.get("model", {})
    models = {f"{name}.model": base}
    groups = {
        "variants": section.get("variants", {}),
        "schemes.variants": section.get("schemes", {}).get("variants", {}),
    }
    for group, variants in groups.items():
        for v, var in variants.items():
            if isinstance(var, dict) and "model" in var:
                models[f"{name}.{group}.{v}.model"] = {**base, **var["model"]}
    return models


def _model_checks(name: str, section: dict) -> list[tuple[str, str]]:
    """Every model a section builds has d_model divisible by n_head."""
    return [
        (f"{key}.d_model", "must be divisible by n_head")
        for key, model in _models(name, section).items()
        if "d_model" in model and "n_head" in model and model["d_model"] % model["n_head"]
    ]


TRAIN_BYTES_PER_PARAM = 16  # fp32 weights, gradients and AdamW's two moments


def layer_params(model: dict) -> int:
    """Parameters of a GPT-NeoX model's layers (each: QKV and output projections with biases,
    the MLP, two LayerNorms), without embeddings or heads: a lower bound of its size that needs
    no vocabulary."""
    d, n = model["d_model"], model["n_layer"]
    mlp = model.get("d_mlp") or 4 * d
    return n * (4 * d * d + 4 * d + 2 * d * mlp + mlp + d + 4 * d)


def _memory_checks(cfg: dict) -> list[tuple[str, str]]:
    """On a CPU tier, a model whose training state alone (TRAIN_BYTES_PER_PARAM for each of its
    layers' parameters, before embeddings and activations) exceeds its job's `mem_mb` is an error
    naming both keys: it would die mid-job (a 24 x 4096 model reached 9 GB and was killed)."""
    if cfg["runtime"]["device"] != "cpu" or "jobs" not in cfg:
        return []
    errors = []
    for name in tasks.REGISTRY:
        if name not in cfg:
            continue
        job = "natural_language_train" if name == "natural_language" else "train"
        if job not in cfg["jobs"]:
            continue
        limit = cfg["jobs"][job]["mem_mb"]
        for key, model in _models(name, cfg[name]).items():
            if not {"d_model", "n_layer"} <= model.keys():
                continue
            need = layer_params(model) * TRAIN_BYTES_PER_PARAM / 2**20
            if need > limit:
                errors.append(
                    (
                        key,
                        f"training needs at least {need:,.0f} MB (its layers' "
                        f"{layer_params(model) / 1e6:,.0f} M parameters x "
                        f"{TRAIN_BYTES_PER_PARAM} bytes), more than jobs.{job}.mem_mb "
                        f"({limit}): raise mem_mb or shrink the model",
                    )
                )
    return errors


# What one run's checkpoint holds per parameter (lengen.train.lifecycle.Checkpoints): fp32
# weights and AdamW's two moments, in fp32 and in bf16 without ZeRO (torch_autocast keeps fp32
# weights: lengen.core.specs.bf16_section); DeepSpeed's bf16 section (with ZeRO) also saves the
# module's bf16 copy beside its fp32 master weights. A model.pt holds the fp32 weights.
CHECKPOINT_BYTES_PER_PARAM = {"fp32": 12, "bf16": 12, "bf16 with ZeRO": 14}
MODEL_FILE_BYTES_PER_PARAM = 4


def checkpoint_mb(cfg: dict) -> dict[str, float]:
    """The peak disk of each synthetic experiment's largest training job, MB: its group's
    (runtime.fuse_runs runs, or fewer where a variant has fewer) two checkpoints on the disk at
    once (the newest and the one being written), or at its end the newest and every member's
    model.pt, whichever is more. Counted from the layers' parameters (layer_params: the
    synthetic tasks' embeddings are small), so a lower bound."""
    rt = cfg["runtime"]
    zero = rt["precision"] == "bf16" and bf16_section(rt["zero_stage"]) == "bf16"
    per = CHECKPOINT_BYTES_PER_PARAM["bf16 with ZeRO" if zero else rt["precision"]]
    out = {}
    for name in plan.experiments(cfg):
        models = [
            m for m in _models(name, cfg[name]).values() if {"d_model", "n_layer"} <= m.keys()
        ]
        params = max(layer_params(m) for m in models)
        runs = max(len(g) for v in cfg[name]["variants"] for g in plan.groups(cfg, name, v))
        ckpt = runs * params * per
        train = cfg[name]["train"]  # checkpoints at each multiple of checkpoint_every < steps
        written = (train["steps"] - 1) // train["checkpoint_every"]
        copies = min(2, written)  # the newest, and the one being written (after the first)
        at_end = (ckpt if written else 0) + runs * params * MODEL_FILE_BYTES_PER_PARAM
        out[name] = max(copies * ckpt, at_end) / 2**20
    return out


TOKEN_BYTES = 2  # a language-model token on disk (lengen.data.tokens: uint16)


def disk_mb(cfg: dict, jobs_at_once: int = 1) -> dict[str, float]:
    """A tier's peak disk under results_dir, MB, from its config alone (a lower bound: layers'
    parameters only, as checkpoint_mb): every model file it keeps (each synthetic run's, the
    language models'), their token files, and the checkpoints of `jobs_at_once` training jobs on
    the disk at once (each its largest: checkpoint_mb; a run deletes its own when it ends).
    {"models": ..., "data": ..., "checkpoints": ..., "total": ...}."""
    per_run = []
    for name in plan.experiments(cfg):
        models = _models(name, cfg[name])
        for variant in plan.variants(cfg, name):
            model = models.get(variant) or next(iter(models.values()))
            n = len(plan.runs(cfg, name, variant))
            per_run += [layer_params(model) * MODEL_FILE_BYTES_PER_PARAM] * n
    ckpts = list(checkpoint_mb(cfg).values())
    data = 0.0
    nl = cfg.get("natural_language")
    if nl:
        params = layer_params(nl["model"])
        per_run += [params * MODEL_FILE_BYTES_PER_PARAM] * 2  # h_short, h_long
        zero = nl.get("zero_stage", cfg["runtime"]["zero_stage"])
        per = CHECKPOINT_BYTES_PER_PARAM["bf16 with ZeRO" if zero else cfg["runtime"]["precision"]]
        ckpts.append(2 * params * per / 2**20)
        data = sum(nl["max_tokens"].values()) * TOKEN_BYTES / 2**20
    models_mb = sum(per_run) / 2**20
    out = {"models": models_mb, "data": data, "checkpoints": jobs_at_once * max(ckpts, default=0)}
    out["total"] = sum(out.values())
    return out


def gb(mb: float) -> str:
    """A size in MB as the docs state it: GB to one decimal from 1 GB; MB, whole from 10 MB, to
    one decimal below (never rounded up to 1 MB: three parts of 0.2 MB sum to 0.6 MB, not 1)."""
    if mb >= 1024:
        return f"{mb / 1024:,.1f} GB"
    return f"{mb:,.0f} MB" if mb >= 10 else f"{mb:.1f} MB"


def _job_checks(cfg: dict) -> list[tuple[str, str]]:
    """Each `jobs` kind asks for its minutes one way: a fixed `runtime`, or (a training kind)
    `step_s` with its `margin`."""
    errors = []
    for kind, job in cfg.get("jobs", {}).items():
        key = f"jobs.{kind}"
        timed = {"step_s", "margin", "startup_min", "max_runtime"} & job.keys()
        if "runtime" in job and timed:
            errors.append(
                (
                    key,
                    f"gives runtime and {', '.join(sorted(timed))}: a fixed runtime, "
                    "or step_s with margin, not both",
                )
            )
        elif timed and "step_s" not in job:
            errors.append((f"{key}.step_s", f"{', '.join(sorted(timed))} need step_s"))
        elif "runtime" not in job and "step_s" not in job:
            errors.append((key, "needs runtime (minutes), or step_s with margin (a training kind)"))
        elif "step_s" in job and kind not in plan.TRAINING_KINDS:
            kinds = ", ".join(plan.TRAINING_KINDS)
            errors.append(
                (f"{key}.step_s", f"only a training kind ({kinds}) has steps to time: give runtime")
            )
        elif "step_s" in job and "margin" not in job:
            errors.append(
                (
                    f"{key}.margin",
                    "step_s needs a margin (>= 1): the step time is one GPU's, measured",
                )
            )
    return errors


def _disk_checks(cfg: dict) -> list[tuple[str, str]]:
    """A stated jobs.train.disk_mb below what a synthetic training job's checkpoints need
    (checkpoint_mb) is an error naming both: the job would stop on a full disk mid-run."""
    stated = cfg.get("jobs", {}).get("train", {}).get("disk_mb")
    if stated is None:
        return []
    return [
        (
            "jobs.train.disk_mb",
            f"{stated} MB, but {name}'s largest training job needs at least "
            f"{need:,.0f} MB (two checkpoints of its group, lengen.config.config.checkpoint_mb): "
            "raise disk_mb, or lower runtime.fuse_runs",
        )
        for name, need in checkpoint_mb(cfg).items()
        if need > stated
    ]


def _generation_checks(name: str, section: dict) -> list[tuple[str, str]]:
    """Cross-key constraints of a generation-scored experiment (Sec. 5.2): those every such task
    shares, then the task's own (its `config_checks`)."""
    task = tasks.get(name)
    errors = []
    shortest_train, longest_train = task.train_lengths(section)
    if shortest_train > longest_train:
        errors.append((f"{name}.train_min_len", "must be <= the longest training length"))
    longest = max(max(section["eval"]["lengths"]), longest_train)
    needed = task.longest_tokens(section, longest)
    if needed > section["l_max"]:
        errors.append((f"{name}.l_max", f"must be >= {needed}, the longest sequence's true IDs"))
    for var_name, var in section["variants"].items():
        key = f"{name}.variants.{var_name}"
        if "section" in var:  # the variant's own training range / settings: the same constraints
            own = tasks.variant_section(section, var_name)
            own_short, own_long = task.train_lengths(own)
            if own_short > own_long:
                errors.append((f"{key}.section.train_min_len", "must be <= train_max_len"))
            errors += [
                (f"{key}.section{k[len(name) :]}", message)
                for k, message in task.config_checks(name, own)
                if not k.startswith(f"{name}.variants.")  # reported once, from the section
            ]
        if get_scheme(var["scheme"]).coupled and var.get("scratchpad", True) is False:
            errors.append((f"{key}.scheme", f"{var['scheme']} needs a scratchpad to couple"))
    for fig, spec in section["figures"].items():
        if fig == "style":
            continue
        missing = set(spec["panels"]) - set(section["variants"])
        if missing:
            errors.append((f"{name}.figures.{fig}.panels", f"{sorted(missing)} not in variants"))
    errors += task.config_checks(name, section)
    return errors


def _figure_checks(cfg: dict) -> list[tuple[str, str]]:
    """A figure the config adds (artifacts.added_figures) is drawn to <key>.png: the key must
    name no other figure or report file of the run, nor another section's added figure."""
    taken = set(artifacts.FIGURES) | {Path(f).stem for f, _ in artifacts.TABLES.values()}
    taken |= {f"{name}_accuracy" for name in tasks.generation_tasks()}
    errors, seen = [], set()
    for fig in artifacts.added_figures(cfg):
        stem = fig.key
        if stem in taken or stem in seen or stem.startswith("sparse_parity_attention"):
            errors.append(
                (
                    f"{fig.section}.figures.{stem}",
                    f"{stem}.png is another file of the run; pick another key",
                )
            )
        seen.add(stem)
    return errors


def validate(cfg: dict) -> dict:
    """Return cfg unchanged if valid; raise ConfigError naming every bad key otherwise."""
    validator = STRICT(schema())
    errors = nonfinite(cfg) + [
        (_path(e), e.message)
        for e in sorted(validator.iter_errors(cfg), key=lambda e: list(e.absolute_path))
    ]
    if not errors:
        errors = (
            _general_checks(cfg)
            + _job_checks(cfg)
            + _theory_checks(cfg)
            + _cross_checks(cfg)
            + _figure_checks(cfg)
        )
    if errors:
        lines = "\n".join(f"  {key}: {msg}" for key, msg in errors)
        raise ConfigError(f"invalid config:\n{lines}")
    return cfg


def _mapping(path: Path) -> dict:
    """A tier file's top-level mapping (an empty file or a list is an error naming the file)."""
    cfg = read_yaml(path)
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: empty, or not a mapping of keys at top level")
    return cfg


def merged(base: dict, over: dict) -> dict:
    """`over` on top of `base`: mappings merge key by key, anything else (a list, a number, null)
    replaces the base's value."""
    out = dict(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merged(out[key], value) if both else value
    return out


def _dropped(cfg: dict, dotted: str, where: Path) -> dict:
    """cfg without the key at a dotted path (`parity_scratchpad.train.early_stop`); a path that
    names nothing is an error naming the file (a typo would otherwise keep the base's value)."""
    *parents, last = dotted.split(".")
    out = dict(cfg)
    node = out
    for key in parents:
        if not isinstance(node.get(key), dict):
            break
        node[key] = dict(node[key])
        node = node[key]
    else:
        if last in node:
            del node[last]
            return out
    raise ConfigError(f"{where}: extends.drop: {dotted!r} names no key of the base")


def read_tier(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict:
    """A tier file as one whole config, before validation: a file that says `extends: BASE.yaml`
    (a path beside it) lists only what differs from its base, which is read first (itself
    extending another, or whole) and merged under it (`merged`); `extends: {file: BASE.yaml,
    drop: [a.b, ...]}` also removes base keys the tier does not have (a default then applies).
    The result has no `extends` key: the merged config is what is validated, hashed and logged
    (issue: tiers state their differences). A cycle or a missing base names the files."""
    path = Path(path)
    cfg = _mapping(path)
    if "extends" not in cfg:
        return cfg
    spec = cfg.pop("extends")
    if isinstance(spec, str):
        spec = {"file": spec}
    if not isinstance(spec, dict) or set(spec) - {"file", "drop"} or "file" not in spec:
        raise ConfigError(f"{path}: extends: a file name, or {{file: NAME, drop: [KEY, ...]}}")
    base_path = path.parent / spec["file"]
    if base_path.resolve() in {p.resolve() for p in (*_seen, path)}:
        chain = " -> ".join(str(p) for p in (*_seen, path, base_path))
        raise ConfigError(f"{path}: extends goes round in a circle: {chain}")
    if not base_path.is_file():
        raise ConfigError(f"{path}: extends: {base_path} does not exist")
    base = read_tier(base_path, (*_seen, path))
    for dotted in spec.get("drop", []):
        base = _dropped(base, dotted, path)
    return merged(base, cfg)


def read_tier_at(path: str | Path, commit: str, root: str | Path = ".") -> dict:
    """A tier file (`path`, relative to the git checkout `root`) as it was at `commit`, its
    `extends` chain as of the same commit, merged (read_tier), before validation: the config a
    run of that commit was made with. A commit or file the checkout's history lacks is a
    ConfigError naming both (a shallow clone needs `git fetch --unshallow`)."""
    import subprocess
    import tarfile
    import tempfile
    from io import BytesIO

    folder = Path(path).parent.as_posix()
    shown = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", commit, folder], capture_output=True
    )
    if shown.returncode:
        raise ConfigError(
            f"{path}@{commit}: not in the checkout's git history "
            f"({shown.stderr.decode().strip()}; a shallow clone needs "
            "`git fetch --unshallow`)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(shown.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        if not (Path(tmp) / path).is_file():
            raise ConfigError(f"{path}@{commit}: no such file at that commit")
        return read_tier(Path(tmp) / path)


def load(path: str | Path) -> dict:
    """Read a tier file (its `extends` chain merged: read_tier) and validate it; a syntax error
    or an empty file names the file (and the line), which Snakemake's own message does not."""
    return validate(read_tier(path))


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: python -m lengen.config.config FILE... checks config files before a run (exit 2 on
    error, as every tool's known error)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("files", nargs="+", type=Path)
    failed = False
    for path in parser.parse_args(argv).files:
        try:
            cfg = load(path)
            disk = disk_mb(cfg)
            print(
                f"{path}: valid; peak disk under {cfg['results_dir']} ~{gb(disk['total'])} "
                f"(model files {gb(disk['models'])}, token files {gb(disk['data'])}, one "
                f"training job's checkpoints {gb(disk['checkpoints'])}; each training job "
                "running beside it adds its checkpoints; the MLflow store, logs and reports "
                "add more: benchmarks/disk.py measures a whole run)"
            )
        except (ConfigError, OSError) as err:
            print(f"{path}: {err}" if isinstance(err, OSError) else str(err), file=sys.stderr)
            failed = True
    if failed:
        raise SystemExit(EXIT_KNOWN)


if __name__ == "__main__":
    main()
