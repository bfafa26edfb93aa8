"""Why PPC parity fails beyond the training lengths: where each scratchpad prediction attends.

With coupled IDs, the token predicting scratchpad bit s_i (the previous scratchpad token, or <SEP>
for i = 1) needs the k input bits whose coupled ID is i (jump k). For every layer and head this
measures the mean attention mass of those queries on exactly those bits, per test length 2l,
teacher-forced at the test's IDs, together with the per-token error rate. A model that finds the
bits by a length-independent rule keeps the mass as 2l grows; a diluted one loses it to the
l - k other bits, and its per-token errors appear at every scratchpad position, not only at the
late ones.

    python probes/scratchpad_attention.py --model NAME=PATH [NAME=PATH ...] --jump 1 \
        --out probes/scratchpad_attention.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lengen.core.batch import IGNORE
from lengen.model.modelfile import load_model
from lengen.tasks import parity_scratchpad as ps

LENGTHS = (20, 40, 60, 100, 150, 200)


@torch.no_grad()
def needed_bit_mass(model, length: int, jump: int, n: int = 128) -> pd.DataFrame:
    """Mean attention mass on the needed input bits per (layer, head), and the teacher-forced
    per-token error rate, at test length 2l = length (fixed draw, seed 0)."""
    b = ps.sample(np.random.default_rng([0, length, jump]), n, length, jump)
    inputs = ps.test_example(b, "ppc").model_inputs()
    m, sep = b.n_bits // jump, b.prompt_len - 1  # scratchpad length; <SEP>'s input index
    queries = torch.arange(sep, sep + m)  # query sep + i - 1 predicts s_i
    keys = torch.stack([torch.arange(1 + i * jump, 1 + (i + 1) * jump) for i in range(m)])
    masses = []
    for rows in model.attention_probs(inputs["input_ids"], inputs["position_ids"], queries):
        mass = rows.gather(-1, keys.expand(*rows.shape[:2], m, jump)).sum(-1)  # (B, H, m)
        masses.append(mass.mean((0, 2)))
    logits = model(inputs["input_ids"], inputs["position_ids"])[0]
    scored = inputs["labels"] != IGNORE
    errors = ((logits.argmax(-1) != inputs["labels"]) & scored).sum() / scored.sum()
    return pd.DataFrame(
        [
            {
                "length": length,
                "layer": li,
                "head": h,
                "mass": float(mh),
                "token_error": float(errors),
            }
            for li, mass in enumerate(masses)
            for h, mh in enumerate(mass)
        ]
    )


def per_model_table(items: list[str], lengths, table_fn) -> pd.DataFrame:
    """One table from table_fn(model, length) for every NAME=PATH model and length, with a
    `model` column (one thread: the diagnostics run beside training jobs)."""
    torch.set_num_threads(1)
    tables = []
    for item in items:
        name, path = item.split("=", 1)
        model = load_model(path)
        tables += [table_fn(model, length).assign(model=name) for length in lengths]
    return pd.concat(tables, ignore_index=True)


def main(argv: list[str] | None = None) -> None:
    """CLI: mass table (CSV beside the figure) and figure for one or more models."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", required=True, help="NAME=PATH of a model.pt")
    parser.add_argument("--jump", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    table = per_model_table(args.model, LENGTHS, lambda m, n: needed_bit_mass(m, n, args.jump))
    table.to_csv(args.out.with_suffix(".csv"), index=False)
    fig, (ax, ax_err) = plt.subplots(1, 2, figsize=(11, 4))
    for name, d in table.groupby("model", sort=False):
        layer, head = d.groupby(["layer", "head"]).mass.mean().idxmax()  # most focused head
        sub = d[(d["layer"] == layer) & (d["head"] == head)]
        ax.plot(sub.length, sub.mass, marker="o", label=f"{name} (layer {layer}, head {head})")
        err = d.groupby("length").token_error.first().clip(lower=1e-4)  # 0 drawn at the floor
        ax_err.plot(err.index, err.values, marker="o", label=name)
    ax.axvline(40, color="grey", ls=":", lw=0.8)
    title = f"PPC parity, jump {args.jump}: each model's most focused head"
    ax.set(
        xlabel="test length 2l",
        ylabel="attention mass on the needed input bit(s)",
        title=title,
        ylim=(0, 1),
    )
    ax.legend(fontsize=6)
    ax_err.axvline(40, color="grey", ls=":", lw=0.8)
    ax_err.set(
        xlabel="test length 2l",
        ylabel="teacher-forced per-token error",
        title="scratchpad token errors (0 drawn at 1e-4)",
        yscale="log",
    )
    ax_err.legend(fontsize=7)
    fig.savefig(args.out, dpi=150, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    main()
