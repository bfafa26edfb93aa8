"""Copying from context: does a language model use tokens far back, and with which heads?

Table 1's drop from eval length 64 to 128 and Figs. 4/6's L_short - L_long need a model whose
prediction improves with tokens 64-128 back. In text most of that gain is copying: an identifier
or phrase seen earlier is predicted again, which small transformers do with *induction heads*
(Olsson et al., 2022): a previous-token head in one layer and, in a later layer, a head that
attends from the current token to the token *after* its earlier occurrence. Both are measured on
sequences of uniformly random tokens written twice (no statistics to exploit but the repeat):

- `repeat_copy_gain`: mean NLL over the first copy minus over the second (nats; ~0: no copying);
- `head_scores`: per (layer, head), the attention mass from each second-copy token on the token
  just before it (`prev_token`) and on the token after its earlier occurrence (`induction`).

This is a diagnostic of our models, not a measurement of the paper's.

No workflow job imports this module: it is the natural-language diagnosis's measure
(probes/language.py, probes/README.md "Natural language: probes and diagnosis"), kept in the
package, tested, so that the probes score models with the same code as the jobs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from lengen.analysis.perplexity import window_nll
from lengen.core.positions import true_position_ids


def repeated_random(vocab_size: int, half: int, n: int, seed: int) -> np.ndarray:
    """n windows of 2 * half + 1 tokens: `half` random tokens, the same again, one more. Token 0
    (end-of-text in our tokenizers) is never drawn."""
    first = np.random.default_rng(seed).integers(1, vocab_size, size=(n, half))
    return np.concatenate([first, first, first[:, :1]], axis=1)


def repeat_copy_gain(model, vocab_size: int, half: int, n: int, seed: int) -> float:
    """Mean NLL of the first copy's predictable tokens (2..half) minus the second copy's."""
    nll = window_nll(model, repeated_random(vocab_size, half, n, seed), 32)  # target j = token j+1
    return float(nll[:, : half - 1].mean() - nll[:, half : 2 * half - 1].mean())


@torch.no_grad()
def head_scores(model, vocab_size: int, half: int, n: int, seed: int) -> pd.DataFrame:
    """Previous-token and induction scores per (layer, head), averaged over the second copy's
    queries i = half + 1 .. 2 half - 1: mass on key i - 1 and on key i - half + 1."""
    tokens = torch.as_tensor(repeated_random(vocab_size, half, n, seed)[:, : 2 * half])
    ids = torch.as_tensor(true_position_ids(len(tokens), tokens.shape[1]))
    queries = torch.arange(half + 1, 2 * half)
    probs = model.attention_probs(tokens, ids, queries)  # (L, B, H, Q, T)
    q = torch.arange(len(queries))
    prev = probs[:, :, :, q, queries - 1].mean(dim=(1, 3))  # (L, H)
    induction = probs[:, :, :, q, queries - half + 1].mean(dim=(1, 3))
    rows = [
        {
            "layer": layer,
            "head": head,
            "prev_token": float(prev[layer, head]),
            "induction": float(induction[layer, head]),
        }
        for layer in range(prev.shape[0])
        for head in range(prev.shape[1])
    ]
    return pd.DataFrame(rows)
