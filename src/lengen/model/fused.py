"""Many training runs of one shape as one computation: R GPT-NeoX models whose weights
are stacked along a leading run dimension, so that every kernel carries all R runs' work and the
host pays for one step, not R.

Each linear layer is one batched matmul over [R, tokens, in] x [R, in, out], its weights stored
in that layout (nn.Linear's [out, in] transposed), so that neither the matmul nor its gradient
needs a transposed copy; each embedding one
lookup in the R tables laid end to end; LayerNorm normalises once and applies each run's scale
and shift; attention folds the runs into the batch dimension ([R x B, H, T, D]: one fused
attention kernel for all runs). The position schemes are lengen.model.model's own pieces (RoPE
tables, ALiBi bias, log-length scaling), applied to the folded batch, so the computation is
GPTNeoX.forward's, run by run: tests/test_fused.py checks equal outputs and gradients for every
scheme. `member(r)` gives run r back as a plain GPTNeoX (its model file, its evaluation).

On one CPU thread this is compute-bound and gains nothing (benchmarks/fused.py: 0.87-1.05x one
run at a time); it is for a GPU, where a small model's step is bound by the host. Like the model, it
knows nothing of DeepSpeed, MLflow or Snakemake.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lengen.model.model import GPTNeoX, KVCache, ModelConfig, log_length_scale
from lengen.model.positions import alibi_bias

# how FusedGPTNeoX lays out a linear layer's stacked weight; a group checkpoint records it, and
# a checkpoint of another layout is refused, not loaded transposed (a square weight would fit)
LAYOUT = "linear weights [R, in, out]"


def linear_weights(model: GPTNeoX) -> set[str]:
    """The parameter names of the model's nn.Linear weights (stored transposed when fused)."""
    return {f"{n}.weight" for n, mod in model.named_modules() if isinstance(mod, nn.Linear)}


def _stack(models: list[GPTNeoX], name: str, transpose: bool) -> nn.Parameter:
    """The named parameter of every model, stacked along a new leading run dimension (a linear
    weight as [in, out])."""
    weights = [m.get_parameter(name).detach() for m in models]
    return nn.Parameter(torch.stack([w.T if transpose else w for w in weights]).contiguous())


class FusedGPTNeoX(nn.Module):
    """R GPT-NeoX models of one ModelConfig, trained as one: parameters are the members' own,
    stacked (name -> [R, *shape], named as in GPTNeoX with '.' replaced by '__'; a linear layer's
    weight [R, in, out], nn.Linear's [out, in] transposed, the layout bmm reads). forward takes
    input_ids and position_ids of shape (R, B, T), one batch per run, and returns what each
    member would: logits (R, B, T, V), and with the PPC head, next-position logits too."""

    def __init__(self, models: list[GPTNeoX]):
        super().__init__()
        cfgs = {m.cfg for m in models}
        if len(cfgs) != 1:
            raise ValueError(f"a fused group needs one ModelConfig, got {len(cfgs)}")
        self.cfg: ModelConfig = models[0].cfg
        self.runs = len(models)
        self.names = [name for name, _ in models[0].named_parameters()]
        self.transposed = linear_weights(models[0])
        self.weights = nn.ParameterDict(
            {n.replace(".", "__"): _stack(models, n, n in self.transposed) for n in self.names}
        )
        template = models[0]  # the position pieces hold no weights (RoPE inv_freq, ALiBi slopes)
        self.rope = template.rope
        self.register_buffer("alibi", template.alibi, persistent=False)

    def w(self, name: str) -> torch.Tensor:
        """The stacked parameter of GPTNeoX's `name` ([R, *shape]; a linear weight [R, in, out])."""
        return self.weights[name.replace(".", "__")]

    def linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """x (R, B, T, in) through each run's nn.Linear `name`: one batched matmul."""
        R, B, T, _ = x.shape
        x, weight = x.reshape(R, B * T, -1), self.w(f"{name}.weight")  # (R, in, out)
        if f"{name}.bias" in self.names:  # the bias inside the matmul, as nn.Linear's addmm: one
            # kernel in the autocast dtype (a bias added after a bf16 bmm made the sum fp32 and
            # cast every activation back at the next matmul: benchmarks/measured/
            # 2026-11-26-h200-lease3/)
            y = torch.baddbmm(self.w(f"{name}.bias")[:, None], x, weight)
        else:
            y = torch.bmm(x, weight)
        return y.view(R, B, T, -1)

    def layer_norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """Each run's LayerNorm `name`: normalise, then its own scale and shift."""
        y = F.layer_norm(x, x.shape[-1:], eps=self.cfg.layer_norm_eps)
        # shift + y * scale in one kernel (addcmul), not a product and a sum
        scale = self.w(f"{name}.weight")[:, None, None]
        return torch.addcmul(self.w(f"{name}.bias")[:, None, None], y, scale)

    def embedding(self, ids: torch.Tensor, name: str) -> torch.Tensor:
        """ids (R, B, T) looked up in each run's own table: the R tables end to end, one lookup."""
        table = self.w(name)  # (R, V, C)
        R, V, C = table.shape
        offsets = torch.arange(R, device=ids.device)[:, None, None] * V
        return F.embedding(ids + offsets, table.reshape(R * V, C))

    def attention(self, x, i: int, cos_sin, bias, cache: KVCache | None = None) -> torch.Tensor:
        """Layer i's causal self-attention, the runs folded into the batch (Attention.forward);
        with a cache (its batch is R x B), x is the whole prompt (empty cache) or one new token."""
        cfg, (R, B, T, C) = self.cfg, x.shape
        H, D = cfg.n_head, cfg.head_dim
        past = cache.past(i) if cache is not None else 0
        qkv = self.linear(x, f"layers.{i}.attention.query_key_value")
        qkv = qkv.reshape(R * B, T, H, 3 * D).transpose(1, 2)
        if self.rope is not None:
            q, k, v = self.rope.split_rotated(qkv, D, *cos_sin)
        else:
            q, k, v = qkv.split(D, dim=-1)
        if cfg.attn_scale == "log_length":
            q = q * log_length_scale(past, T, q.device).to(q.dtype)
        if cache is not None:
            k, v = cache.extend(i, k, v)
        if bias is not None:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        elif past > 0:  # one new token attends to everything before it
            y = F.scaled_dot_product_attention(q, k, v)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(R, B, T, C)
        return self.linear(y, f"layers.{i}.attention.dense")

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cache=None):
        """Logits (R, B, T, V) for input_ids (R, B, T) at position_ids (R, B, T); with the PPC
        head, also next-position logits (R, B, T, l_max + 1). A cache (KVCache over the R x B
        folded batch) holds the earlier tokens' keys and values, as GPTNeoX.forward's does."""
        cfg, (R, B, T) = self.cfg, input_ids.shape
        x = self.embedding(input_ids, "embed_in.weight")
        flat_ids = position_ids.reshape(R * B, T)
        cos_sin, bias = None, None
        if cfg.position == "rope":
            cos_sin = self.rope.cos_sin(flat_ids)
        elif cfg.position == "learned":
            x = x + self.embedding(position_ids, "abs_pos.embed.weight")
        elif cfg.position == "alibi":
            keys = cache.extend_positions(flat_ids) if cache is not None else flat_ids
            bias = alibi_bias(self.alibi, flat_ids, keys)
            if keys.shape[1] == T:  # a whole sequence; one decoded token sees every key
                keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
                bias = bias.masked_fill(~keep, float("-inf"))
        for i in range(cfg.n_layer):
            h = self.layer_norm(x, f"layers.{i}.input_layernorm")
            attn = self.attention(h, i, cos_sin, bias, cache)
            h2 = self.layer_norm(x, f"layers.{i}.post_attention_layernorm")
            mlp = self.linear(
                F.gelu(self.linear(h2, f"layers.{i}.mlp.dense_h_to_4h")),
                f"layers.{i}.mlp.dense_4h_to_h",
            )
            x = x + attn + mlp
        x = self.layer_norm(x, "final_layer_norm")
        logits = self.linear(x, "embed_out")
        if not cfg.predict_positions:
            return logits
        return logits, self.linear(x, "position_out")

    def member(self, r: int) -> GPTNeoX:
        """Run r as a plain GPTNeoX (a copy of its weights)."""
        model = GPTNeoX(self.cfg)
        state = {name: self.member_weight(name, r).clone() for name in self.names}
        model.load_state_dict(state, strict=False)  # buffers (RoPE, ALiBi) are the model's own
        return model

    def member_weight(self, name: str, r: int, grad: bool = False) -> torch.Tensor:
        """Run r's parameter `name` (or its gradient) in GPTNeoX's layout: a detached view."""
        w = (self.w(name).grad if grad else self.w(name))[r].detach()
        return w.T if name in self.transposed else w

    def _run_grads(self) -> list[list[torch.Tensor]]:
        """Each run's gradient slices, [r][k]: run r's part of the k-th stacked gradient (views)."""
        grads = [p.grad for p in self.weights.values() if p.grad is not None]
        return [list(run) for run in zip(*(g.unbind(0) for g in grads), strict=True)]

    def run_grad_norms(self, runs: list[list[torch.Tensor]] | None = None) -> torch.Tensor:
        """Each run's gradient L2 norm over all its parameters (R,); `runs`: _run_grads()."""
        # every slice's norm in torch's multi-tensor kernels (a few launches for all of them, as
        # clip_grad_norm_ does for one model), not a reduction per stacked weight: on a GPU the
        # fused step is partly bound by its launches (benchmarks/launches.py)
        runs = self._run_grads() if runs is None else runs
        norms = torch._foreach_norm([g for run in runs for g in run])
        return torch.linalg.vector_norm(torch.stack(norms).view(len(runs), -1), dim=1)

    def clip_run_grads_(self, max_norm: float) -> torch.Tensor:
        """Per-run gradient clipping (each run's own norm, as torch's clip_grad_norm_ and
        DeepSpeed's gradient_clipping do for one model: scale by max_norm / (norm + 1e-6) where
        that is below 1); returns the norms before clipping."""
        runs = self._run_grads()
        norms = self.run_grad_norms(runs)
        if max_norm > 0:
            scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
            for run, s in zip(runs, scale, strict=True):
                torch._foreach_mul_(run, s)  # one multi-tensor multiply per run
        return norms
