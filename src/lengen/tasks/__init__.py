"""Tasks of the paper (App. E synthetic tasks; C4 text, App. F), one module each, behind one
small interface.

A task module exposes `vocab_size(spec)` and `train_batch(spec, rng, step)`, the latter returning
a `lengen.data.Example` batch (tokens, position IDs, target mask) exactly as the model is fed.
"""

from __future__ import annotations

from types import ModuleType

from lengen.tasks import c4, parity_scratchpad, sparse_parity, variable_assignment

REGISTRY: dict[str, ModuleType] = {
    "sparse_parity": sparse_parity,
    "parity_scratchpad": parity_scratchpad,
    "variable_assignment": variable_assignment,
    "natural_language": c4,
}


def get(name: str) -> ModuleType:
    """Task module by experiment name."""
    if name not in REGISTRY:
        raise KeyError(f"unknown task {name!r}; known: {sorted(REGISTRY)}")
    return REGISTRY[name]
