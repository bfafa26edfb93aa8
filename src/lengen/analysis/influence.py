"""Leave-one-out influential tokens (Sec. 5.3, Eq. 6; Figs. 4-6).

For a test sequence X_1..X_Lbar the model predicts X_Lbar from X_1..X_{Lbar-1} at their true
position IDs 1..Lbar-1. "Masking" token j removes it from every attention computation (no query
attends to it as a key) while every position ID stays as it was. Indices here are the paper's,
1-based:
- far tokens: j in [Lbar - L - 1]; the recent window: X_{Lbar-L : Lbar-1} (L tokens);
- Eq. (6): J_1..J_k are the k far j whose masking gives the lowest p(X_Lbar | rest);
- L_short = -log p(X_Lbar | window), L_long = -log p(X_Lbar | X_{1:Lbar-1}),
  L_short,sparse = -log p(X_Lbar | X_J, window) (every far token masked but J).
The paper's L_short,sparse text says "all of the first Lbar - L tokens masked but J"; X_{Lbar-L}
is the first token of the recent window its L_short conditions on, so we mask the Lbar - L - 1
far tokens, consistently with L_short and with J in [Lbar - L - 1].

All Lbar - L - 1 leave-one-out variants of an example run as one batched forward pass with a
per-row attention mask; only the last position goes through the output head.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from lengen.core import contexts, provenance
from lengen.core.cli import command_parser, one_line_errors
from lengen.core.device import eval_device
from lengen.data.tokens import consecutive_chunks, load_tokens
from lengen.model.modelfile import model_from_saved, read_model_file
from lengen.tasks import parse_spec


def attention_mask(keep: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) bool: causal, keys with keep False removed; each query keeps itself."""
    T = keep.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=keep.device).tril()
    mask = causal[None] & keep[:, None, :]
    return (mask | torch.eye(T, dtype=torch.bool, device=keep.device)[None])[:, None]


def target_logprob(
    model, x: torch.Tensor, keep: torch.Tensor, rows_per_pass: int | None = None
) -> torch.Tensor:
    """log p(X_Lbar | unmasked X_1..X_{Lbar-1}) for each keep row (B, Lbar - 1): (B,).
    rows_per_pass bounds the memory: at most that many masked copies of the sequence per forward
    (activations grow with rows x Lbar tokens); None: every row in one forward."""
    if rows_per_pass is not None and keep.shape[0] > rows_per_pass:
        parts = torch.split(keep, rows_per_pass)
        return torch.cat([target_logprob(model, x, part) for part in parts])
    with torch.no_grad():  # a block: mutmut skips decorated functions
        rows = keep.shape[0]
        inputs = x[:-1].expand(rows, -1)
        ids = torch.arange(1, len(x), device=x.device).expand(rows, -1)
        h = model.hidden(inputs, ids, attention_mask(keep))[:, -1]
        return torch.log_softmax(model.embed_out(h).float(), dim=-1)[:, x[-1]]


def choose_influential(logp: torch.Tensor, k: int) -> list[int]:
    """Eq. (6): the k far positions (1-based) whose masking gives the lowest probability."""
    return sorted((torch.argsort(logp, stable=True)[:k] + 1).tolist())


class HFCausalLM(torch.nn.Module):
    """A Hugging Face causal LM (e.g. a local Llama or GPT-NeoX directory) behind the two calls
    leave-one-out makes: hidden(ids, position_ids, mask) and embed_out(h). The mask goes in as a
    custom 4D additive mask (0 kept, dtype minimum removed), so a masked token is gone from every
    attention computation while every position ID stays; HF numbers positions from 0, this
    project from 1, so the IDs are shifted by one (RoPE sees no difference)."""

    def __init__(self, hf_model):
        super().__init__()
        self.hf = hf_model.eval()
        self.embed_out = hf_model.get_output_embeddings()

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str = "cpu") -> HFCausalLM:
        """Load a local model directory (no hub access needed); ValueError naming the directory
        when it is missing or holds no causal (next-token) language model."""
        from transformers import AutoConfig, AutoModelForCausalLM

        if not (Path(path) / "config.json").is_file():
            raise ValueError(
                f"{path}: not a local transformers model directory (no config.json there)"
            )
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        archs = getattr(config, "architectures", None) or []
        causal = any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)
        if getattr(config, "is_encoder_decoder", False) or (
            archs and not causal and not getattr(config, "is_decoder", False)
        ):
            raise ValueError(
                f"{path}: {', '.join(archs) or config.model_type} is not a causal (next-token) "
                "language model; leave-one-out (Eq. 6) scores p(next token | context)"
            )
        hf = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        return cls(hf.to(device))

    def hidden(self, input_ids, position_ids, mask: torch.Tensor) -> torch.Tensor:
        """Last hidden states (B, T, C) under a (B, 1, T, T) bool mask (True = attend)."""
        dtype = next(self.hf.parameters()).dtype
        additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        additive = additive.masked_fill(~mask, torch.finfo(dtype).min)
        out = self.hf.base_model(
            input_ids=input_ids, position_ids=position_ids - 1, attention_mask=additive
        )
        return out.last_hidden_state


def loo_logprob(
    model, x: torch.Tensor, short_len: int, rows_per_pass: int | None = None
) -> torch.Tensor:
    """target_logprob with each far token left out in turn (Eq. 6's candidates), (n_far,): the
    masks made rows_per_pass at a time (None: all at once), never more."""
    long_len = len(x)
    n_far = long_len - short_len - 1
    step = rows_per_pass or n_far
    parts = []
    for start in range(0, n_far, step):
        keep = contexts.loo_keep(long_len, short_len, start, start + step)
        parts.append(target_logprob(model, x, torch.as_tensor(keep, device=x.device)))
    return torch.cat(parts)


def pass_bytes(long_len: int, rows: int, dtype_bytes: int = 4) -> int:
    """The memory one forward of `rows` masked copies takes at least: their (T x T) attention
    masks (T = Lbar - 1), as bool and as the model's additive mask."""
    return rows * (long_len - 1) ** 2 * (1 + dtype_bytes)


def analyse(
    models: dict[str, torch.nn.Module],
    examples: np.ndarray,
    short_len: int,
    k: int,
    rows_per_pass: int | None = None,
) -> pd.DataFrame:
    """One row per (example, model scored, model choosing J) with J and the three losses; models
    are named as the table names them (e.g. h_short) and need `hidden` and `embed_out` (the
    in-house GPTNeoX, or HFCausalLM around a Hugging Face model). rows_per_pass: target_logprob's
    memory bound for the leave-one-out masks (None: all Lbar - L - 1 in one forward)."""
    long_len = examples.shape[1]
    devices = {name: next(model.parameters()).device for name, model in models.items()}
    rows = []
    for i, seq in enumerate(tqdm(examples, desc="leave-one-out", mininterval=5)):
        xs = {name: torch.as_tensor(seq, device=device) for name, device in devices.items()}
        chosen = {
            name: choose_influential(loo_logprob(model, xs[name], short_len, rows_per_pass), k)
            for name, model in models.items()
        }
        for scored, model in models.items():
            x = xs[scored]
            for by, J in chosen.items():
                keep = contexts.context_keeps(long_len, short_len, J)
                keep = torch.as_tensor(keep, device=x.device)
                nll = -target_logprob(model, x, keep)
                l_short, l_long, l_sparse = nll.tolist()
                rows.append(
                    {
                        "example": i,
                        "scored_by": scored,
                        "chosen_by": by,
                        "J": " ".join(map(str, J)),
                        "L_short": l_short,
                        "L_long": l_long,
                        "L_short_sparse": l_sparse,
                        "short_minus_long": l_short - l_long,
                        "short_minus_sparse": l_short - l_sparse,
                    }
                )
    return pd.DataFrame(rows)


# pragma: no mutate block  (CLI wiring: tested through the workflow in subprocesses)
@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: the leave-one-out table for both models, every (scored, chosen-by) pair."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument("--short", type=Path, required=True, help="h_short model.pt")
    parser.add_argument("--long", type=Path, required=True, help="h_long model.pt")
    parser.add_argument("--tokens", type=Path, required=True, help="validation.bin")
    parser.add_argument("--influence", required=True, help="JSON of natural_language.influence")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    cfg = json.loads(args.influence)
    device = eval_device()
    saved = {
        "h_short": read_model_file(args.short, device),
        "h_long": read_model_file(args.long, device),
    }
    models = {name: model_from_saved(s, device) for name, s in saved.items()}
    seed = parse_spec(saved["h_short"]["spec"]).seed
    examples = consecutive_chunks(
        load_tokens(args.tokens), cfg["long_len"], cfg["n_examples"], cfg["offset"]
    )
    table = analyse(models, examples, cfg["short_len"], cfg["k"])
    setup = {"influence": cfg, "models": [str(args.short), str(args.long)]}
    table = provenance.stamp(table, setup, seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
