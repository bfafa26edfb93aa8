"""Table 1 (Sec. 5.3): perplexity of h_short and h_long at evaluation lengths 64 and 128.

Held-out text is cut into consecutive chunks of Lbar + 1 tokens. At evaluation length T the chunk
is read as Lbar / T windows of T + 1 tokens overlapping by one (each window starts fresh, true
position IDs 1..T), so every evaluation length scores the same Lbar target tokens and differs
only in how much context each prediction sees. Perplexity = exp(mean NLL) (footnote 13).

That comparison cannot tell a model that uses tokens beyond L from one that only ever reads the
last L: at T = L a fresh window gives the targets near its start little context, so any model
gains from L to Lbar. `window_table` is the baseline the paper's inference needs: on the targets
that have more than L tokens before them in a chunk (tokens L + 1 .. Lbar), the NLL with the
whole chunk before them against with a sliding window of the last L tokens (true IDs 1..L), so
both read at least L tokens and only the tokens beyond L differ.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm

from lengen.core import provenance
from lengen.core.cli import command_parser, one_line_errors
from lengen.core.device import eval_device
from lengen.core.positions import true_position_ids
from lengen.data.tokens import consecutive_chunks, load_tokens
from lengen.model.modelfile import model_from_saved, read_model_file, training_outcome
from lengen.tasks import parse_spec

PAPER = {("short", 64): 17.59, ("short", 128): 14.74, ("long", 64): 17.62, ("long", 128): 14.49}


def split_windows(chunks: np.ndarray, length: int) -> np.ndarray:
    """Each chunk of Lbar + 1 tokens as Lbar / length windows of length + 1 (overlap one)."""
    long_len = chunks.shape[1] - 1
    if long_len % length:
        raise ValueError(f"eval length {length} does not divide {long_len}")
    parts = [chunks[:, i : i + length + 1] for i in range(0, long_len, length)]
    return np.concatenate(parts, axis=0)


def window_nll(model, windows: np.ndarray, batch_size: int) -> np.ndarray:
    """NLL of tokens 2..T+1 of each window given the ones before it (true IDs): (N, T)."""
    with torch.no_grad():  # a block: mutmut skips decorated functions
        device = next(model.parameters()).device
        out = []
        for i in range(0, len(windows), batch_size):
            w = torch.as_tensor(windows[i : i + batch_size], device=device)
            ids = torch.as_tensor(true_position_ids(len(w), w.shape[1] - 1), device=device)
            logits = model(w[:, :-1], ids).float()
            nll = F.cross_entropy(logits.transpose(1, 2), w[:, 1:], reduction="none")
            out.append(nll.cpu().numpy())
        return np.concatenate(out)


def chunk_nll(nll: np.ndarray, n_chunks: int) -> np.ndarray:
    """Mean NLL per chunk (n_chunks,) from the window NLLs of split_windows (part-major order).
    Every chunk scores the same number of tokens, so perplexity = exp(mean of these)."""
    return nll.reshape(-1, n_chunks, nll.shape[1]).mean(axis=(0, 2))


def sliding_windows(chunks: np.ndarray, window: int) -> np.ndarray:
    """For every chunk and every target beyond the first `window` targets (tokens window + 1 ..
    Lbar), the `window` tokens before it and the target: (N * (Lbar - window), window + 1),
    chunk-major."""
    starts = np.arange(1, chunks.shape[1] - window)  # target t = start + window, t > window
    idx = starts[:, None] + np.arange(window + 1)[None, :]
    return chunks[:, idx].reshape(-1, window + 1)


def window_table(
    model, chunks: np.ndarray, window: int, batch_size: int, progress: bool = True
) -> pd.DataFrame:
    """Per chunk, the mean NLL of its targets beyond `window` (tokens window + 1 .. Lbar) given
    the whole chunk before them ("full") and given only the `window` tokens before each
    ("window"): rows (context, context_tokens, chunk, nll, n_targets)."""
    n, beyond = len(chunks), chunks.shape[1] - 1 - window
    if beyond < 1:
        raise ValueError(f"chunks of {chunks.shape[1]} tokens have no target beyond {window}")
    full = window_nll(model, chunks, batch_size)[:, window:]  # targets window + 1 .. Lbar
    slid = sliding_windows(chunks, window)
    parts = range(0, len(slid), batch_size * 8)
    last = [
        window_nll(model, slid[i : i + batch_size * 8], batch_size)[:, -1]
        for i in tqdm(parts, desc="sliding window", disable=not progress)
    ]
    sliding = np.concatenate(last).reshape(n, beyond)
    return pd.DataFrame(
        [
            {
                "context": name,
                "context_tokens": tokens,
                "chunk": c,
                "nll": float(nll[c].mean()),
                "n_targets": beyond,
            }
            for name, tokens, nll in (
                ("full", chunks.shape[1] - 1, full),
                ("window", window, sliding),
            )
            for c in range(n)
        ]
    )


def perplexity_table(
    models: dict[str, Path], tokens: np.ndarray, lengths: list[int], n: int, batch_size: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per (model, eval length): perplexity, tokens scored, the paper's number; and the
    per-chunk mean NLL (model, eval_length, chunk, nll) that paired bootstrap CIs resample."""
    chunks = consecutive_chunks(tokens, max(lengths) + 1, n)  # Lbar + 1 tokens each
    rows, per_chunk = [], []
    device = eval_device()
    for name, path in models.items():
        saved = read_model_file(path, device)
        model, spec = model_from_saved(saved, device), parse_spec(saved["spec"])
        for length in tqdm(lengths, desc=f"perplexity {name}"):
            nll = window_nll(model, split_windows(chunks, length), batch_size)
            per_chunk.append(
                pd.DataFrame(
                    {
                        "model": f"h_{name}",
                        "eval_length": length,
                        "chunk": np.arange(len(chunks)),
                        "nll": chunk_nll(nll, len(chunks)),
                    }
                )
            )
            rows.append(
                {
                    "model": f"h_{name}",
                    "train_context": spec.task.context,
                    "pose": spec.task.pose_start is not None,
                    "eval_length": length,
                    "n_tokens": nll.size,
                    "perplexity": math.exp(nll.mean()),
                    "paper_perplexity": PAPER.get((name, length), float("nan")),
                    "seed": spec.seed,
                    **training_outcome(saved),
                }
            )
    return pd.DataFrame(rows), pd.concat(per_chunk, ignore_index=True)


# pragma: no mutate block  (CLI wiring: tested through the workflow in subprocesses)
def main_window(argv: list[str]) -> None:
    """CLI `window`: write one model's full-context vs sliding-window NLL per chunk."""
    parser = argparse.ArgumentParser(
        prog="lengen.analysis.perplexity window", description=window_table.__doc__.splitlines()[0]
    )
    parser.add_argument("--model", type=Path, required=True, help="model.pt (h_short)")
    parser.add_argument("--name", default="h_short", help="the model column's value")
    parser.add_argument("--tokens", type=Path, required=True, help="validation.bin")
    parser.add_argument("--eval", required=True, help="JSON of natural_language.eval")
    parser.add_argument("--window", type=int, required=True, help="L: the training context")
    parser.add_argument("--out", type=Path, required=True, help="per-chunk NLL CSV")
    args = parser.parse_args(argv)
    cfg = json.loads(args.eval)
    chunks = consecutive_chunks(load_tokens(args.tokens), max(cfg["lengths"]) + 1, cfg["n_chunks"])
    device = eval_device()
    saved = read_model_file(args.model, device)
    model, spec = model_from_saved(saved, device), parse_spec(saved["spec"])
    table = window_table(model, chunks, args.window, cfg["batch_size"])
    table.insert(0, "model", args.name)
    setup = {"eval": cfg, "window": args.window, "model": str(args.model)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    provenance.stamp(table, setup, spec.seed).to_csv(args.out, index=False)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: write Table 1 as CSV and markdown (`window ...`: main_window)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["window"]:
        return main_window(argv[1:])
    parser = command_parser(__spec__, __doc__)
    parser.add_argument("--short", type=Path, required=True, help="h_short model.pt")
    parser.add_argument("--long", type=Path, required=True, help="h_long model.pt")
    parser.add_argument("--tokens", type=Path, required=True, help="validation.bin")
    parser.add_argument("--eval", required=True, help="JSON of natural_language.eval")
    parser.add_argument("--out", type=Path, required=True, help="table CSV (markdown beside it)")
    parser.add_argument("--out-chunks", type=Path, required=True, help="per-chunk NLL CSV")
    args = parser.parse_args(argv)
    cfg = json.loads(args.eval)
    models = {"short": args.short, "long": args.long}
    table, chunks = perplexity_table(
        models, load_tokens(args.tokens), cfg["lengths"], cfg["n_chunks"], cfg["batch_size"]
    )
    setup = {"eval": cfg, "models": [str(p) for p in models.values()]}
    table = provenance.stamp(table, setup, table["seed"].iloc[0])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    provenance.stamp(chunks, setup, table["seed"].iloc[0]).to_csv(args.out_chunks, index=False)
    wide = table.pivot(index="model", columns="eval_length", values="perplexity")
    paper = table.pivot(index="model", columns="eval_length", values="paper_perplexity")
    lines = [
        "| model (train context) | " + " | ".join(f"eval {c} (paper)" for c in wide) + " |",
        "| --- |" + " --- |" * len(wide.columns),
    ]
    for model in wide.index:
        ctx = table.loc[table.model == model, "train_context"].iloc[0]
        cells = [f"{wide.loc[model, c]:.2f} ({paper.loc[model, c]:.2f})" for c in wide.columns]
        lines.append(f"| {model} ({ctx}) | " + " | ".join(cells) + " |")
    lines += ["", provenance.markdown_line(setup, int(table["seed"].iloc[0]))]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    log_to_models(table, models, [args.out, args.out.with_suffix(".md")])


def log_to_models(table: pd.DataFrame, models: dict[str, Path], files: list[Path]) -> None:
    """Each language model's perplexities (`perplexity_len<L>`) and Table 1's files in its own
    MLflow run (the one its training opened, from mlflow_run_id beside its model.pt), as the
    synthetic models hold their accuracies."""
    from lengen.core import tracking

    for which, path in models.items():
        run_file = path.parent / "mlflow_run_id"
        if not run_file.exists():
            continue
        uri = json.loads((path.parent / "spec.json").read_text())["tracking"]["uri"]
        rows = table[table.model == f"h_{which}"]
        tracking.resume_run(uri, run_file)
        tracking.log_metrics(
            {f"perplexity_len{r.eval_length}": r.perplexity for r in rows.itertuples()}
        )
        for f in files:
            tracking.log_artifact(f)
        tracking.end_run()


if __name__ == "__main__":
    main()
