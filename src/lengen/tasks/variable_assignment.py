"""Variable assignment with a scratchpad (Sec. 5.2.2, App. E.3.1, Eq. (22)).

w chains of depth d, v_{j,1} <- v_{j,2}; ...; v_{j,d} <- v_{j,d+1}, with distinct variables drawn
from v1..v<n_vars>, interleaved uniformly at random with each chain's order kept. Sequence:

    <BOS>, v_{1,1}, <SEP1>, [the w*d assignments as triples v, <-, v'], <SEP2>, scratchpad

where the scratchpad is the chain from v_init = v_{1,1}: v_{1,1}, <-, v_{1,2}, ..., v_{1,d}, <-,
v_{1,d+1}; every token after <SEP2> is predicted and scored. Without a scratchpad (Fig. 3c) the
sequence ends <SEP2>, v_{1,d+1} and only that answer token is scored. For a length l, w is the
largest number of chains whose assignments (3 d w tokens) fit in l.

Coupled IDs (App. E.3.1): true IDs 0, 1, ..., l' before <SEP2> (<BOS> = 0, l' = tokens before
<SEP2> minus one), 0 for <SEP2>, then I_j, I_j + 1, I_j + 2 for the j-th scratchpad triple, where
I_j is the ID of v_{1,j} on the left of its assignment in the input. They depend on the input:
Predictive Position Coupling predicts them.
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

SPECIALS = ("<BOS>", "<SEP1>", "<SEP2>", "<-")
BOS, SEP1, SEP2, ARROW = range(4)
SETTING = Setting(key="depth", values="depths", prefix="d", length_axis="test length l")


@dataclass(frozen=True)
class TaskSpec:
    """A model's task section (`task_spec`): depth, position scheme, lengths, number of
    variables, and whether it writes the scratchpad (Fig. 3c: not)."""

    depth: int
    scheme: str
    train_min_len: int
    train_max_len: int
    l_max: int  # largest position ID a shifted training sequence may reach
    n_vars: int
    scratchpad: bool = True


@dataclass(frozen=True, kw_only=True)
class SectionConfig(GenerationSection):
    """A tier's `variable_assignment` section (Sec. 5.2.2, App. E.3, Table 4): the chain depths
    trained, the variables drawn from, a model set per depth and variant."""

    depths: tuple[int, ...] = setting(
        doc="chain depths d trained, one model set each (Fig. 3: 2-5)",
        items={"minimum": 1},
        minItems=1,
        uniqueItems=True,
    )
    n_vars: int = setting(
        doc="variables v1..v<n_vars> the chains draw from (a chain needs two)",
        minimum=2,
        maximum=10000,
    )
    train_max_len: int = setting(doc="longest training length", minimum=1)
    left_out: dict[str, tuple[str, ...]] | None = left_out_setting()
    figures: dict = figures_setting(
        "fig3",
        fig3="Fig. 3: accuracy by length, one line per depth, one panel per variant",
        fig3_equal="Fig. 3's models at equal budgets (not in the paper)",
    )


def vocabulary(n_vars: int) -> list[str]:
    """Token strings by ID: the four specials, then v1..v<n_vars>."""
    return [*SPECIALS, *(f"v{i}" for i in range(1, n_vars + 1))]


def vocab_size(spec: Spec) -> int:
    """Number of token IDs for this spec."""
    return len(SPECIALS) + spec.task.n_vars


@dataclass
class Batch(GenerationBatch):
    """Examples of one length: tokens, coupled IDs, target mask (B, T) and the task's fields."""

    depth: int
    n_chains: int  # w
    length: int  # l, the bound on the assignment part
    scratchpad: bool

    @property
    def prompt_len(self) -> int:
        """Tokens up to and including <SEP2>: what generation starts from."""
        return 3 + 3 * self.depth * self.n_chains + 1


def n_chains(length: int, depth: int) -> int:
    """w: the most chains whose 3 d w assignment tokens fit in length l (App. E.3.1)."""
    w = length // (3 * depth)
    if w < 1:
        raise ValueError(f"length l={length} is too short for one chain of depth {depth}")
    return w


def draw_instance(rng: np.random.Generator, w: int, depth: int, n_vars: int):
    """Random chains (w, d+1) of distinct variable numbers and a random interleaving: the chain
    of each of the w*d assignment slots, each chain appearing d times (its order kept)."""
    chains = rng.choice(n_vars, size=w * (depth + 1), replace=False).reshape(w, depth + 1) + 1
    chain_of_slot = rng.permutation(np.repeat(np.arange(w), depth))
    return chains, chain_of_slot


def encode(chains: np.ndarray, chain_of_slot: np.ndarray, scratchpad: bool = True):
    """Tokens and coupled IDs of one instance (Eq. (22), App. E.3.1).

    chains[j] = (v_{j,1}, ..., v_{j,d+1}) as variable numbers (1-based, chain 0 holds v_init);
    chain_of_slot[s] = the chain whose next assignment fills slot s of the input.
    """
    w, depth = chains.shape[0], chains.shape[1] - 1
    step_of_slot = np.zeros_like(chain_of_slot)
    seen = np.zeros(w, dtype=np.int64)
    for slot, c in enumerate(chain_of_slot):  # each chain's assignments in order
        step_of_slot[slot] = seen[c]
        seen[c] += 1
    var = len(SPECIALS) - 1  # variable v_i has token ID 3 + i
    lhs = chains[chain_of_slot, step_of_slot] + var
    rhs = chains[chain_of_slot, step_of_slot + 1] + var
    triples = np.stack([lhs, np.full_like(lhs, ARROW), rhs], axis=1).ravel()
    prompt = np.concatenate([[BOS, chains[0, 0] + var, SEP1], triples, [SEP2]])
    prompt_ids = np.concatenate([np.arange(len(prompt) - 1), [0]])  # true IDs, <SEP2> = 0
    if not scratchpad:
        return np.append(prompt, chains[0, depth] + var), np.append(prompt_ids, 0)
    # I_j: ID of v_{1,j} on the left of its assignment, i.e. of the first token of its slot
    starts = 3 + 3 * np.flatnonzero(chain_of_slot == 0)
    tail_ids = np.add.outer(starts, np.arange(3)).ravel()  # I_j, I_j + 1, I_j + 2
    return np.concatenate([prompt, prompt[tail_ids]]), np.concatenate([prompt_ids, tail_ids])


def sample(
    rng: np.random.Generator,
    n_examples: int,
    length: int,
    depth: int,
    n_vars: int,
    scratchpad: bool = True,
) -> Batch:
    """Draw n_examples instances with assignment part of length <= l = length."""
    w = n_chains(length, depth)
    if w * (depth + 1) > n_vars:
        raise ValueError(f"{w} chains of depth {depth} need more than {n_vars} variables")
    rows = [encode(*draw_instance(rng, w, depth, n_vars), scratchpad) for _ in range(n_examples)]
    tokens = np.stack([r[0] for r in rows]).astype(np.int64)
    ids = np.stack([r[1] for r in rows]).astype(np.int64)
    prompt = 3 + 3 * depth * w + 1
    target_mask = np.zeros_like(tokens)
    target_mask[:, prompt:] = 1
    return Batch(tokens, ids, target_mask, depth, w, length, scratchpad)


def draw_train(spec: Spec, rng: np.random.Generator) -> Batch:
    """A training draw: one length l ~ Unif[min, max]."""
    task = spec.task
    length = int(rng.integers(task.train_min_len, task.train_max_len + 1))
    return sample(rng, spec.train.batch_size, length, task.depth, task.n_vars, task.scratchpad)


def train_batch(spec: Spec, rng: np.random.Generator, step: int) -> Example:
    """One training batch: a training draw with IDs by the spec's scheme (shifted in training)."""
    return draw_train(spec, rng).train_example(spec.task.scheme, rng, spec.task.l_max)


def heldout_example(spec: Spec, rng: np.random.Generator) -> Example:
    """Early stopping's held-out batch: a training draw at *test-time* IDs (unshifted, as the
    test; see parity_scratchpad.heldout_example)."""
    return draw_train(spec, rng).test_example(spec.task.scheme)


def task_spec(section: dict, variant: dict, value: int) -> dict:
    """The spec's task section of one model: depth `value`, the variant's scheme and scratchpad,
    the section's lengths and number of variables (App. E.3.1)."""
    keys = ("train_min_len", "train_max_len", "l_max", "n_vars")
    return {
        "depth": value,
        "scheme": variant["scheme"],
        **{k: section[k] for k in keys},
        "scratchpad": variant["scratchpad"],
    }


def train_lengths(section: dict) -> tuple[int, int]:
    """Shortest and longest training length of the section's models."""
    return section["train_min_len"], section["train_max_len"]


def testset(spec: Spec, eval_cfg: dict, seed: int) -> dict[int, Batch]:
    """The fixed test draws of a model's spec (the same for every run; with or without the
    scratchpad as the variant says)."""
    task = spec.task
    return make_testset(eval_cfg, task.depth, task.n_vars, task.scratchpad, seed)


def longest_tokens(section: dict, length: int) -> int:
    """Tokens of the longest sequence at length l: <BOS>, v_init, <SEP1>, l, <SEP2>, 3 d."""
    return length + 4 + 3 * max(section["depths"])


def config_checks(name: str, section: dict) -> list[tuple[str, str]]:
    """Cross-key constraints of this task's config section: every variant says whether it has a
    scratchpad; every length fits one chain."""
    errors = [
        (f"{name}.variants.{v}.scratchpad", "is required for variable_assignment")
        for v, var in section["variants"].items()
        if "scratchpad" not in var
    ]
    short = min(section["train_min_len"], *section["eval"]["lengths"])
    if short < 3 * max(section["depths"]):
        errors.append((f"{name}.train_min_len", "every length must fit one chain (3 d)"))
    return errors


def make_testset(eval_cfg: dict, depth: int, n_vars: int, scratchpad: bool, seed: int):
    """Fixed test draws per length l, each from its own generator seeded by (seed, l, d)."""
    return {
        length: sample(
            np.random.default_rng([seed, TEST_STREAM, length, depth]),
            eval_cfg["n_examples"],
            length,
            depth,
            n_vars,
            scratchpad,
        )
        for length in sorted(eval_cfg["lengths"])
    }


def to_records(example: Example, batch: Batch, n_vars: int) -> list[dict]:
    """JSON-ready rows: token strings, position IDs, target mask and the task's fields."""
    vocab = vocabulary(n_vars)
    return records(
        example,
        vocab,
        lambda i: {
            "depth": batch.depth,
            "length": batch.length,
            "n_chains": batch.n_chains,
            "v_init": vocab[int(example.tokens[i, 1])],
            "answer": vocab[int(example.tokens[i, -1])],
        },
    )


def add_sample_arguments(parser) -> None:
    """`lengen sample variable_assignment` options (beside --n and --seed)."""
    parser.add_argument(
        "--depth", type=positive_int, required=True, help="d, assignments per chain"
    )
    parser.add_argument(
        "--length", type=positive_int, required=True, help="l, bound on the assignment part"
    )
    parser.add_argument("--n-vars", type=positive_int, default=200, help="number of variables")
    parser.add_argument("--no-scratchpad", action="store_true", help="answer token only (Fig. 3c)")
    add_scheme_argument(parser)


def sample_records(args) -> list[dict]:
    """`lengen sample variable_assignment`: examples (App. E.3.1) with the scheme's test-time
    IDs."""
    rng = np.random.default_rng(args.seed)
    scratchpad = not args.no_scratchpad
    batch = sample(rng, args.n, args.length, args.depth, args.n_vars, scratchpad=scratchpad)
    return to_records(batch.test_example(args.scheme), batch, args.n_vars)
