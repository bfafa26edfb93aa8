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
from lengen.core.settings import setting


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


# --- A generation-scored task's config section (a tier's `parity_scratchpad:` ...): each task's
# SectionConfig extends GenerationSection with its own keys; lengen.config.tier puts it in the
# tier's schema, its keys and config/README.md rows made from the fields (lengen.core.settings).

STYLE = setting(
    None,
    null=False,
    doc="figure style: seaborn context, panel height (inches), "
    "aspect, dpi (absent: paper, 3.0, 1.15, 150)",
)
FIGURES_DOC = (
    "Figures by key; a key no figure of lengen.config.artifacts.FIGURES reads is a "
    'figure of its own, drawn to <key>.png (docs/extending.md, "A figure").'
)
FIGURE = {"$ref": "#/$defs/generation_figure"}


def ref(name: str) -> dict:
    """A schema node's reference to a part sections share (`model`, `train`, ...: the $defs of
    lengen.config.tier.schema)."""
    return {"$ref": f"#/$defs/{name}"}


@dataclass(frozen=True, kw_only=True)
class GenerationEval:
    """The length sweep every model of a generation-scored section is scored on."""

    lengths: tuple[int, ...] = setting(
        doc="test lengths, in the task's unit (the paper's length axis)", **ref("lengths")
    )
    n_examples: int = setting(
        doc="test examples per model and length (a fixed, seeded test set)", minimum=1
    )
    batch_size: int = setting(
        doc="examples per evaluation forward pass (memory, not results)", minimum=1
    )


@dataclass(frozen=True, kw_only=True)
class GenerationFigure:
    """A figure: one panel per variant."""

    panels: tuple[str, ...] = setting(doc="variant per panel, in order", minItems=1)
    title: str | None = setting(None, null=False, doc="the figure's title (absent: the registry's)")


@dataclass(frozen=True, kw_only=True)
class VariantSection:
    """A variant's overrides of its section's own keys (`section`)."""

    train_min_len: int | None = setting(
        None, null=False, minimum=1, doc="shortest training length (the section's unit)"
    )
    train_max_len: int | None = setting(
        None, null=False, minimum=1, doc="longest training length (the section's unit)"
    )
    jumps: tuple[int, ...] | None = setting(
        None,
        null=False,
        items={"minimum": 1},
        minItems=1,
        uniqueItems=True,
        doc="parity with scratchpad: the jumps this variant trains",
    )
    depths: tuple[int, ...] | None = setting(
        None,
        null=False,
        items={"minimum": 1},
        minItems=1,
        uniqueItems=True,
        doc="variable assignment: the depths this variant trains",
    )
    eval: GenerationEval | None = setting(None, null=False, doc="this variant's length sweep")


@dataclass(frozen=True, kw_only=True)
class VariantConfig:
    """One variant: its position scheme, runs and the keys it overrides."""

    scheme: str = setting(
        enum=scheme_names,
        doc=(
            "ppc = coupled IDs + position head (Sec. 5.2); absolute = true IDs, learned "
            "embeddings, random shift; rope_pose = RoPE with PoSE in training, true IDs at test; "
            "nope = no positional encoding (causal mask only); alibi = ALiBi bias at true IDs."
        ),
    )
    scratchpad: bool | None = setting(
        None, null=False, doc="variable assignment only; false = answer only (Fig. 3c)"
    )
    runs: int = setting(doc="training runs (seeds seed, seed+1, ...)", **ref("runs"))
    model: dict | None = setting(
        None, null=False, doc="keys overriding the section's model", **ref("model_keys")
    )
    train: dict | None = setting(
        None, null=False, doc="keys overriding the section's train", **ref("train_keys")
    )
    section: VariantSection | None = setting(
        None,
        null=False,
        minProperties=1,
        doc="keys overriding the section's own for this variant's models: its training range, "
        "the jumps / depths it trains, its eval (e.g. equal-budget runs on a shorter range)",
    )


def figures_setting(required: str, **figures: str):
    """A section's `figures`: figure key -> GenerationFigure, `required` among them; `figures`
    names the registry's figures of the section (key -> what it draws) and `style`."""
    known = {key: {**FIGURE, "description": doc} for key, doc in figures.items()}
    known["style"] = {"type": "object", "description": STYLE.metadata["doc"]}
    return setting(
        doc=FIGURES_DOC,
        additionalProperties=FIGURE,
        propertyNames={"pattern": "^[a-z][a-z0-9_]*$"},
        required=[required],
        properties=known,
    )


def left_out_setting():
    """A section's `left_out`: the paper's variants a tier does not train, and the probes that
    measured them (lengen.report's "not testable at this size" rows)."""
    return setting(
        None,
        null=False,
        additionalProperties={
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "minItems": 1,
            "uniqueItems": True,
            "description": "the probe names (a probe row, or a group's rows "
            "NAME/<value>/seed<run>) whose runs the row quotes",
        },
        doc="the paper's variants this tier does not train: name -> the probes (rows of "
        'probes/scratchpad_probes.csv) that measured them; their rows read "not testable at '
        'this size" with what those probes measured',
    )


@dataclass(frozen=True, kw_only=True)
class GenerationSection:
    """The keys every generation-scored task's section has; a task's SectionConfig adds its own
    (and may narrow one: parity's lengths are even)."""

    train_min_len: int = setting(doc="shortest training length", minimum=1)
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
    variants: dict[str, VariantConfig] = setting(
        doc="name -> variant: a position scheme and its runs, one figure line each", minProperties=1
    )
    eval: GenerationEval = setting(doc="the length sweep every model of the section is scored on")


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
