"""Parity with a scratchpad and "jumps" (Sec. 5.2.1, App. E.2.1, Eq. (21)).

Sequence: <BOS>, b_1, ..., b_l, <SEP>, s_1, ..., s_m with b_i ~ Unif{0, 1}, jump k, m = l / k and
s_i = XOR(b_1, ..., b_{k i}) (k = 1 is the standard scratchpad b'_i of Eq. (21)). Every scratchpad
token is predicted and scored. Coupled position IDs (App. E.2.1, each input ID repeated k times):

    0, 1 (k times), 2 (k times), ..., m (k times), 0, 1, 2, ..., m.

The paper's "length" is 2l (input plus scratchpad for k = 1). Where l is not a multiple of k it is
rounded down to one (the scratchpad must end with the parity of all input bits); the paper does not
say how it handles that case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lengen.core.batch import TEST_STREAM, Example
from lengen.core.settings import setting
from lengen.tasks.base import (
    GenerationBatch,
    GenerationSection,
    Setting,
    add_scheme_argument,
    figures_setting,
    left_out_setting,
    positive_int,
    records,
)

if TYPE_CHECKING:
    from lengen.core.specs import Spec

VOCAB = ("<BOS>", "<SEP>", "0", "1")
BOS, SEP, ZERO, ONE = range(4)
SETTING = Setting(key="jump", values="jumps", prefix="k", length_axis="test length 2l")


@dataclass(frozen=True)
class TaskSpec:
    """A model's task section (`task_spec`): its jump, position scheme and lengths (2l)."""

    jump: int
    scheme: str
    train_min_len: int
    train_max_len: int
    l_max: int  # largest position ID a shifted training sequence may reach


@dataclass(frozen=True, kw_only=True)
class SectionConfig(GenerationSection):
    """A tier's `parity_scratchpad` section (Sec. 5.2.1, App. E.2, Table 3): the jumps trained,
    the training lengths 2l (even), a model set per jump and variant."""

    jumps: tuple[int, ...] = setting(
        doc="jumps k trained, one model set each (Fig. 2: 1-4)",
        items={"minimum": 1},
        minItems=1,
        uniqueItems=True,
    )
    train_min_len: int = setting(doc="shortest training length 2l", minimum=2, multipleOf=2)
    train_max_len: int = setting(doc="longest training length 2l", minimum=2, multipleOf=2)
    left_out: dict[str, tuple[str, ...]] | None = left_out_setting()
    figures: dict = figures_setting(
        "fig2",
        fig2="Fig. 2: PPC's accuracy by length, one line per jump",
        fig8="Fig. 8: the ablations (absolute, RoPE + PoSE) by length",
        fig8_equal="PPC and the ablations at equal budgets (not in the paper)",
    )


def vocabulary() -> list[str]:
    """Token strings by ID."""
    return list(VOCAB)


def vocab_size(spec: Spec) -> int:
    """Number of token IDs."""
    return len(VOCAB)


@dataclass
class Batch(GenerationBatch):
    """Examples of one length: tokens, coupled IDs, target mask (B, T) and the task's fields."""

    jump: int
    n_bits: int  # l after rounding down to a multiple of the jump

    @property
    def prompt_len(self) -> int:
        """Tokens up to and including <SEP>: what generation starts from."""
        return self.n_bits + 2


def n_bits(length: int, jump: int) -> int:
    """Input bits l for the paper's length 2l: l = length // 2 rounded down to a multiple of k."""
    bits = (length // 2) // jump * jump
    if bits < jump:
        raise ValueError(f"length 2l={length} is too short for jump {jump}")
    return bits


def coupled_ids(bits: int, jump: int) -> np.ndarray:
    """App. E.2.1 coupled IDs of one sequence: 0, each of 1..m repeated k times, 0, 1..m."""
    m = bits // jump
    scratch = np.arange(1, m + 1)
    return np.concatenate([[0], np.repeat(scratch, jump), [0], scratch]).astype(np.int64)


def sample(rng: np.random.Generator, n_examples: int, length: int, jump: int) -> Batch:
    """Draw n_examples sequences of paper length 2l = length with the given jump."""
    bits = n_bits(length, jump)
    b = rng.integers(0, 2, size=(n_examples, bits))
    scratch = np.cumsum(b, axis=1)[:, jump - 1 :: jump] % 2  # parity of the first k*i bits
    m = scratch.shape[1]
    tokens = np.concatenate(
        [
            np.full((n_examples, 1), BOS),
            ZERO + b,
            np.full((n_examples, 1), SEP),
            ZERO + scratch,
        ],
        axis=1,
    ).astype(np.int64)
    target_mask = np.zeros_like(tokens)
    target_mask[:, -m:] = 1
    ids = np.tile(coupled_ids(bits, jump), (n_examples, 1))
    return Batch(tokens, ids, target_mask, jump, bits)


def curriculum_jump(jump: int, step: int, every: int) -> int:
    """Training jump at this step: the spec's jump, or min(jump, 1 + step // every) if every > 0.

    every > 0 is a DEPARTURE from App. E.2 (which trains each jump on its own format from step
    0): jump 1 first, then 2, ..., ending on the paper's format for the rest of training. Small
    models stay on the parity loss plateau for jumps >= 2 without it (probes/scratchpad.yaml).
    """
    return jump if every <= 0 else min(jump, 1 + step // every)


def draw_train(spec: Spec, rng: np.random.Generator, step: int) -> Batch:
    """A training draw: one even length 2l ~ Unif[min, max], the jump of this step."""
    task, train = spec.task, spec.train
    jump = curriculum_jump(task.jump, step, train.jump_curriculum_steps)
    length = 2 * int(rng.integers(task.train_min_len // 2, task.train_max_len // 2 + 1))
    return sample(rng, train.batch_size, length, jump)


def train_batch(spec: Spec, rng: np.random.Generator, step: int) -> Example:
    """One training batch: a training draw with IDs by the spec's scheme (shifted in training)."""
    return draw_train(spec, rng, step).train_example(spec.task.scheme, rng, spec.task.l_max)


def heldout_example(spec: Spec, rng: np.random.Generator) -> Example:
    """Early stopping's held-out batch: a training draw (final jump) at *test-time* IDs. The test
    couples from ID 0 unshifted (App. E.2), which training's random shift rarely shows; a check at
    shifted IDs passed while the test's own in-distribution lengths were at 0.55
    (probes/scratchpad.yaml, PS_j2_curr)."""
    return draw_train(spec, rng, spec.train.steps).test_example(spec.task.scheme)


def task_spec(section: dict, variant: dict, value: int) -> dict:
    """The spec's task section of one model: jump `value`, the variant's scheme, the section's
    lengths (App. E.2.1)."""
    keys = ("train_min_len", "train_max_len", "l_max")
    return {"jump": value, "scheme": variant["scheme"], **{k: section[k] for k in keys}}


def train_lengths(section: dict) -> tuple[int, int]:
    """Shortest and longest training length of the section's models."""
    return section["train_min_len"], section["train_max_len"]


def testset(spec: Spec, eval_cfg: dict, seed: int) -> dict[int, Batch]:
    """The fixed test draws of a model's spec (the same for every variant and run)."""
    return make_testset(eval_cfg, spec.task.jump, seed)


def longest_tokens(section: dict, length: int) -> int:
    """Tokens of the longest sequence at paper length 2l = length: <BOS>, l bits, <SEP>, at most
    l scratchpad bits (for the position-ID range)."""
    return length + 2


def config_checks(name: str, section: dict) -> list[tuple[str, str]]:
    """Cross-key constraints of this task's config section: every length fits the largest jump."""
    short = min(section["train_min_len"], *section["eval"]["lengths"])
    if short // 2 < max(section["jumps"]):
        return [
            (
                f"{name}.jumps",
                f"a jump of {max(section['jumps'])} needs l >= the jump, but "
                f"the shortest length 2l = {short} has l = {short // 2}",
            )
        ]
    return []


def make_testset(eval_cfg: dict, jump: int, seed: int) -> dict[int, Batch]:
    """Fixed test draws per length 2l, each from its own generator seeded by (seed, 2l, k)."""
    return {
        length: sample(
            np.random.default_rng([seed, TEST_STREAM, length, jump]),
            eval_cfg["n_examples"],
            length,
            jump,
        )
        for length in sorted(eval_cfg["lengths"])
    }


def to_records(example: Example, batch: Batch) -> list[dict]:
    """JSON-ready rows: token strings, position IDs, target mask and the task's fields."""
    m = batch.n_bits // batch.jump
    return records(
        example,
        VOCAB,
        lambda i: {
            "jump": batch.jump,
            "length": 2 * batch.n_bits,
            "answer": VOCAB[int(example.tokens[i, -1])],
            "scratchpad_len": m,
        },
    )


def add_sample_arguments(parser) -> None:
    """`lengen sample parity_scratchpad` options (beside --n, --seed and --scheme)."""
    parser.add_argument(
        "--jump", type=positive_int, default=1, help="k: scratchpad bit i = parity of k*i bits"
    )
    parser.add_argument(
        "--length", type=positive_int, required=True, help="2l; l is the number of input bits"
    )
    add_scheme_argument(parser)


def sample_records(args) -> list[dict]:
    """`lengen sample parity_scratchpad`: examples (App. E.2.1) with the scheme's test-time IDs."""
    if args.length % 2:
        raise ValueError(f"--length must be even (it is 2l), got {args.length}")
    bits, jump = args.length // 2, args.jump
    if bits < jump:
        raise ValueError(
            f"--length {args.length}: l = {bits} input bits is too short for jump "
            f"{jump}; give {2 * jump} or more"
        )
    if bits % jump:  # the pipeline rounds l down to a multiple of k: say so, not print another
        below = bits // jump * jump * 2
        raise ValueError(
            f"--length {args.length}: l = {bits} input bits is not a multiple of "
            f"--jump {jump}; give {below} or {below + 2 * jump}"
        )
    batch = sample(np.random.default_rng(args.seed), args.n, args.length, args.jump)
    return to_records(batch.test_example(args.scheme), batch)
