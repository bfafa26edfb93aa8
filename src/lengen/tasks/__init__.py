"""Tasks of the paper (App. E synthetic tasks; C4 text, App. F), one module each, behind one
interface; nothing outside a task module names a task.

Every task module exposes `TaskSpec` (a frozen dataclass: the typed task section of a run spec,
lengen.config.specs.Spec.task), `vocab_size(spec)` and `train_batch(spec, rng, step)`, the latter
returning a `lengen.data.data.Example` batch (tokens, position IDs, target mask) exactly as the
model is fed, and, for `lengen sample`, `add_sample_arguments(parser)` and `sample_records(args)`.
`spec` is always the typed `lengen.config.specs.Spec`.

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
  `prompt_len` and `test_example(scheme)` (what the model is fed at test time);
- `config_checks(name, section)`: the task's cross-key constraints, as (key, message) pairs;
- `heldout_example(spec, rng)` (optional): early stopping's held-out batch at test-time IDs.

`lengen.analysis.evaluate`, `lengen.config.specs`, the CLI, the report and the workflow rules
dispatch through `get` and `generation_tasks`.
"""

from __future__ import annotations

from types import ModuleType

from lengen.tasks import c4, majority, parity_scratchpad, sparse_parity, variable_assignment
from lengen.tasks.base import Setting

__all__ = [
    "REGISTRY",
    "Setting",
    "generation_tasks",
    "get",
    "table_keys",
    "table_order",
    "variant_section",
]

REGISTRY: dict[str, ModuleType] = {
    "sparse_parity": sparse_parity,
    "parity_scratchpad": parity_scratchpad,
    "variable_assignment": variable_assignment,
    "natural_language": c4,
    "majority": majority,  # not in the paper: the plug-in example (README, "Adding a task")
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
