"""Synthetic tasks of the paper (App. E), one module each, behind one small interface.

A task module exposes `vocabulary(spec)` and `train_batch(spec, rng, step)`, the latter returning
a `lengen.data.Example` batch (tokens, position IDs, target mask) exactly as the model is fed.
"""

from __future__ import annotations

from types import ModuleType


def get(name: str) -> ModuleType:
    """Task module by experiment name."""
    from lengen.tasks import sparse_parity

    tasks = {"sparse_parity": sparse_parity}
    if name not in tasks:
        raise KeyError(f"unknown task {name!r}; known: {sorted(tasks)}")
    return tasks[name]
