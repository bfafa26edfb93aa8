"""Sparse parity (Sec. 5.1, App. E.1.1, Eq. (20)).

Sequence: <BOS>, J_1, t_{b_1}, ..., J_l, t_{b_l}, <SEP>, t_{b*}, where exactly k of the J_i are
<= N/2 ("flagged"), b_i ~ Unif{0, 1} and b* is the XOR of the b_i with flagged J_i. Only the final
token t_{b*} is predicted and scored. The paper's "length" is 2l (the J/bit part).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lengen.core.batch import Example
from lengen.core.positions import pose_fed_position_ids, true_position_ids
from lengen.core.settings import described, setting
from lengen.core.specs import run_spec
from lengen.tasks.base import STYLE, positive_int, ref

if TYPE_CHECKING:
    from lengen.core.specs import Spec

SPECIALS = ("<BOS>", "<SEP>", "t0", "t1")
BOS, SEP, T0, T1 = range(4)
SECTION_REQUIRED = True  # every tier has this section: the workflow's rules read it
POSE_SKIPS = ("paper", "reference")  # the first: the paper's (core.positions.pose_position_ids)


@dataclass(frozen=True)
class TaskSpec:
    """A model's task section (`train_spec`): K_train, the integer alphabet size N, the training
    range of 2l and the largest PoSE ID."""

    k_train: int
    n: int
    train_min_len: int
    train_max_len: int
    l_max: int
    # a probe's knob (core.positions.pose_position_ids): not in the spec unless the config sets
    # it, so the default models' specs and hashes are unchanged
    pose_skip: str = POSE_SKIPS[0]


# --- a tier's `sparse_parity` section (lengen.core.settings: its schema and config/README.md)

NAME = {"pattern": "^[a-z][a-z0-9_]*$"}  # a variant's or a figure's key
PANELS = {
    "type": "array",
    "items": {"type": "integer", "minimum": 1},
    "minItems": 1,
    "description": "K_train panels of a figure of its own",
}


@dataclass(frozen=True, kw_only=True)
class VariantConfig:
    """One variant: its label, runs and model keys."""

    label: str = setting(
        doc="the legend's name of the variant (the title adds the size trained: "
        "lengen.config.artifacts.trained_model)"
    )
    runs: int = setting(doc="training runs per K_train (seeds seed, seed+1, ...)", **ref("runs"))
    model: dict | None = setting(
        None, null=False, doc="keys overriding the section's model", **ref("model_keys")
    )


@dataclass(frozen=True, kw_only=True)
class SchemeVariant:
    """One extra scheme: its label, position, model and train keys."""

    label: str = setting(doc="the legend's name of the variant")
    position: str = setting(
        doc="nope = no positional encoding; alibi = ALiBi bias at true IDs", enum=["nope", "alibi"]
    )
    model: dict | None = setting(
        None, null=False, doc="keys overriding the section's model", **ref("model_keys")
    )
    train: dict | None = setting(
        None, null=False, doc="keys overriding the section's train", **ref("train_keys")
    )


@dataclass(frozen=True, kw_only=True)
class SchemesConfig:
    """Extra figure (not in the paper): other position schemes at one K_train."""

    k_train: int = setting(doc="the one K_train these models train at", minimum=1)
    variants: dict[str, SchemeVariant] = setting(
        doc="name -> {label, position, model, train}: one line each",
        minProperties=1,
        propertyNames=NAME,
    )


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """The test sweep: every length x k_test, n_examples each."""

    lengths: tuple[int, ...] = setting(
        doc="test lengths 2l (the figures' x axis)",
        minItems=1,
        uniqueItems=True,
        items={"minimum": 4, "multipleOf": 2},
    )
    k_test: tuple[int, ...] = setting(
        doc="numbers of flagged J_i tested (k_test > K_train: outside the training distribution)",
        minItems=1,
        uniqueItems=True,
        items={"minimum": 1},
    )
    n_examples: int = setting(doc="test examples per length and k_test", minimum=1)
    batch_size: int = setting(
        doc="examples per evaluation forward pass (memory, not results)", minimum=1
    )


@dataclass(frozen=True, kw_only=True)
class AttentionConfig:
    """Diagnostic figure (lengen.analysis.attention): where the predicting <SEP> token attends,
    per layer and head, and accuracy by number of flagged ones, over test lengths, for one
    K_train model."""

    k_train: int = setting(doc="one figure per variant", minimum=1)
    lengths: tuple[int, ...] = setting(doc="test lengths 2l", **ref("lengths"))
    k_test: tuple[int, ...] = setting(
        doc="numbers of flagged J_i drawn", minItems=1, items={"minimum": 1}
    )
    n_examples: int = setting(doc="examples per length and k_test", minimum=1)


@dataclass(frozen=True, kw_only=True)
class FiguresConfig:
    """Figures by key: K_train lists (Fig. 1, Fig. 7; a key of its own draws <key>.png,
    docs/extending.md "A figure"), the attention diagnostic, style."""

    fig1: tuple[int, ...] = setting(
        doc="K_train panels of Fig. 1", items={"minimum": 1}, minItems=1
    )
    fig7: tuple[int, ...] = setting(
        doc="K_train panels of Fig. 7", items={"minimum": 1}, minItems=1
    )
    attention: AttentionConfig | None = setting(None, null=False, doc=described(AttentionConfig))
    style: dict | None = STYLE


@dataclass(frozen=True, kw_only=True)
class SectionConfig:
    """A tier's `sparse_parity` section (Sec. 5.1, App. E.1, Figs. 1 and 7)."""

    variants: dict[str, VariantConfig] = setting(
        minProperties=1,
        propertyNames=NAME,
        doc="Model variants trained for every K_train: name -> {label, runs, model: keys "
        "overriding `model`}. The figures draw one row per variant and the report gives each its "
        "own SP verdicts. A variant that leaves the paper's GPT-NeoX (e.g. attn_scale) is a "
        "DEPARTURE and says so in its label. runs: training runs per K_train (seeds seed, "
        "seed+1, ...; a verdict needs >= 3, lengen.report.effects).",
    )
    schemes: SchemesConfig | None = setting(
        None,
        null=False,
        doc="Extra figure (not in the paper; reports/sparse_parity_schemes.png): models with "
        "other position schemes trained at one K_train, drawn beside the variants at that "
        "K_train. name -> {label, position: nope (no positional encoding) | alibi (ALiBi at true "
        "IDs), model, train: keys overriding the section's}.",
    )
    k_train: tuple[int, ...] = setting(
        doc="K_train values, one model set each (the number of flagged J_i a training example "
        "has is drawn in [1, K_train])",
        items={"minimum": 1},
        minItems=1,
        uniqueItems=True,
    )
    n: int = setting(
        doc="the alphabet size N of the J_i (J_i <= N/2 is flagged); tokens are "
        "uint16, so at most 65,534",
        minimum=2,
        maximum=65534,
        multipleOf=2,
    )
    pose_skip: str = setting(
        POSE_SKIPS[0],
        enum=list(POSE_SKIPS),
        doc="How PoSE draws its "
        "chunks: paper (Sec. 2.2's formula); reference: as dwzhu-pku/PoSE's "
        "code, a skip uniform over the free range (a probe, not the paper)",
    )
    train_min_len: int = setting(doc="shortest training length 2l", minimum=4, multipleOf=2)
    train_max_len: int = setting(doc="longest training length 2l", minimum=4, multipleOf=2)
    l_max: int = setting(
        doc="largest position ID a model has (embeddings; PoSE and shifted IDs are drawn below it)",
        minimum=1,
    )
    model: dict = setting(
        doc="the model of every run of the section (App. E Table 2 / App. F)", **ref("model")
    )
    train: dict = setting(
        doc="training settings of every run of the section (a variant's train overrides keys)",
        **ref("train"),
    )
    eval: EvalConfig = setting(doc=described(EvalConfig))
    figures: FiguresConfig = setting(
        doc=described(FiguresConfig), additionalProperties=PANELS, propertyNames=NAME
    )


def vocabulary(n: int) -> list[str]:
    """Token strings by ID: <BOS>, <SEP>, t0, t1, then the integers 1..N as strings."""
    return [*SPECIALS, *(str(i) for i in range(1, n + 1))]


@dataclass
class Batch:
    """Examples of one length: tokens (B, 2l+3) and task fields."""

    tokens: np.ndarray
    target_mask: np.ndarray  # 1 where the token is predicted and scored
    k: np.ndarray  # number of flagged positions per example
    label: np.ndarray  # b*


def sample(rng: np.random.Generator, n_examples: int, half_length: int, k, n: int) -> Batch:
    """Draw examples with l = half_length pairs and exactly k flagged J's (k scalar or per row)."""
    k = np.broadcast_to(np.asarray(k, dtype=np.int64), (n_examples,))
    if n % 2 or n < 2:
        raise ValueError(f"N must be a positive even integer, got {n}")
    if (k < 1).any() or (k >= half_length).any():
        raise ValueError(
            f"need 1 <= k < l (App. E.1.1); got k in [{k.min()}, {k.max()}], l={half_length}"
        )
    # exactly k flagged positions per row: the k smallest of a uniform random ranking
    ranks = rng.random((n_examples, half_length)).argsort(axis=1).argsort(axis=1)
    flagged = ranks < k[:, None]
    low = rng.integers(1, n // 2 + 1, size=flagged.shape)  # J <= N/2
    high = rng.integers(n // 2 + 1, n + 1, size=flagged.shape)  # J > N/2
    j = np.where(flagged, low, high)
    bits = rng.integers(0, 2, size=flagged.shape)
    label = (bits * flagged).sum(axis=1) % 2
    tokens = np.empty((n_examples, 2 * half_length + 3), dtype=np.int64)
    tokens[:, 0] = BOS
    tokens[:, 1:-2:2] = j + len(SPECIALS) - 1  # integer i has ID 3 + i
    tokens[:, 2:-2:2] = T0 + bits
    tokens[:, -2] = SEP
    tokens[:, -1] = T0 + label
    target_mask = np.zeros_like(tokens)
    target_mask[:, -1] = 1
    return Batch(tokens=tokens, target_mask=target_mask, k=k.copy(), label=label)


def draw_train(
    rng: np.random.Generator, batch_size: int, min_len: int, max_len: int, k_train: int, n: int
) -> Batch:
    """Training draw: one even length 2l ~ Unif[min_len, max_len] per batch, k ~ Unif([K_train]).

    k is capped at l - 1 because the task needs k < l (App. E.1.1); this binds only when
    K_train >= l, e.g. K_train = 12 at 2l = 20.
    """
    half = int(rng.integers(min_len // 2, max_len // 2 + 1))
    k_max = min(k_train, half - 1)
    k = rng.integers(1, k_max + 1, size=batch_size)
    return sample(rng, batch_size, half, k, n)


def curriculum_k(k_train: int, step: int, every: int) -> int:
    """Largest training k at this step: K_train, or min(K_train, 1 + step // every) if every > 0.

    every > 0 is a departure from App. E.1 (which draws k ~ Unif([K_train]) from step 0), used by
    the CPU configs so that small models escape the parity plateau; see config/config.yaml.
    """
    return k_train if every <= 0 else min(k_train, 1 + step // every)


def vocab_size(spec: Spec) -> int:
    """Number of token IDs for this spec."""
    return len(SPECIALS) + spec.task.n


def train_spec(cfg: dict, k_train: int, variant: str | None = None, run: int = 0) -> dict:
    """The job spec of run `run` (seed: the config's + run) of the model of one variant (default:
    the first; or one of the `schemes` section's extra models, one run each) trained with
    K_train = k_train (Sec. 5.1); the variant's model keys override the section's model, a
    scheme's train keys the section's train."""
    sp = cfg["sparse_parity"]
    variant = variant or next(iter(sp["variants"]))
    schemes = sp.get("schemes", {}).get("variants", {})  # the extra figure's NoPE / ALiBi models
    var = sp["variants"][variant] if variant in sp["variants"] else schemes[variant]
    keys = ("n", "train_min_len", "train_max_len", "l_max", "pose_skip")
    sections = {
        "task": {"k_train": k_train, **{k: sp[k] for k in keys if k in sp}},
        "model": {"position": var.get("position", "rope"), **sp["model"], **var.get("model", {})},
        "train": {**sp["train"], **var.get("train", {})},
    }
    name = f"{variant}/K{k_train}/seed{run}"
    return run_spec(cfg, "sparse_parity", name, cfg["seed"] + run, sections, variant)


def train_batch(spec: Spec, rng: np.random.Generator, step: int) -> Example:
    """One training batch as fed to the model: PoSE position IDs for RoPE (Sec. 2.2; the paper),
    true IDs for ALiBi and NoPE (the extra figure's schemes: ALiBi reads ID distances as at
    test, NoPE reads none); the final token scored."""
    task, train = spec.task, spec.train
    k_max = curriculum_k(task.k_train, step, train.k_curriculum_steps)
    b = draw_train(rng, train.batch_size, task.train_min_len, task.train_max_len, k_max, task.n)
    if spec.model.get("position", "rope") == "rope":
        pos = pose_fed_position_ids(rng, *b.tokens.shape, task.l_max, task.pose_skip)
    else:
        pos = true_position_ids(*b.tokens.shape)
    return Example(b.tokens, pos, b.target_mask)


def test_example(b: Batch) -> Example:
    """Test-time view of a draw: true position IDs 1..T (Sec. 2.2)."""
    return Example(b.tokens, true_position_ids(*b.tokens.shape), b.target_mask)


def test_grid(eval_cfg: dict) -> list[tuple[int, int]]:
    """(2l, k_test) pairs of the test grid; pairs with k_test >= l are skipped (App. E.1.1)."""
    return [
        (length, k)
        for length in sorted(eval_cfg["lengths"])
        for k in sorted(eval_cfg["k_test"])
        if k < length // 2
    ]


def make_testset(eval_cfg: dict, n: int, seed: int) -> dict[tuple[int, int], Batch]:
    """Fixed test draws per (2l, k_test), each from its own generator seeded by (seed, 2l, k)."""
    return {
        (length, k): sample(
            np.random.default_rng([seed, length, k]), eval_cfg["n_examples"], length // 2, k, n
        )
        for length, k in test_grid(eval_cfg)
    }


# The stored test set and its scoring (Sec. 5.1: accuracy of the final token at true IDs)

TABLE_KEYS = ("k_train", "seed", "length", "k_test", "n")  # integer columns of an eval table
TABLE_ORDER = ("k_train", "variant", "seed", "length", "k_test")  # its rows' sort order


def write_testset(eval_cfg: dict, n: int, seed: int, path: Path) -> None:
    """Draw the test set once and store it (tokens per (2l, k_test) group, and the draw's
    settings), so that every model of the branch is scored on the same file."""
    arrays = {"config": np.array(json.dumps({"eval": eval_cfg, "n": n, "seed": seed}))}
    for (length, k), b in make_testset(eval_cfg, n, seed).items():
        arrays[f"L{length}_k{k}_tokens"] = b.tokens  # the label is the last token
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)


def testset_config(path: Path) -> dict:
    """The eval config, size and seed the stored test set was drawn with."""
    return json.loads(str(np.load(path)["config"]))


def read_testset(path: Path) -> dict[tuple[int, int], np.ndarray]:
    """(2l, k_test) -> tokens of the stored test set."""
    data = np.load(path)
    groups = {}
    for key in data.files:
        if key.endswith("_tokens"):
            length, k = key.removesuffix("_tokens").split("_")
            groups[(int(length[1:]), int(k[1:]))] = data[key]
    return groups


def final_token_accuracy(model, tokens: np.ndarray, batch_size: int) -> float:
    """Fraction of rows whose last token is the argmax prediction at true position IDs."""
    import torch  # here: the plan reads the task modules without torch

    with torch.no_grad():  # a block: mutmut skips decorated functions
        correct = 0
        for i in range(0, len(tokens), batch_size):
            chunk = tokens[i : i + batch_size]
            example = test_example(Batch(chunk, np.zeros_like(chunk), None, None))
            inputs = example.model_inputs(next(model.parameters()).device)
            logits = model(inputs["input_ids"], inputs["position_ids"])[:, -1]
            correct += (logits.argmax(-1).cpu().numpy() == chunk[:, -1]).sum()
        return float(correct / len(tokens))


def score(model, spec: Spec, testset: Path, batch_size: int, progress=iter) -> list[dict]:
    """One trained model's rows of the eval table: final-token accuracy per (2l, k_test) of the
    stored test set (`progress` wraps the loop, e.g. a tqdm)."""
    groups = read_testset(testset)
    return [
        {
            "experiment": spec.experiment,
            "variant": spec.variant or "neox",  # model files from before variants: GPT-NeoX
            "run": spec.run_name,
            "k_train": spec.task.k_train,
            "seed": spec.seed,
            "length": length,
            "k_test": k,
            "n": len(tokens),
            "accuracy": final_token_accuracy(model, tokens, batch_size),
        }
        for (length, k), tokens in progress(sorted(groups.items()))
    ]


def to_records(example: Example, batch: Batch, n: int) -> list[dict]:
    """JSON-ready rows: token strings, position IDs, target mask and the task's fields."""
    vocab = vocabulary(n)
    return [
        {
            "tokens": [vocab[t] for t in example.tokens[i]],
            "position_ids": example.position_ids[i].tolist(),
            "target_mask": example.target_mask[i].tolist(),
            "label": int(batch.label[i]),
            "k": int(batch.k[i]),
            "length": int(example.tokens.shape[1] - 3),
        }
        for i in range(len(batch.label))
    ]


def add_sample_arguments(parser) -> None:
    """`lengen sample sparse_parity` options (beside --n and --seed)."""
    parser.add_argument("--k", type=positive_int, required=True, help="number of flagged positions")
    parser.add_argument(
        "--length", type=positive_int, required=True, help="2l, the length of the J/bit part"
    )
    parser.add_argument(
        "--vocab-n", type=positive_int, default=20, help="N, the integer alphabet size"
    )


def sample_records(args) -> list[dict]:
    """`lengen sample sparse_parity`: examples (App. E.1.1) with test-time position IDs."""
    if args.length % 2:
        raise ValueError(f"--length must be even (it is 2l), got {args.length}")
    if args.k >= args.length // 2:
        raise ValueError(f"--k must be below l = --length / 2 = {args.length // 2} (App. E.1.1)")
    if args.vocab_n % 2:
        raise ValueError(f"--vocab-n must be even (J <= N/2 flags a bit), got {args.vocab_n}")
    batch = sample(np.random.default_rng(args.seed), args.n, args.length // 2, args.k, args.vocab_n)
    return to_records(test_example(batch), batch, args.vocab_n)


def config_checks(name: str, section: dict) -> list[tuple[str, str]]:
    """Cross-key constraints of this task's config section (App. E.1.1): lengths, l_max, the
    figures' K_train, k below l."""
    sp, errors = section, []
    if sp["train_min_len"] > sp["train_max_len"]:
        errors.append((f"{name}.train_min_len", "must be <= train_max_len"))
    longest = max(max(sp["eval"]["lengths"]), sp["train_max_len"]) + 2
    if longest >= sp["l_max"]:
        errors.append((f"{name}.l_max", f"must exceed the longest input ({longest} tokens)"))
    for fig, ks in sp["figures"].items():  # Figs. 1, 7 and any K_train list the config adds
        if not isinstance(ks, list):
            continue
        missing = set(ks) - set(sp["k_train"])
        if missing:
            errors.append((f"{name}.figures.{fig}", f"K_train {sorted(missing)} not in k_train"))
    too_large = [k for k in sp["k_train"] if k >= sp["train_max_len"] // 2]
    if too_large:  # App. E.1.1 needs k < l; the training draw caps k at l - 1 per length
        errors.append(
            (
                f"{name}.k_train",
                f"{too_large} not below l = train_max_len / "
                f"2 = {sp['train_max_len'] // 2}: no training length could show them",
            )
        )
    schemes = sp.get("schemes")
    if schemes and schemes["k_train"] not in sp["k_train"]:
        errors.append((f"{name}.schemes.k_train", "not in k_train (its comparison)"))
    clash = sorted(set(schemes["variants"]) & set(sp["variants"])) if schemes else []
    if clash:
        errors.append((f"{name}.schemes.variants", f"{clash} are also variants"))
    longest_l = max(sp["eval"]["lengths"]) // 2
    unseen = [k for k in sp["eval"]["k_test"] if k >= longest_l]
    if unseen:  # the test grid keeps (2l, k) with k < l only (App. E.1.1)
        errors.append(
            (
                f"{name}.eval.k_test",
                f"{unseen} not below l = {longest_l} of the longest eval length: no test "
                "example could have them",
            )
        )
    att = sp["figures"].get("attention")
    if att and att["k_train"] not in sp["k_train"]:
        errors.append((f"{name}.figures.attention.k_train", "not in k_train"))
    return errors
