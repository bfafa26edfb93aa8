"""Next-token prediction on C4-format text (Sec. 5.3, App. F): random windows of the packed
token file; h_short switches to PoSE position IDs (c = 2, Lmax = Lbar) for its final steps.

Windows start at uniform random offsets of the training token file (documents joined by EOS),
drawn from the step's generator, so batches depend only on (seed, step, rank) as for every task.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lengen.core.batch import Example
from lengen.core.positions import Scheme, get_scheme, pose_fed_position_ids, true_position_ids
from lengen.core.specs import run_spec
from lengen.data.tokens import load_tokens

if TYPE_CHECKING:
    from lengen.core.specs import Spec


@dataclass(frozen=True)
class TaskSpec:
    """A language model's task section (`train_spec`)."""

    context: int  # tokens of context per training window: L (h_short) or Lbar (h_long)
    l_max: int  # Lbar + 1: PoSE IDs are drawn in [1, l_max - 1]
    train_tokens: str  # the packed training token file
    pose_start: int | None = None  # h_short: PoSE from this step on (App. F); h_long: None
    repeat_fraction: float = 0.0  # DIAGNOSTIC, not the paper: windows that repeat themselves


RESULTS_SUBDIR = "natural_language"  # under results_dir: corpus/, tokens/, h_short/, h_long/


def supports(scheme: Scheme) -> bool:
    """Whether the language models can use a position scheme: true IDs (no coupling in text),
    as they are or with PoSE in training (App. F); a training shift is not implemented here."""
    return not scheme.coupled and scheme.train in ("pose", "none")


def train_spec(cfg: dict, which: str) -> dict:
    """The job spec of h_short (context L, PoSE from `pose_start` on) or h_long (context Lbar)
    (App. F), in the section's position scheme (default rope_pose, the paper's; nope and alibi
    feed true IDs, without PoSE)."""
    nl = cfg["natural_language"]
    short = which == "short"
    scheme = get_scheme(nl.get("scheme", "rope_pose"))
    sections = {
        "task": {
            "context": nl["short_context"] if short else nl["long_context"],
            "l_max": nl["long_context"] + 1,  # PoSE IDs in [1, Lbar]: the test's true IDs
            "pose_start": nl["short"]["pose_start"] if short and scheme.train == "pose" else None,
            "train_tokens": f"{cfg['results_dir']}/{RESULTS_SUBDIR}/tokens/train.bin",
            # a diagnostic only (schema); absent from the spec when 0 (the paper), as before
            **({"repeat_fraction": nl["repeat_fraction"]} if nl.get("repeat_fraction") else {}),
        },
        "model": {"position": scheme.model, "l_max": nl["long_context"] + 1, **nl["model"]},
        "train": nl[which]["train"],
    }
    spec = run_spec(
        cfg, "natural_language", f"h_{which}", cfg["seed"], sections, ds_config=nl.get("ds_config")
    )
    if nl.get("loss_chunk_tokens"):  # absent when 0, so the CPU tiers' specs stay as they were
        spec["runtime"]["loss_chunk_tokens"] = nl["loss_chunk_tokens"]
    if "zero_stage" in nl:  # the language models' own (App. F's 1.3B models: ZeRO 2)
        spec["runtime"]["zero_stage"] = nl["zero_stage"]
    return spec


def vocab_size(spec: Spec) -> int:
    """The tokenizer's vocabulary size (32,000 for Llama-2 and the offline default), read from
    the meta.json written beside the token files."""
    meta = Path(spec.task.train_tokens).parent / "meta.json"
    return json.loads(meta.read_text())["vocab_size"]


@functools.cache
def _tokens(path: str) -> np.ndarray:
    """The training token file, memory-mapped once per process."""
    return load_tokens(path)


def windows(tokens: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """Rows tokens[s : s + length] for each start s, as int64."""
    idx = starts[:, None] + np.arange(length)[None, :]
    return np.asarray(tokens[idx], dtype=np.int64)


def train_batch(spec: Spec, rng: np.random.Generator, step: int) -> Example:
    """batch_size windows of context + 1 tokens; every next token scored; true IDs 1..context,
    or PoSE IDs drawn over the fed tokens, in [1, l_max - 1] = [1, Lbar], from step `pose_start`
    on (h_short, Sec. 5.3)."""
    task, batch = spec.task, spec.train.batch_size
    length = task.context + 1
    data = _tokens(task.train_tokens)
    if len(data) < length:  # one window of context + 1 tokens at least
        raise ValueError(f"{task.train_tokens}: {len(data)} tokens, need at least {length}")
    starts = rng.integers(0, len(data) - length + 1, size=batch)
    tokens = windows(data, starts, length)
    if task.repeat_fraction:  # DIAGNOSTIC (not the paper): the window repeats itself from d on
        copied = np.flatnonzero(rng.random(batch) < task.repeat_fraction)
        # copy distance d uniform in [length // 8, length // 2] per window: a fixed d would be
        # learned as a relative-position shortcut, not as copying (probe ..._rep25 measured it)
        d = rng.integers(length // 8, length // 2 + 1, size=len(copied))
        pos = np.arange(length)[None, :]
        src = np.where(pos >= d[:, None], pos - d[:, None], pos)
        tokens[copied] = np.take_along_axis(tokens[copied], src, axis=1)
    if task.pose_start is not None and step >= task.pose_start:
        ids = pose_fed_position_ids(rng, batch, length, task.l_max)
    else:
        ids = true_position_ids(batch, length)
    mask = np.ones_like(tokens)
    mask[:, 0] = 0  # the first token has no context to be predicted from
    return Example(tokens, ids, mask)


def config_checks(name: str, section: dict) -> list[tuple[str, str]]:
    """Cross-key constraints of this task's config section (Sec. 5.3): L < Lbar, eval lengths
    dividing Lbar, a corpus source with what it needs."""
    nl = section
    errors = []
    key = name
    short, long = nl["short_context"], nl["long_context"]
    if short >= long:
        errors.append((f"{key}.short_context", "must be below long_context (L < Lbar)"))
    if max(nl["eval"]["lengths"]) != long or any(long % n for n in nl["eval"]["lengths"]):
        errors.append((f"{key}.eval.lengths", f"must divide and end at long_context ({long})"))
    if nl["influence"]["k"] >= long - short - 1:
        errors.append((f"{key}.influence.k", f"must be below Lbar - L - 1 = {long - short - 1}"))
    corpus = nl["corpus"]
    if corpus["source"] in ("debian", "docstrings"):  # shards built here
        for field in ("packages", "validation_fraction", "max_doc_chars", "docs_per_shard"):
            if field not in corpus:
                errors.append((f"{key}.corpus.{field}", f"required for source {corpus['source']}"))
    if corpus["source"] == "debian":
        for i, pkg in enumerate(corpus.get("packages", [])):
            errors += [(f"{key}.corpus.packages.{i}.{f}", "required when source is debian")
                       for f in ("glob", "format") if f not in pkg]  # fmt: skip
    if corpus["source"] == "c4_dir" and not corpus.get("c4_dir"):
        errors.append((f"{key}.corpus.c4_dir", "required when source is c4_dir"))
    if nl["tokenizer"]["source"] == "hub" and not nl["tokenizer"].get("name"):
        errors.append((f"{key}.tokenizer.name", "required when source is hub"))
    pose = nl["short"]["pose_start"]
    if pose is not None and pose >= nl["short"]["train"]["steps"]:
        errors.append((f"{key}.short.pose_start", "must be below short.train.steps"))
    return errors
