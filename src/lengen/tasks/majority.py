"""Majority over bits (not in the paper: the plug-in example of the task interface, lengen.tasks).

Sequence: <BOS>, b_1, ..., b_n, <SEP>, a with n odd, b_i ~ Unif{0, 1} and a = 1 iff more than
half of the bits are 1; only a is predicted and scored. The answer depends on every bit, so it is
not k-sparse for any fixed k: the sparsity theory (Sec. 4) does not predict that it length-
generalizes, while C-RASP (Huang et al. 2024, "A Formal Framework for Understanding Length
Generalization in Transformers") expresses it (a count comparison) and predicts it does with
absolute positions. The per-model setting is the longest training length (n in
[train_min_len, train_max_len], odd). Position IDs are the true ones (there is nothing to
couple): 0 for <BOS>, then 1, 2, ...; each scheme shifts or draws them in training as it does for
the scratchpad tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lengen.core.batch import TEST_STREAM, Example
from lengen.core.positions import get_scheme, scheme_names
from lengen.core.settings import setting
from lengen.tasks.base import (
    GenerationBatch,
    GenerationSection,
    Setting,
    add_scheme_argument,
    figures_setting,
    positive_int,
    records,
)

if TYPE_CHECKING:
    from lengen.core.specs import Spec

VOCAB = ("<BOS>", "<SEP>", "0", "1")
BOS, SEP, ZERO, ONE = range(4)
SETTING = Setting(
    key="train_max_len", values="train_max_lens", prefix="n", length_axis="test length n"
)


@dataclass(frozen=True)
class TaskSpec:
    """A model's task section (`task_spec`): n odd in [train_min_len, train_max_len], the
    position scheme, the largest shifted training ID."""

    train_max_len: int
    scheme: str
    train_min_len: int
    l_max: int


@dataclass(frozen=True, kw_only=True)
class SectionConfig(GenerationSection):
    """A tier's `majority` section (not in the paper; the task interface's plug-in example,
    docs/extending.md "A task"): one model per position scheme and longest training length."""

    train_max_lens: tuple[int, ...] = setting(
        doc="longest training lengths n, one model each",
        items={"minimum": 1},
        minItems=1,
        uniqueItems=True,
    )
    figures: dict = figures_setting(
        "fig_majority", fig_majority="majority's accuracy by length, one line per training length"
    )


def vocab_size(spec: Spec) -> int:
    """Number of token IDs."""
    return len(VOCAB)


@dataclass
class Batch(GenerationBatch):
    """Examples of one length n: tokens, IDs 0..n+2 (`coupled_ids` holds the true IDs: majority
    has nothing to couple), target mask (B, n + 3)."""

    n_bits: int

    @property
    def prompt_len(self) -> int:
        """Tokens up to and including <SEP>: what generation starts from."""
        return self.n_bits + 2


def sample(rng: np.random.Generator, n_examples: int, n_bits: int) -> Batch:
    """Draw n_examples sequences of n_bits (odd) bits and their majority."""
    if n_bits % 2 == 0:
        raise ValueError(f"n must be odd (no ties), got {n_bits}")
    bits = rng.integers(0, 2, size=(n_examples, n_bits))
    answer = (2 * bits.sum(axis=1) > n_bits).astype(np.int64)
    tokens = np.concatenate(
        [
            np.full((n_examples, 1), BOS),
            ZERO + bits,
            np.full((n_examples, 1), SEP),
            (ZERO + answer)[:, None],
        ],
        axis=1,
    ).astype(np.int64)
    target_mask = np.zeros_like(tokens)
    target_mask[:, -1] = 1
    ids = np.tile(np.arange(n_bits + 3, dtype=np.int64), (n_examples, 1))
    return Batch(tokens, ids, target_mask, n_bits)


def draw_train(spec: Spec, rng: np.random.Generator) -> Batch:
    """A training draw: one odd n ~ Unif over the odd lengths in [train_min_len, train_max_len]."""
    task = spec.task
    n = 2 * int(rng.integers(task.train_min_len // 2, (task.train_max_len - 1) // 2 + 1)) + 1
    return sample(rng, spec.train.batch_size, n)


def train_batch(spec: Spec, rng: np.random.Generator, step: int) -> Example:
    """One training batch: a training draw with IDs by the spec's scheme (shifted / PoSE)."""
    return draw_train(spec, rng).train_example(spec.task.scheme, rng, spec.task.l_max)


def heldout_example(spec: Spec, rng: np.random.Generator) -> Example:
    """Early stopping's held-out batch: a training draw at test-time IDs."""
    return draw_train(spec, rng).test_example(spec.task.scheme)


def task_spec(section: dict, variant: dict, value: int) -> dict:
    """The spec's task section of one model: trained on n in [train_min_len, value]."""
    return {
        "train_max_len": value,
        "scheme": variant["scheme"],
        "train_min_len": section["train_min_len"],
        "l_max": section["l_max"],
    }


def train_lengths(section: dict) -> tuple[int, int]:
    """Shortest and longest training length of any model of the section."""
    return section["train_min_len"], max(section["train_max_lens"])


def testset(spec: Spec, eval_cfg: dict, seed: int) -> dict[int, Batch]:
    """Fixed test draws per length n, each from its own generator seeded by (seed, n)."""
    return {
        n: sample(np.random.default_rng([seed, TEST_STREAM, n]), eval_cfg["n_examples"], n)
        for n in sorted(eval_cfg["lengths"])
    }


def longest_tokens(section: dict, length: int) -> int:
    """Tokens of the longest sequence at length n: <BOS>, n bits, <SEP>, the answer."""
    return length + 3


def config_checks(name: str, section: dict) -> list[tuple[str, str]]:
    """Every length is odd (a majority has no ties); no scheme couples (ppc has no IDs to
    predict here)."""
    errors = [
        (f"{name}.{key}", f"{bad} even: a majority of an even number of bits can tie")
        for key, lengths in (
            ("train_min_len", [section["train_min_len"]]),
            ("train_max_lens", section["train_max_lens"]),
            ("eval.lengths", section["eval"]["lengths"]),
        )
        if (bad := [n for n in lengths if n % 2 == 0])
    ]
    errors += [
        (f"{name}.variants.{v}.scheme", f"{var['scheme']} feeds coupled IDs: majority has none")
        for v, var in section["variants"].items()
        if get_scheme(var["scheme"]).coupled
    ]
    return errors


def to_records(example: Example, batch: Batch) -> list[dict]:
    """JSON-ready rows: token strings, position IDs, target mask, the label and the length."""
    return records(
        example,
        VOCAB,
        lambda i: {
            "label": int(VOCAB[int(example.tokens[i, -1])]),  # the majority bit, as parity's label
            "length": batch.n_bits,
        },
    )


def add_sample_arguments(parser) -> None:
    """`lengen sample majority` options (beside --n and --seed)."""
    parser.add_argument("--length", type=positive_int, required=True, help="n, odd: the bits")
    add_scheme_argument(parser, scheme_names(lambda s: not s.coupled), default="absolute")


def sample_records(args) -> list[dict]:
    """`lengen sample majority`: examples with the scheme's test-time IDs."""
    if args.length % 2 == 0:
        raise ValueError(f"--length must be odd (no ties), got {args.length}")
    batch = sample(np.random.default_rng(args.seed), args.n, args.length)
    return to_records(batch.test_example(args.scheme), batch)
