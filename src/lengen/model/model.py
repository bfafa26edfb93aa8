"""GPT-NeoX decoder (App. E), compact and read top to bottom; its settings (sizes, scheme) are
`lengen.model.config.ModelConfig`.

Same computation as transformers' GPTNeoXModel + embed_out (parallel residual, fused QKV laid out
per head, partial RoPE, GeLU MLP, final LayerNorm); tests/test_model.py checks equal outputs
given the same weights. The position scheme is a named piece from lengen.model.positions: RoPE at
arbitrary IDs (PoSE in training, true IDs at test), learned absolute embeddings, ALiBi (Press et
al. 2022: a per-head linear bias on the ID distance, no embedding) or NoPE (no positional
information but the causal mask; Kazemnejad et al. 2023). With
`predict_positions`, a second output head predicts the next token's position ID (Predictive Position
Coupling, Sec. 5.2). A `KVCache` makes step-by-step greedy decoding cost one token per step. The
model knows nothing of DeepSpeed, MLflow or Snakemake.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lengen.model.config import ModelConfig
from lengen.model.positions import (
    LearnedAbsolutePositions,
    RotaryEmbedding,
    alibi_bias,
    alibi_slopes,
)


def log_length_scale(first: int, T: int, device=None) -> torch.Tensor:
    """max(1, log n) for queries at sequence indices first..first+T-1 (n = index + 1 keys)."""
    n = torch.arange(first + 1, first + T + 1, device=device, dtype=torch.float32)
    return n.log().clamp(min=1.0)[:, None]  # (T, 1), broadcast over (B, H, T, D)


class KVCache:
    """Keys and values of every layer for the tokens decoded so far (B, H, T, D each), and
    their position IDs (B, T; ALiBi's bias needs the keys' IDs).

    With `capacity` (the prompt plus every token to be decoded) the buffers are allocated once, at
    the first extend, and each step writes its slice in place: decoding copies each key once,
    and the cached length is a Python int (no device sync, one graph per length when compiled).
    Without it each step concatenates (the growing cache: O(T^2) copying, kept as the baseline
    of benchmarks/decode.py)."""

    def __init__(self, n_layer: int, capacity: int | None = None):
        self.capacity = capacity
        self.layers: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * n_layer
        self.lengths = [0] * n_layer  # cached tokens per layer (each layer extends in turn)
        self.position_ids: torch.Tensor | None = None
        self.n_positions = 0

    def _write(self, buffer: torch.Tensor | None, new: torch.Tensor, start: int, dim: int):
        """(buffer, view of the cached entries) with `new` placed at index `start` of `dim`."""
        if self.capacity is None:
            full = new if buffer is None else torch.cat([buffer, new], dim=dim)
            return full, full
        end = start + new.shape[dim]
        if end > self.capacity:
            raise ValueError(f"KV cache of capacity {self.capacity} asked for {end} tokens")
        if buffer is None:
            shape = list(new.shape)
            shape[dim] = self.capacity
            buffer = new.new_zeros(shape)
        buffer.narrow(dim, start, new.shape[dim]).copy_(new)
        return buffer, buffer.narrow(dim, 0, end)

    def extend_positions(self, position_ids: torch.Tensor) -> torch.Tensor:
        """Append this step's position IDs; return every cached token's IDs (B, T)."""
        start = self.n_positions
        self.position_ids, ids = self._write(self.position_ids, position_ids, start, 1)
        self.n_positions = start + position_ids.shape[1]
        return ids

    def past(self, layer: int) -> int:
        """Number of tokens cached in one layer before this step."""
        return self.lengths[layer]

    @property
    def length(self) -> int:
        """Number of cached tokens."""
        return self.lengths[0]

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Append this step's keys/values of one layer; return all of them."""
        start = self.lengths[layer]
        past = self.layers[layer]
        k_buf, k = self._write(past[0] if past else None, k, start, 2)
        v_buf, v = self._write(past[1] if past else None, v, start, 2)
        self.layers[layer] = (k_buf, v_buf)
        self.lengths[layer] = k.shape[2]  # the view of every cached token
        return k, v


class Attention(nn.Module):
    """Causal multi-head self-attention with GPT-NeoX's fused, per-head QKV layout."""

    def __init__(self, cfg: ModelConfig, index: int = 0):
        super().__init__()
        self.index = index  # layer number, for the KV cache
        self.n_head, self.head_dim = cfg.n_head, cfg.head_dim
        self.log_length = cfg.attn_scale == "log_length"
        self.query_key_value = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.dense = nn.Linear(cfg.d_model, cfg.d_model)

    def project(
        self,
        x: torch.Tensor,
        rope: RotaryEmbedding | None,
        cos_sin: tuple[torch.Tensor, torch.Tensor] | None,
        past: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys, values (B, H, T, D) of x (B, T, C) whose first token is at sequence
        index `past`: RoPE applied and, with attn_scale log_length, the queries scaled (which
        scales their logits). softmax(q k^T / sqrt(D)) causal is this layer's attention."""
        B, T, _ = x.shape
        qkv = self.query_key_value(x).view(B, T, self.n_head, 3 * self.head_dim).transpose(1, 2)
        if rope is not None:
            q, k, v = rope.split_rotated(qkv, self.head_dim, *cos_sin)
        else:
            q, k, v = qkv.split(self.head_dim, dim=-1)
        if self.log_length:
            q = q * log_length_scale(past, T, q.device).to(q.dtype)
        return q, k, v

    def forward(
        self,
        x: torch.Tensor,
        rope: RotaryEmbedding | None,
        cos_sin: tuple[torch.Tensor, torch.Tensor] | None,
        attn_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x (B, T, C) -> (B, T, C); attn_mask (B or 1, 1, T, T) bool replaces the causal mask;
        bias (B, H, T, T_keys), when given, is added to the logits in their place: ALiBi's bias,
        -inf where a key is masked (GPTNeoX.hidden builds it once for every layer).

        With a cache, x is either the whole prompt (empty cache) or one new token.
        """
        B, T, C = x.shape
        past = cache.past(self.index) if cache is not None else 0
        decoding = past > 0
        q, k, v = self.project(x, rope, cos_sin, past)
        if cache is not None:
            k, v = cache.extend(self.index, k, v)
        if bias is not None:  # ALiBi: the bias with the mask folded in
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        elif decoding:  # one new token attends to everything before it
            y = F.scaled_dot_product_attention(q, k, v)
        elif attn_mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.dense(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    """Two-layer GeLU MLP."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(cfg.d_model, cfg.mlp_dim)
        self.dense_4h_to_h = nn.Linear(cfg.mlp_dim, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) -> (B, T, C)."""
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x)))


class Block(nn.Module):
    """GPT-NeoX layer with parallel residual: x + attn(ln1(x)) + mlp(ln2(x))."""

    def __init__(self, cfg: ModelConfig, index: int = 0):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.attention = Attention(cfg, index)
        self.mlp = MLP(cfg)

    def forward(self, x, rope, cos_sin, attn_mask=None, cache=None, bias=None) -> torch.Tensor:
        """One layer."""
        attn = self.attention(self.input_layernorm(x), rope, cos_sin, attn_mask, cache, bias)
        return x + attn + self.mlp(self.post_attention_layernorm(x))


class GPTNeoX(nn.Module):
    """Decoder-only GPT-NeoX language model returning next-token logits.

    With cfg.predict_positions it returns (token logits, next-position logits) instead.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_in = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.rope = None
        self.abs_pos = None
        slopes = alibi_slopes(cfg.n_head) if cfg.position == "alibi" else None
        self.register_buffer("alibi", slopes, persistent=False)  # ALiBi's per-head slopes
        if cfg.position == "rope":
            rotary_dim = int(cfg.head_dim * cfg.rotary_pct)
            self.rope = RotaryEmbedding(rotary_dim, cfg.rope_base)
        elif cfg.position == "learned":
            self.abs_pos = LearnedAbsolutePositions(cfg.l_max, cfg.d_model)
        # "nope": no positional parameters; the causal mask is the only order information
        self.layers = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer))
        self.final_layer_norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.embed_out = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.position_out = None
        if cfg.predict_positions:  # PPC: "an additional output embedding module" (Sec. 5.2)
            self.position_out = nn.Linear(cfg.d_model, cfg.l_max + 1, bias=False)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        """Normal(0, init_std) weights, zero biases (GPT-NeoX / HF initialisation)."""
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=self.cfg.init_std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, T, V) for input_ids (B, T) at position_ids (B, T); with the PPC head, also
        next-position logits (B, T, l_max + 1). A cache holds the earlier tokens' keys/values."""
        x = self.hidden(input_ids, position_ids, attn_mask, cache)
        if self.position_out is None:
            return self.embed_out(x)
        return self.embed_out(x), self.position_out(x)

    def embed(self, input_ids: torch.Tensor, position_ids: torch.Tensor):
        """Input of the first layer (B, T, C) and the RoPE tables (None for other schemes)."""
        x = self.embed_in(input_ids)
        if self.rope is not None:
            return x, self.rope.cos_sin(position_ids)
        if self.abs_pos is not None:
            return x + self.abs_pos(position_ids), None
        return x, None  # ALiBi (bias in attention) and NoPE read no ID here

    def hidden(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Final-layer-normed hidden states (B, T, C), before the output heads."""
        x, cos_sin = self.embed(input_ids, position_ids)
        bias = self.alibi_mask(position_ids, attn_mask, cache)
        for layer in self.layers:
            x = layer(x, self.rope, cos_sin, attn_mask, cache, bias)
        return self.final_layer_norm(x)

    def alibi_mask(
        self,
        position_ids: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor | None:
        """ALiBi's additive bias (B, H, T, T_keys) with -inf where a key is masked, built once for
        every layer; None for the other schemes (their mask is the causal one or attn_mask)."""
        if self.alibi is None:
            return None
        keys = cache.extend_positions(position_ids) if cache is not None else position_ids
        bias = alibi_bias(self.alibi, position_ids, keys)
        T = position_ids.shape[1]
        if keys.shape[1] == T:  # a whole sequence; one decoded token sees every key
            keep = (
                attn_mask
                if attn_mask is not None
                else torch.ones(T, T, dtype=torch.bool, device=bias.device).tril()
            )
            bias = bias.masked_fill(~keep, float("-inf"))
        return bias

    @torch.no_grad()
    def attention_probs(
        self, input_ids: torch.Tensor, position_ids: torch.Tensor, queries=None
    ) -> torch.Tensor:
        """Every layer's attention probabilities (L, B, H, Q, T) from the queries at sequence
        indices `queries` (all T by default; negative indices count from the end) over the
        causal keys, recomputed from the weights as `forward` attends: RoPE, log-length scaling,
        ALiBi's bias. For analysis (what a head looks at); forward uses the fused kernel, and only
        the rows asked for are computed (one query at length 500 stays small)."""
        x, cos_sin = self.embed(input_ids, position_ids)
        T = input_ids.shape[1]
        rows = torch.arange(T) if queries is None else torch.as_tensor(queries).reshape(-1) % T
        bias = self.alibi_mask(position_ids)
        if bias is None:  # additive causal mask of the chosen rows
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)[rows]
            mask = torch.zeros(future.shape, device=x.device).masked_fill(future, float("-inf"))
        else:
            mask = bias[:, :, rows]
        probs = []
        for layer in self.layers:
            q, k, _ = layer.attention.project(layer.input_layernorm(x), self.rope, cos_sin)
            scores = (q[:, :, rows] @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            probs.append(torch.softmax(scores + mask, dim=-1))
            x = layer(x, self.rope, cos_sin, bias=bias)
        return torch.stack(probs)

    def num_params(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token (6N + attention), PaLM appendix B convention."""
        n = self.num_params() - self.embed_in.weight.numel()
        attn = 12 * self.cfg.n_layer * self.cfg.d_model * seq_len
        return 6 * n + attn
