"""The model side of the position schemes (lengen.core.positions has the scheme table and the
IDs a task feeds): RoPE (Sec. 2.2 / App. E), ALiBi biases and learned absolute embeddings."""

from __future__ import annotations

import math

import torch
from torch import nn


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the last dimension, GPT-NeoX's RoPE convention."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    """RoPE on the first `rotary_dim` channels of each head, at arbitrary position IDs."""

    def __init__(self, rotary_dim: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (
            base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim)
        )
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.rotary_dim = rotary_dim

    def cos_sin(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin tables of shape (B, 1, T, rotary_dim) for the given IDs."""
        freqs = position_ids[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]
        return emb.cos(), emb.sin()

    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate the first rotary_dim channels of x (B, H, T, D); pass the rest through."""
        rd = self.rotary_dim
        x_rot, x_pass = x[..., :rd], x[..., rd:]
        x_rot = x_rot * cos.to(x.dtype) + rotate_half(x_rot) * sin.to(x.dtype)
        return torch.cat((x_rot, x_pass), dim=-1)

    def split_rotated(
        self, qkv: torch.Tensor, head_dim: int, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys, values of qkv (B, H, T, 3 x head_dim), the queries and keys rotated: the
        same values as `rotate` on each, in one pass over both (half the operators a layer
        launches for RoPE: benchmarks/launches.py)."""
        qk, v = qkv[..., : 2 * head_dim].unflatten(-1, (2, head_dim)), qkv[..., 2 * head_dim :]
        q, k = self.rotate(qk, cos.unsqueeze(-2), sin.unsqueeze(-2)).unbind(-2)
        return q, k, v


def alibi_slopes(n_head: int) -> torch.Tensor:
    """ALiBi's head slopes (Press et al. 2022, Sec. 3): for n heads, a power of 2, the geometric
    sequence starting at 2^(-8/n) with that ratio (4 heads: 1/4, 1/16, 1/64, 1/256); otherwise
    the slopes of the closest smaller power of 2, then every other slope of twice that."""
    if n_head & (n_head - 1) == 0:
        start = 2.0 ** (-8.0 / n_head)
        return torch.tensor([start ** (i + 1) for i in range(n_head)])
    closest = 2 ** math.floor(math.log2(n_head))
    extra = alibi_slopes(2 * closest)[0::2][: n_head - closest]
    return torch.cat([alibi_slopes(closest), extra])


def alibi_bias(
    slopes: torch.Tensor, query_ids: torch.Tensor, key_ids: torch.Tensor
) -> torch.Tensor:
    """ALiBi's additive attention bias -m_h * (query ID - key ID), (B, H, Tq, Tk), from position
    IDs (B, Tq) and (B, Tk): relative, so any shift of every ID leaves it unchanged."""
    distance = (query_ids[:, None, :, None] - key_ids[:, None, None, :]).float()
    return -slopes.to(distance.device)[None, :, None, None] * distance


class LearnedAbsolutePositions(nn.Module):
    """Learned absolute position embeddings for IDs 0..l_max (Sec. 5.2, coupled IDs)."""

    def __init__(self, l_max: int, d_model: int):
        super().__init__()
        self.l_max = l_max
        self.embed = nn.Embedding(l_max + 1, d_model)

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        """Embedding of each ID. IDs must lie in 0..l_max; they are checked where they are made,
        on the host (`Example.model_inputs(id_limit=...)`, `greedy_decode`), not here: a check
        here reads the IDs back from the device on every forward (a host sync per micro-batch
        and per decoded token, and a graph break under torch.compile)."""
        return self.embed(position_ids)
