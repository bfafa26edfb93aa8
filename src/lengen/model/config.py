"""The model's settings: one GPT-NeoX model's sizes and position scheme (`ModelConfig`), apart
from the torch code that builds it (lengen.model.model) so that a config's validation reads the
fields that are settings (a tier's `model` keys: lengen.core.settings) without importing torch.
The task and the scheme fill in the rest (vocabulary, IDs, the PPC head)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lengen.core.positions import MODEL_POSITIONS, RENAMED_MODEL_POSITIONS
from lengen.core.settings import setting

ATTN_SCALES = ("none", "log_length")


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and position scheme of one GPT-NeoX model. The fields with a doc are a tier's
    `model` keys (schema and config/README.md made from them); the others the task and the
    position scheme fill in."""

    vocab_size: int
    n_layer: int = setting(2, doc="transformer blocks (paper: 12)", minimum=1)
    n_head: int = setting(4, doc="attention heads per block (paper: 16)", minimum=1)
    d_model: int = setting(
        128, doc="residual width (paper: 1024; the synthetic tasks' App. E Table 2)", minimum=1
    )
    d_mlp: int | None = setting(None, doc="MLP width (null: 4 d_model, GPT-NeoX)", minimum=1)
    position: str = "rope"  # how IDs are read: one of MODEL_POSITIONS (lengen.model.positions)
    rotary_pct: float = setting(
        1.0,
        doc="fraction of each head's dimensions RoPE rotates "
        "(GPT-NeoX: 0.25; used by RoPE schemes only)",
        exclusiveMinimum=0,
        maximum=1,
    )
    rope_base: float = setting(10000.0, doc="RoPE's base", exclusiveMinimum=0)
    l_max: int = 512  # largest position ID (absolute embeddings, position head)
    predict_positions: bool = False  # PPC head over IDs 0..l_max (Sec. 5.2)
    layer_norm_eps: float = 1e-5
    init_std: float = setting(
        0.02, doc="std of the normal weight init (GPT-NeoX/HF: 0.02)", exclusiveMinimum=0
    )
    # DEPARTURE when "log_length" (not in the paper's GPT-NeoX): each query's logits are multiplied
    # by max(1, log n), n = the number of keys it sees (Chiang & Cholak 2022, "Overcoming a
    # theoretical limitation of self-attention", Sec. 5; "Scalable-Softmax", Nakanishi 2025), so
    # attention can stay as sharp on a few tokens among 500 as among 50. "none" = GPT-NeoX.
    attn_scale: str = setting(
        "none",
        doc="none = GPT-NeoX (paper). log_length = DEPARTURE: logits x max(1, log n), n keys seen",
        enum=list(ATTN_SCALES),
    )

    def __post_init__(self):
        if self.position in RENAMED_MODEL_POSITIONS:  # a model file of code older than the
            raise ValueError(  # committed references: not read
                f"position {self.position!r} is what code older than the references wrote (now "
                f"{RENAMED_MODEL_POSITIONS[self.position]!r}): rerun the model's training job"
            )
        if self.position not in MODEL_POSITIONS:
            raise ValueError(f"position must be one of {MODEL_POSITIONS}, got {self.position!r}")
        if self.predict_positions and self.position != "learned":
            raise ValueError("predict_positions needs position='learned' (Sec. 5.2)")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} not divisible by n_head={self.n_head}")
        if self.attn_scale not in ATTN_SCALES:
            raise ValueError(f"attn_scale must be one of {ATTN_SCALES}, got {self.attn_scale!r}")

    @property
    def head_dim(self) -> int:
        """Channels per attention head."""
        return self.d_model // self.n_head

    @property
    def id_limit(self) -> int | None:
        """Largest position ID the model can read (learned embeddings, the PPC head's classes):
        l_max; None where any ID is valid (RoPE, ALiBi, NoPE)."""
        return self.l_max if self.position == "learned" else None

    @property
    def mlp_dim(self) -> int:
        """Hidden width of the MLP."""
        return self.d_mlp or 4 * self.d_model

    def to_dict(self) -> dict:
        """Plain dict, for checkpoints and logging."""
        return asdict(self)
