"""Greedy generation with Predictive Position Coupling (Sec. 5.2).

From the prompt (everything up to the separator), each step feeds back the predicted token and,
for PPC, the *predicted* position ID from the model's position head; the true coupled IDs after
the separator are never read (footnote 12: feeding them would do part of the computation). For
the ablations without coupling the next ID is the true one, last ID + 1, which depends on nothing
but the length. transformers' `generate()` cannot feed predicted position IDs, hence this loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lengen.core.batch import check_position_ids
from lengen.model.fused import FusedGPTNeoX
from lengen.model.model import GPTNeoX, KVCache


@dataclass
class Generation:
    """Generated continuation: tokens and the position IDs they were fed at (B, n_new), or
    (R, B, n_new) for a fused group."""

    tokens: np.ndarray
    position_ids: np.ndarray


def _split(output) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(token logits, position logits or None) of a model output."""
    return output if isinstance(output, tuple) else (output, None)


def greedy_decode(
    model: GPTNeoX | FusedGPTNeoX,
    prompt: np.ndarray,
    prompt_ids: np.ndarray,
    n_new: int,
    use_cache: bool = True,
    static_cache: bool = True,
) -> Generation:
    """Generate n_new tokens after prompt (B, P) at prompt_ids (B, P), argmax at every step; for
    a fused group (lengen.model.fused: R runs as one model) prompt and IDs are (R, B, P), one
    batch per run, and the generation (R, B, n_new): the same loop over the leading dimensions.

    Position IDs come from the PPC head when the model has one, else last ID + 1. Without the
    cache the whole sequence is recomputed every step (the reference the cache is tested against).
    The cache is preallocated for P + n_new tokens (static_cache; False: grown by concatenation,
    benchmarks/decode.py's baseline). Nothing in the loop reads the device: IDs are checked here,
    on the host, once (the PPC head's IDs lie in 0..l_max by construction; last ID + 1 stays below
    the prompt's largest ID + n_new).
    """
    with torch.no_grad():  # a block: mutmut skips decorated functions
        limit = model.cfg.id_limit
        if limit is not None:
            check_position_ids(prompt_ids, limit)
            if not model.cfg.predict_positions:
                check_position_ids(np.asarray(prompt_ids)[..., -1:] + n_new, limit)
        device = next(model.parameters()).device
        tokens = torch.as_tensor(prompt, device=device)
        ids = torch.as_tensor(prompt_ids, device=device)
        cache = None
        if use_cache:
            capacity = tokens.shape[-1] + n_new if static_cache else None
            cache = KVCache(model.cfg.n_layer, capacity)
        new_tokens, new_ids = [], []
        step_tokens, step_ids, last_id = tokens, ids, ids[..., -1]
        for _ in range(n_new):
            logits, position_logits = _split(model(step_tokens, step_ids, cache=cache))
            token = logits[..., -1, :].argmax(-1)
            if position_logits is not None:
                position = position_logits[..., -1, :].argmax(-1)
            else:
                position = last_id + 1
            new_tokens.append(token)
            new_ids.append(position)
            last_id = position
            if use_cache:
                step_tokens, step_ids = token[..., None], position[..., None]
            else:  # the whole sequence again
                step_tokens = torch.cat([step_tokens, token[..., None]], dim=-1)
                step_ids = torch.cat([step_ids, position[..., None]], dim=-1)
        return Generation(
            torch.stack(new_tokens, -1).cpu().numpy(), torch.stack(new_ids, -1).cpu().numpy()
        )


def exact_match(
    generation: Generation, tokens: np.ndarray, position_ids: np.ndarray, check_positions: bool
) -> np.ndarray:
    """Per row: every generated token (and, with check_positions, every ID) equals the target;
    a fused group's generation (R, B, n_new) against the shared targets gives (R, B)."""
    n_new = generation.tokens.shape[-1]
    ok = (generation.tokens == tokens[:, -n_new:]).all(axis=-1)
    if check_positions:
        ok &= (generation.position_ids == position_ids[:, -n_new:]).all(axis=-1)
    return ok
