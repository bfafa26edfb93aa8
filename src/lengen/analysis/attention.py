"""Why sparse parity fails beyond the training lengths: where the predicting token attends.

The last input token (<SEP>) predicts t_{b*} (App. E.1.1, Eq. (20)). For each layer and head we
recompute its attention row from the model's own weights and split the mass over the key tokens:
<BOS>, flagged J's (J <= N/2), flagged bits (the bit right after a flagged J), the other J's and
bits ("unflagged"), and <SEP> itself. A model that counts the flagged bits with a length-independent
mechanism keeps these masses fixed as 2l grows; a model whose flagged mass is diluted by the
l - k unflagged tokens reads a shrunk count, and once the shrinkage is about one bit the predicted
parity is systematically flipped: accuracy falls *below* chance (0.5). `accuracy_by_ones` tests
that reading directly: accuracy per number m of flagged ones.

    python -m lengen.analysis.attention --model K8/model.pt --lengths 50 100 200 500 --k 4 8 \
        --out-table attn.csv
    python -m lengen.report.figures attention --tables attn.csv --k-train 8 --out attn.png
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lengen.core.cli import command_parser, one_line_errors
from lengen.tasks import parse_spec
from lengen.tasks import sparse_parity as sp

CATEGORIES = ("bos", "flagged_j", "flagged_bit", "unflagged", "sep")


def token_categories(tokens: np.ndarray, n: int) -> np.ndarray:
    """Category index (into CATEGORIES) of every *input* token (the label excluded), (B, T-1)."""
    inputs = tokens[:, :-1]
    cat = np.full(inputs.shape, CATEGORIES.index("unflagged"))
    cat[:, 0] = CATEGORIES.index("bos")
    cat[:, -1] = CATEGORIES.index("sep")
    j = inputs[:, 1:-1:2] - (len(sp.SPECIALS) - 1)  # the integers J_i
    flagged = j <= n // 2
    cat[:, 1:-1:2] = np.where(flagged, CATEGORIES.index("flagged_j"), cat[:, 1:-1:2])
    cat[:, 2:-1:2] = np.where(flagged, CATEGORIES.index("flagged_bit"), cat[:, 2:-1:2])
    return cat


@torch.no_grad()
def last_query_attention(model, tokens: np.ndarray) -> torch.Tensor:
    """Attention probabilities of the last input token, (layers, B, heads, T-1), at true IDs."""
    example = sp.test_example(sp.Batch(tokens, np.zeros_like(tokens), None, None))
    inputs = example.model_inputs()
    probs = model.attention_probs(inputs["input_ids"], inputs["position_ids"], queries=[-1])
    return probs.squeeze(-2)  # (L, B, H, T)


def attention_mass(model, tokens: np.ndarray, n: int) -> pd.DataFrame:
    """Mean attention mass of the last input token per (layer, head, category)."""
    probs = last_query_attention(model, tokens).numpy()  # (L, B, H, T)
    cat = token_categories(tokens, n)  # (B, T)
    rows = []
    for c, name in enumerate(CATEGORIES):
        mass = (probs * (cat == c)[None, :, None, :]).sum(-1).mean(1)  # (L, H)
        for layer in range(mass.shape[0]):
            for head in range(mass.shape[1]):
                rows.append(
                    {"layer": layer, "head": head, "category": name, "mass": mass[layer, head]}
                )
    return pd.DataFrame(rows)


@torch.no_grad()
def predictions(model, tokens: np.ndarray) -> np.ndarray:
    """Predicted final token per row, at true position IDs."""
    example = sp.test_example(sp.Batch(tokens, np.zeros_like(tokens), None, None))
    inputs = example.model_inputs()
    return model(inputs["input_ids"], inputs["position_ids"])[:, -1].argmax(-1).numpy()


def accuracy_by_ones(tokens: np.ndarray, pred: np.ndarray, n: int) -> pd.DataFrame:
    """Accuracy per number m of flagged bits that are 1 (the count the parity is taken of)."""
    cat = token_categories(tokens, n)
    ones = ((cat == CATEGORIES.index("flagged_bit")) & (tokens[:, :-1] == sp.T1)).sum(1)
    correct = pred == tokens[:, -1]
    frame = pd.DataFrame({"ones": ones, "correct": correct})
    return frame.groupby("ones", as_index=False).agg(
        accuracy=("correct", "mean"), n=("correct", "size")
    )


def selectivity(mass: pd.DataFrame, k: int) -> pd.DataFrame:
    """Per head and length, log of the mean attention weight on one flagged token over that on
    one unflagged token (2k flagged and 2(l - k) unflagged J's and bits). A head whose logits do
    not grow with length keeps this flat, so its flagged mass falls like k / l."""
    p = mass.pivot_table(index=["head", "length"], columns="category", values="mass")
    half = p.index.get_level_values("length").to_numpy() / 2
    flagged = (p["flagged_j"] + p["flagged_bit"]) / (2 * k)
    unflagged = p["unflagged"] / (2 * (half - k))
    ratio = np.log(flagged.to_numpy() / np.maximum(unflagged.to_numpy(), 1e-12))
    return p.index.to_frame(index=False).assign(log_ratio=ratio)


def diagnose(
    model, lengths, ks, n: int, n_examples: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(attention-mass table, accuracy-by-ones table) over test lengths 2l and sparsities k."""
    mass, by_ones = [], []
    for length in lengths:
        for k in ks:
            if k >= length // 2:
                continue
            batch = sp.sample(
                np.random.default_rng([seed, length, k]), n_examples, length // 2, k, n
            )
            m = attention_mass(model, batch.tokens, n)
            mass.append(m.assign(length=length, k_test=k))
            a = accuracy_by_ones(batch.tokens, predictions(model, batch.tokens), n)
            by_ones.append(a.assign(length=length, k_test=k))
    return pd.concat(mass, ignore_index=True), pd.concat(by_ones, ignore_index=True)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: the attention-mass and accuracy-by-ones table of one sparse-parity model."""
    from lengen.core import provenance
    from lengen.model.modelfile import model_from_saved, read_model_file, training_outcome

    parser = command_parser(__spec__, __doc__)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--lengths", type=int, nargs="+", default=[20, 50, 100, 150, 200, 300, 500])
    parser.add_argument("--k", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--n-examples", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-table", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    saved = read_model_file(args.model)
    model, spec = model_from_saved(saved), parse_spec(saved["spec"])
    mass, by_ones = diagnose(model, args.lengths, args.k, spec.task.n, args.n_examples, args.seed)
    table = pd.concat(
        [mass.assign(table="attention_mass"), by_ones.assign(table="accuracy_by_ones")]
    ).assign(**training_outcome(saved))
    setup = {
        "spec": spec.source,
        "lengths": args.lengths,
        "k": args.k,
        "n_examples": args.n_examples,
    }
    args.out_table.parent.mkdir(parents=True, exist_ok=True)
    provenance.stamp(table, setup, args.seed).to_csv(args.out_table, index=False)


if __name__ == "__main__":
    main()
