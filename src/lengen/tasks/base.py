"""Shared pieces of the task interface (lengen.tasks): the skeleton of a generation-scored task
(its per-model setting; a test draw's batch with its training and test-time views; the
`lengen sample` record fields every such task prints) and the argument types of `lengen sample`
options."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from lengen.core.batch import Example
from lengen.core.positions import scheme_names, scheme_test_ids, scheme_train_ids


@dataclass(frozen=True)
class Setting:
    """What one model of a generation-scored task is trained at: the spec's task key (`jump`),
    the config section's list of values (`jumps`), the results-path prefix (`k` in k2/) and the
    figures' length axis."""

    key: str
    values: str
    prefix: str
    length_axis: str


@dataclass
class GenerationBatch:
    """Examples of one length of a generation-scored task: tokens, the task's own position IDs
    (coupled where the task couples, else its true IDs) and the target mask, each (B, T). A task's
    `Batch` adds its fields and `prompt_len` (the tokens generation starts from)."""

    tokens: np.ndarray
    coupled_ids: np.ndarray
    target_mask: np.ndarray

    def test_example(self, scheme: str) -> Example:
        """What the model is fed at test time under a scheme: coupled IDs from 0 (ppc) or true
        IDs (lengen.core.positions.scheme_test_ids)."""
        return Example(self.tokens, scheme_test_ids(scheme, self.coupled_ids), self.target_mask)

    def train_example(self, scheme: str, rng: np.random.Generator, l_max: int) -> Example:
        """A training batch: the same draw with the scheme's training IDs (shifted, PoSE; the
        draw of the shift comes from `rng` after the draw of the tokens)."""
        ids = scheme_train_ids(scheme, rng, self.coupled_ids, l_max)
        return Example(self.tokens, ids, self.target_mask)


def records(example: Example, vocab, fields) -> list[dict]:
    """`lengen sample` rows of a generation-scored task: token strings, position IDs and target
    mask as fed, then the task's own `fields(i)` of row i."""
    return [
        {
            "tokens": [vocab[t] for t in example.tokens[i]],
            "position_ids": example.position_ids[i].tolist(),
            "target_mask": example.target_mask[i].tolist(),
            **fields(i),
        }
        for i in range(len(example.tokens))
    ]


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_scheme_argument(
    parser: argparse.ArgumentParser, choices: tuple[str, ...] | None = None, default: str = "ppc"
) -> None:
    """`--scheme`: which position IDs a sampled example shows (every scheme of
    lengen.core.positions.SCHEME_TABLE unless `choices` says)."""
    parser.add_argument(
        "--scheme",
        choices=choices or scheme_names(),
        default=default,
        help="the position scheme whose test-time IDs are printed (lengen.core.positions)",
    )
