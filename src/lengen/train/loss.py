"""The training loss (App. E "Shared model"): cross-entropy on scored tokens only, plus, with the
PPC head, the cross-entropy of its predicted position IDs (Sec. 5.2).

In one piece, `F.cross_entropy` on an fp32 copy of the logits. With `chunk_tokens`
(runtime.loss_chunk_tokens), a chunked cross-entropy with its gradient made in the forward pass
(`ChunkedCrossEntropy`), so that no fp32 tensor of the whole micro-batch's logits ever exists.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lengen.core.batch import IGNORE


def training_loss(output, inputs: dict[str, torch.Tensor], chunk_tokens: int = 0) -> torch.Tensor:
    """Token loss on scored tokens; with the PPC head, plus its position loss there (Sec. 5.2)."""
    if isinstance(output, tuple):
        logits, position_logits = output
        return scored_loss(logits, inputs["labels"], chunk_tokens) + scored_loss(
            position_logits, inputs["position_labels"], chunk_tokens
        )
    return scored_loss(output, inputs["labels"], chunk_tokens)


def scored_loss(logits: torch.Tensor, labels: torch.Tensor, chunk_tokens: int = 0) -> torch.Tensor:
    """Mean fp32 cross-entropy over positions whose label is not IGNORE; in chunks of
    `chunk_tokens` tokens where the batch has more (same value up to the order of fp32 sums)."""
    flat, target = logits.flatten(0, 1), labels.flatten()
    if not chunk_tokens or flat.shape[0] <= chunk_tokens:
        return F.cross_entropy(flat.float(), target, ignore_index=IGNORE)
    return ChunkedCrossEntropy.apply(flat, target, chunk_tokens)


def scored_run_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """scored_loss of each run of a fused group at once: logits (R, B, T, V), labels (R, B, T);
    each run's mean fp32 cross-entropy over its own scored positions (R,), in one cross-entropy
    over every run's tokens rather than one per run (the same value up to the order of fp32
    sums; a fused step's operators do not grow with R: benchmarks/launches.py)."""
    runs = logits.shape[0]
    nll = F.cross_entropy(
        logits.flatten(0, 2).float(), labels.flatten(), ignore_index=IGNORE, reduction="none"
    ).view(runs, -1)
    return nll.sum(1) / (labels != IGNORE).flatten(1).sum(1)


class ChunkedCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy over scored tokens, computed chunk by chunk in fp32, its gradient
    (softmax minus one-hot, over the scored count) written in the forward pass into one tensor of
    the logits' dtype. What lives at once: the logits, that gradient, and one chunk's fp32 work;
    one-piece cross-entropy holds an fp32 copy of the logits and the fp32 log-softmax it saves
    for backward (2 x 2.1 GB for the 1.3B model's 256 x 64 x 32,000 bf16 logits), then an fp32
    gradient. The backward scales the stored gradient in place, so a graph through it runs
    backward once (as training does)."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, chunk: int) -> torch.Tensor:
        scored = target != IGNORE
        count = scored.sum()
        grad = torch.empty_like(logits)
        total = torch.zeros((), dtype=torch.float32, device=logits.device)
        for i in range(0, logits.shape[0], chunk):
            x = logits[i : i + chunk].float()
            keep = scored[i : i + chunk]
            t = target[i : i + chunk].clamp(min=0).unsqueeze(1)
            lse = torch.logsumexp(x, dim=1, keepdim=True)
            total += ((lse - x.gather(1, t)).squeeze(1) * keep).sum()
            g = (x - lse).exp_()  # softmax (not in place: fp32 logits' .float() is themselves)
            g.scatter_add_(1, t, torch.full_like(t, -1, dtype=g.dtype))
            grad[i : i + chunk] = g * keep.unsqueeze(1)
        ctx.save_for_backward(grad, count)
        return total / count

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        grad, count = ctx.saved_tensors
        return grad.mul_(grad_output / count), None, None
