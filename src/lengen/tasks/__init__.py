"""Tasks of the paper (App. E synthetic tasks; C4 text, App. F), one module each, behind one
interface; nothing outside a task module names a task.

Every task module exposes `SectionConfig` (its tier-YAML section's keys, types, bounds and docs,
lengen.core.settings fields: lengen.config.tier makes the schema and config/README.md from it;
`SECTION_REQUIRED = True` where every tier must have the section), `TaskSpec` (a frozen
dataclass: the typed task section of a run spec, lengen.core.specs.Spec.task),
`vocab_size(spec)` and `train_batch(spec, rng, step)`, the latter returning a
`lengen.core.batch.Example` batch (tokens, position IDs, target mask) exactly as the model is
fed, `config_checks(name, section)` (its config section's cross-key constraints, as
(key, message) pairs; lengen.config.config runs them), and, for `lengen sample`,
`add_sample_arguments(parser)` and `sample_records(args)`. `spec` is always the typed
`lengen.core.specs.Spec` (`parse_spec` below). A task imports torch only inside the functions
that run a model, so that the plan, which reads every task, validates a config without it.

A task scored on a stored test set (sparse parity) also exposes `write_testset`,
`testset_config`, `score(model, spec, testset, batch_size, progress)` (its eval-table rows),
`TABLE_KEYS` and `TABLE_ORDER`.

Tasks scored by greedy generation over test lengths, one model per (variant, setting, run)
(the scratchpad tasks of Sec. 5.2) also expose:

- `SETTING`: the per-model setting (jump, depth, ...), a `Setting`;
- `task_spec(section, variant, value)`: the spec's task section for one model;
- `train_lengths(section)`: the shortest and longest training length of its models (of one
  variant's models: pass `variant_section(section, name)`);
- `longest_tokens(section, length)`: tokens of the longest sequence at a length (ID range);
- `testset(spec, eval_cfg, seed)`: the fixed test draws per length, each a batch with
  `prompt_len` and `test_example(scheme)` (what the model is fed at test time): a subclass of
  `lengen.tasks.base.GenerationBatch`, the shared skeleton (its training view `train_example`,
  and `base.records` for `lengen sample`'s rows);
- `config_checks(name, section)`: as every task, after the checks all such tasks share;
- `heldout_example(spec, rng)` (optional): early stopping's held-out batch at test-time IDs.

`lengen.analysis.evaluate` and `.tables`, the config checks, the CLI, the report and the
workflow rules dispatch through `get` and `generation_tasks`; job specs are parsed by
`parse_spec` and built by each task (`generation_spec` for the generation-scored ones).
"""

from __future__ import annotations

from types import ModuleType

from lengen.core.positions import model_position
from lengen.core.specs import Spec, run_spec
from lengen.tasks import (
    majority,
    natural_language,
    parity_scratchpad,
    sparse_parity,
    variable_assignment,
)
from lengen.tasks.base import Setting

__all__ = [
    "REGISTRY",
    "Setting",
    "generation_spec",
    "generation_tasks",
    "get",
    "parse_spec",
    "table_keys",
    "table_order",
    "variant_section",
]

REGISTRY: dict[str, ModuleType] = {
    "sparse_parity": sparse_parity,
    "parity_scratchpad": parity_scratchpad,
    "variable_assignment": variable_assignment,
    "natural_language": natural_language,
    "majority": majority,  # not in the paper: the plug-in example (docs/extending.md, "A task")
}


def get(name: str) -> ModuleType:
    """Task module by experiment name."""
    if name not in REGISTRY:
        raise KeyError(f"unknown task {name!r}; known: {sorted(REGISTRY)}")
    return REGISTRY[name]


def generation_tasks() -> dict[str, ModuleType]:
    """The tasks scored by greedy generation (those with a per-model `SETTING`), by name."""
    return {name: t for name, t in REGISTRY.items() if hasattr(t, "SETTING")}


def variant_section(section: dict, variant: str) -> dict:
    """A generation-scored experiment's config section as one variant's models see it: the
    section with the variant's `section` keys (its own training range, jumps / depths, eval
    lengths) in place of the section's. A variant without `section` sees it unchanged."""
    overrides = section["variants"][variant].get("section", {})
    return {**section, **overrides} if overrides else section


def table_keys(name: str) -> tuple[str, ...]:
    """Integer-valued columns of a per-model eval table of this task (beside `accuracy`): the
    task's `TABLE_KEYS` (a task with a stored test set), else its setting, seed, length, n."""
    task = get(name)
    if hasattr(task, "TABLE_KEYS"):
        return task.TABLE_KEYS
    return (task.SETTING.key, "seed", "length", "n") if hasattr(task, "SETTING") else ()


def table_order(name: str) -> tuple[str, ...]:
    """Sort order of a combined eval table of this task (`TABLE_ORDER` where it has one)."""
    task = get(name)
    if hasattr(task, "TABLE_ORDER"):
        return task.TABLE_ORDER
    return ("variant", task.SETTING.key, "seed", "length") if hasattr(task, "SETTING") else ()


def parse_spec(values: dict | Spec) -> Spec:
    """The typed spec of a job's JSON (or of the spec stored in a model.pt): lengen.core.specs.Spec
    with the task section as its task's TaskSpec."""
    return Spec.parse(values, {name: task.TaskSpec for name, task in REGISTRY.items()})


def generation_spec(cfg: dict, experiment: str, variant: str, value: int, run: int) -> dict:
    """Spec of run `run` of a generation-scored task's variant (a scratchpad task, Sec. 5.2) at
    its setting `value` (jump, depth: the task's SETTING); the task section is the task's own
    `task_spec` of the section as the variant sees it (its own training range, if it has one).

    Run r trains from seed cfg.seed + r; every run is scored on the same test set (cfg.seed).
    """
    section = variant_section(cfg[experiment], variant)
    task_module, var = get(experiment), section["variants"][variant]
    sections = {
        "task": task_module.task_spec(section, var, value),
        "model": {
            **section["model"],
            **var.get("model", {}),
            **model_position(var["scheme"]),
            "l_max": section["l_max"],
        },
        "train": {**section["train"], **var.get("train", {})},
    }
    run_name = f"{variant}/{task_module.SETTING.prefix}{value}/seed{run}"  # as its folder
    return run_spec(cfg, experiment, run_name, cfg["seed"] + run, sections, variant)
