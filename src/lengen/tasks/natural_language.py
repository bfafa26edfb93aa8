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
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from lengen.core.batch import Example
from lengen.core.positions import (
    Scheme,
    get_scheme,
    pose_fed_position_ids,
    scheme_names,
    true_position_ids,
)
from lengen.core.settings import described, setting
from lengen.core.specs import run_spec
from lengen.data.tokens import load_tokens
from lengen.tasks.base import STYLE, ref

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


PAPER_SCHEME = "rope_pose"  # App. F: RoPE, h_short with PoSE IDs

# --- a tier's `natural_language` section (lengen.core.settings: its schema and config/README.md)


@dataclass(frozen=True, kw_only=True)
class CorpusPackage:
    """One package whose text joins the corpus."""

    name: str = setting(
        doc="Debian package name (debian), or an installed Python distribution "
        "pinned by pyproject.toml (docstrings)"
    )
    glob: str | None = setting(
        None,
        null=False,
        doc="debian: files inside the unpacked package; "
        "docstrings: the distribution's .py files to read (default all)",
    )
    format: str | None = setting(
        None,
        null=False,
        enum=["html", "text", "fortune"],
        doc="debian: how a file splits into documents: HTML pages, plain text, fortune cookies",
    )


@dataclass(frozen=True, kw_only=True)
class CorpusConfig:
    """Where the language models' text comes from (C4 format: JSON lines with text, url)."""

    source: str = setting(
        enum=["debian", "docstrings", "c4_dir", "c4_hub"],
        doc=(
            "debian = offline C4-format shards from Debian packages (needs apt-get and the "
            "network); docstrings = offline shards from the docstrings of installed Python "
            "packages (any OS, no network); c4_dir = local C4 shards; c4_hub = allenai/c4 streamed"
        ),
    )
    c4_dir: str | None = setting(
        None,
        doc="source c4_dir: a folder of C4 shards (c4-train.*.json.gz, c4-validation.*.json.gz)",
    )
    packages: tuple[CorpusPackage, ...] | None = setting(
        None,
        null=False,
        minItems=1,
        doc="sources debian and docstrings: the packages whose text makes the corpus",
    )
    validation_fraction: float | None = setting(
        None,
        null=False,
        exclusiveMinimum=0,
        exclusiveMaximum=1,
        doc="fraction of documents (by a seeded hash of their url) in the validation split",
    )
    max_doc_chars: int | None = setting(
        None,
        null=False,
        minimum=1,
        doc="consecutive paragraphs are grouped into documents of "
        "about this many characters (C4 pages: ~2 kB)",
    )
    docs_per_shard: int | None = setting(
        None, null=False, minimum=1, doc="documents per written shard"
    )


@dataclass(frozen=True, kw_only=True)
class TokenizerConfig:
    """The language models' tokenizer (App. F: Llama-2-7b's; smaller tiers name their own)."""

    SCHEMA: ClassVar[dict] = {
        "if": {"properties": {"source": {"const": "corpus_bpe"}}},
        "then": {"required": ["vocab_size"]},
    }
    source: str = setting(
        enum=["mistral_v1", "hub", "corpus_bpe"],
        doc=(
            "mistral_v1 = offline 32k SentencePiece BPE; hub = HF tokenizer `name`; corpus_bpe = "
            "byte-level BPE of `vocab_size` trained on the training split (DEPARTURE)"
        ),
    )
    name: str | None = setting(None, doc="source hub: the tokenizer's Hugging Face name")
    dir: str | None = setting(
        None,
        doc=(
            "sources mistral_v1 and hub: a local folder holding the tokenizer, filled once by "
            "`lengen setup` where there is network; the run then downloads nothing (null: the run "
            "fetches it)"
        ),
    )
    vocab_size: int | None = setting(
        None, null=False, minimum=257, maximum=65535, doc="corpus_bpe's vocabulary (with EOS)"
    )


@dataclass(frozen=True, kw_only=True)
class MaxTokens:
    """Tokens kept from each split."""

    train: int = setting(doc="training tokens (the models cycle through them)", minimum=1)
    validation: int = setting(doc="validation tokens (Table 1, Figs. 4-6 read them)", minimum=1)


@dataclass(frozen=True, kw_only=True)
class ShortConfig:
    """h_short: trained on short_context, PoSE from pose_start on (App. F)."""

    train: dict = setting(doc="its training settings", **ref("train"))
    pose_start: int | None = setting(doc="first PoSE step (App. F: 34,000 of 49,000)", minimum=0)


@dataclass(frozen=True, kw_only=True)
class LongConfig:
    """h_long: trained on long_context (App. F)."""

    train: dict = setting(doc="its training settings", **ref("train"))


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """Table 1: perplexity at each length over the same chunks."""

    lengths: tuple[int, ...] = setting(
        doc="context lengths scored (Table 1's columns)", **ref("lengths")
    )
    n_chunks: int = setting(doc="chunks each window is split into for the per-chunk NLL", minimum=1)
    batch_size: int = setting(doc="windows per forward pass (memory, not results)", minimum=1)


@dataclass(frozen=True, kw_only=True)
class InfluenceConfig:
    """Leave-one-out influence, Eq. (6) (Figs. 4-6)."""

    n_examples: int = setting(doc="validation windows analysed", minimum=1)
    k: int = setting(doc="influential tokens kept per prediction (paper: 5)", minimum=1)


@dataclass(frozen=True, kw_only=True)
class FiguresConfig:
    """The language figures' style."""

    style: dict | None = STYLE


@dataclass(frozen=True, kw_only=True)
class SectionConfig:
    """A tier's `natural_language` section (Sec. 5.3, App. F): Table 1, Figs. 4-6."""

    corpus: CorpusConfig = setting(doc=described(CorpusConfig))
    tokenizer: TokenizerConfig = setting(doc=described(TokenizerConfig))
    max_tokens: MaxTokens = setting(doc="tokens kept from each split")
    scheme: str = setting(
        PAPER_SCHEME,
        enum=lambda: scheme_names(supports),
        doc=(
            "Position scheme of both language models (lengen.model.positions): rope_pose = RoPE, "
            "h_short with PoSE IDs from pose_start on (the paper, App. F; the default); nope = no "
            "positional encoding; alibi = ALiBi bias. NoPE and ALiBi feed true IDs and take no "
            "PoSE."
        ),
    )
    repeat_fraction: float | None = setting(
        None,
        null=False,
        minimum=0,
        maximum=1,
        doc=(
            "DIAGNOSTIC, not in the paper (absent or 0 = the paper): the fraction of training "
            "windows that repeat themselves from a random copy distance d on (token i := token i - "
            "d for i >= d, d uniform in [window / 8, window / 2]), to test whether copying is what "
            "a "
            'small model lacks to use far context (lengen.analysis.copying; README "Natural '
            'language: probes and diagnosis"). Evaluation text is never altered.'
        ),
    )
    short_context: int = setting(doc="L: h_short's training context", minimum=2)
    long_context: int = setting(doc="Lbar: h_long's context, eval length", minimum=3)
    model: dict = setting(
        doc="the model of every run of the section (App. E Table 2 / App. F)", **ref("model")
    )
    short: ShortConfig = setting(doc=described(ShortConfig))
    long: LongConfig = setting(doc=described(LongConfig))
    eval: EvalConfig = setting(doc=described(EvalConfig))
    influence: InfluenceConfig = setting(doc=described(InfluenceConfig))
    gpus_per_job: int | None = setting(
        None,
        null=False,
        minimum=1,
        doc="GPUs per language-model training job (DeepSpeed data parallel)",
    )
    loss_chunk_tokens: int | None = setting(
        None,
        null=False,
        minimum=0,
        doc=(
            "The language models' training cross-entropy in chunks of this many tokens, its "
            "gradient made in the forward pass (lengen.train.loss.ChunkedCrossEntropy), so no fp32 "
            "copy of a micro-batch's 32,000-wide logits exists (measured: "
            "benchmarks/measured/2026-11-25-cpu/). Absent or 0 = in one piece; a micro-batch with "
            "fewer tokens is always one piece."
        ),
    )
    zero_stage: int | None = setting(
        None,
        null=False,
        enum=[0, 1, 2, 3],
        doc=(
            "The language models' DeepSpeed ZeRO stage (absent: runtime.zero_stage), the one place "
            "it is set for them: a ds_config JSON that sets another is an error."
        ),
    )
    ds_config: str | None = setting(
        None,
        doc=(
            "A DeepSpeed config JSON (path from the project root) merged over the computed one for "
            "the language models (e.g. config/ds_config_lm.json: ZeRO 2's communication buckets); "
            "it may not set what the config sets (batch keys, gradient_clipping, bf16, the ZeRO "
            "stage) to another value."
        ),
    )
    figures: FiguresConfig | None = setting(None, null=False, doc="the language figures' style")


def train_spec(cfg: dict, which: str) -> dict:
    """The job spec of h_short (context L, PoSE from `pose_start` on) or h_long (context Lbar)
    (App. F), in the section's position scheme (default rope_pose, the paper's; nope and alibi
    feed true IDs, without PoSE)."""
    nl = cfg["natural_language"]
    short = which == "short"
    scheme = get_scheme(nl.get("scheme", PAPER_SCHEME))
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
            errors += [
                (f"{key}.corpus.packages.{i}.{f}", "required when source is debian")
                for f in ("glob", "format")
                if f not in pkg
            ]
    if corpus["source"] == "c4_dir" and not corpus.get("c4_dir"):
        errors.append((f"{key}.corpus.c4_dir", "required when source is c4_dir"))
    if nl["tokenizer"]["source"] == "hub" and not nl["tokenizer"].get("name"):
        errors.append((f"{key}.tokenizer.name", "required when source is hub"))
    pose = nl["short"]["pose_start"]
    if pose is not None and pose >= nl["short"]["train"]["steps"]:
        errors.append((f"{key}.short.pose_start", "must be below short.train.steps"))
    return errors
