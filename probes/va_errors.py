"""Why PPC variable assignment fails beyond the training lengths: which prediction breaks first.

A scratchpad triple j is `v_{1,j}, <-, v_{1,j+1}` at coupled IDs I_j, I_j + 1, I_j + 2. Of its
predictions (token and next position ID), three kinds are easy by coupling (the next ID is the
current ID + 1; the next token is the input token at that ID) and one is a content lookup: the
token v_{1,j+1} at ID I_j + 2 must predict the ID I_{j+1} of the *left-hand* occurrence of the same
variable in the input (it also occurs on the right of assignment j, at I_j + 2 itself); the first
one, <SEP2> predicting I_1, looks up v_init. This table gives, per test length l, teacher-forced
at the test's IDs (fixed draw, seed 0):

- the error rate of each prediction kind (token / ID; lookup vs coupled), and
- for the lookup queries, per layer and head, the mean attention mass on the target (the
  left-hand occurrence) and on the decoy (the right-hand occurrence).

A lookup that dilutes with length loses mass on the target to the other l tokens; one that
confuses the occurrences moves it to the decoy.

    python probes/va_errors.py --model NAME=PATH [NAME=PATH ...] --depth 5 \
        --out probes/va_errors.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scratchpad_attention import per_model_table

from lengen.tasks import variable_assignment as va

LENGTHS = (40, 60, 90, 120, 150, 180)


@torch.no_grad()
def lookup_table(model, length: int, depth: int, n_vars: int, n: int = 128) -> pd.DataFrame:
    """Rows (length, kind, layer, head, value): error rates per prediction kind and attention
    mass of the lookup queries on target / decoy."""
    b = va.sample(np.random.default_rng([0, length, depth]), n, length, depth, n_vars)
    inputs = va.test_example(b, "ppc").model_inputs()
    p = b.prompt_len  # tokens up to and including <SEP2>; input index p - 1 is <SEP2>
    # input index of the query predicting each scratchpad token t (t = 0 .. 3d - 1): p - 1 + t
    t = np.arange(3 * depth)
    lookup_t = t[t % 3 == 0]  # tokens whose *ID* is a lookup: v_{1,j} at I_j (query: one before)
    queries = torch.as_tensor(p - 1 + lookup_t)
    ids = torch.as_tensor(b.coupled_ids)
    target = ids[:, p + lookup_t]  # I_j: the input index of the left-hand v_{1,j} (IDs = indices)
    decoy = torch.where(torch.as_tensor(lookup_t) == 0, -1, ids[:, p + lookup_t - 1])  # I_{j-1} + 2
    rows = []
    logits, pos_logits = model(inputs["input_ids"], inputs["position_ids"])
    tok_ok = logits.argmax(-1) == inputs["labels"]
    id_ok = pos_logits.argmax(-1) == inputs["position_labels"]
    for name, ok in (("token", tok_ok), ("id", id_ok)):
        scored = ok[:, p - 1 :]  # (B, 3d)
        rows.append(
            (length, f"{name}_error_lookup", -1, -1, 1 - float(scored[:, lookup_t].float().mean()))
        )
        other = np.setdiff1d(t, lookup_t)
        rows.append(
            (length, f"{name}_error_coupled", -1, -1, 1 - float(scored[:, other].float().mean()))
        )
    probs = model.attention_probs(inputs["input_ids"], inputs["position_ids"], queries)
    for li, rows_q in enumerate(probs):  # (B, H, d, T)
        B, H = rows_q.shape[:2]
        on_target = rows_q.gather(-1, target[:, None, :, None].expand(B, H, -1, 1))
        safe = decoy.clamp(min=0)[:, None, :, None].expand(B, H, -1, 1)
        on_decoy = rows_q.gather(-1, safe)
        on_decoy = on_decoy * (decoy >= 0)[:, None, :, None]
        for h in range(H):
            rows.append((length, "mass_target", li, h, float(on_target[:, h].mean())))
            rows.append((length, "mass_decoy", li, h, float(on_decoy[:, h, 1:].mean())))
    return pd.DataFrame(rows, columns=["length", "kind", "layer", "head", "value"])


def main(argv: list[str] | None = None) -> None:
    """CLI: table (CSV beside the figure) and figure for one or more models."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", required=True, help="NAME=PATH of a model.pt")
    parser.add_argument("--depth", type=int, required=True)
    parser.add_argument("--n-vars", type=int, default=200)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    table = per_model_table(
        args.model, LENGTHS, lambda m, n: lookup_table(m, n, args.depth, args.n_vars)
    )
    table.to_csv(args.out.with_suffix(".csv"), index=False)
    fig, (ax_err, ax_mass) = plt.subplots(1, 2, figsize=(12, 4.2))
    for (name, d), colour in zip(
        table.groupby("model", sort=False), plt.get_cmap("tab10").colors, strict=False
    ):
        for kind, ls in (
            ("id_error_lookup", "-"),
            ("id_error_coupled", ":"),
            ("token_error_lookup", "--"),
            ("token_error_coupled", "-."),
        ):
            sub = d[d.kind == kind]
            ax_err.plot(
                sub.length,
                sub.value.clip(lower=1e-4),
                ls=ls,
                marker="o",
                color=colour,
                label=f"{name}: {kind}",
            )
        mass = d[d.kind == "mass_target"]
        layer, head = mass.groupby(["layer", "head"]).value.mean().idxmax()
        for kind, ls in (("mass_target", "-"), ("mass_decoy", "--")):
            sub = d[(d.kind == kind) & (d.layer == layer) & (d["head"] == head)]
            ax_mass.plot(
                sub.length,
                sub.value,
                ls=ls,
                marker="o",
                color=colour,
                label=f"{name}: {kind} (layer {layer}, head {head})",
            )
    for ax in (ax_err, ax_mass):
        ax.axvline(60, color="grey", ls=":", lw=0.8)
        ax.legend(fontsize=6)
    ax_err.set(
        xlabel="test length l",
        ylabel="teacher-forced error rate (0 drawn at 1e-4)",
        yscale="log",
        title=f"PPC variable assignment, depth {args.depth}",
    )
    ax_mass.set(
        xlabel="test length l",
        ylabel="attention mass of the lookup query",
        ylim=(0, 1),
        title="most focused head: left-hand occurrence vs decoy",
    )
    fig.savefig(args.out, dpi=150, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    main()
