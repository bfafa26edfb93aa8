"""Sparse parity's size ladder on the paper's architecture (RoPE + PoSE, no log-length scaling):
does accuracy at 2l = 200-500 move toward the paper's as the model grows?

The ladder's runs are probes of probes/sparse_parity.yaml (`K8_ladder_<layers>x<width>_s<seed>`,
K_train = 8, the default tier's neox recipe at three sizes, three seeds each), trained and scored
by `python probes/sparse_parity.py run NAME` into probes/sparse_parity_probes.csv. This draws
them: per tested length, each run's worst accuracy over k_test <= K_train against the model's
parameters, a dot per run (those not yet run are absent, and the title counts them).

    python probes/ladder.py            # probes/sparse_parity_ladder.png
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
TABLE = HERE / "sparse_parity_probes.csv"
PROBES = HERE / "sparse_parity.yaml"
OUT = HERE / "sparse_parity_ladder.png"
LADDER = re.compile(r"^K8_ladder_(\d+)x(\d+)_s(\d+)$")
LENGTHS = (50, 100, 200, 500)  # the probe grid's test lengths (probes/sparse_parity.py)


def ladder_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The ladder's runs of the probe table: size, seed, params and the worst accuracy over
    k_test <= K_train at each tested length (long format: one row per run and length)."""
    rows = []
    for r in table.itertuples():
        found = LADDER.match(str(r.probe))
        if not found:
            continue
        k = int(r.k_train)
        for length in LENGTHS:
            worst = min(getattr(r, f"acc_L{length}_k{j}") for j in range(1, k + 1))
            rows.append(
                {
                    "size": f"{found[1]} x {found[2]}",
                    "seed": int(found[3]),
                    "params": int(r.params),
                    "length": length,
                    "worst": worst,
                    "steps_run": int(r.steps_run),
                }
            )
    return pd.DataFrame(rows)


def draw(out: Path = OUT) -> pd.DataFrame:
    """The ladder figure: a panel per tested length, each run's worst accuracy vs parameters;
    returns the rows drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = ladder_rows(pd.read_csv(TABLE))
    planned = [n for n in yaml.safe_load(PROBES.read_text())["probes"] if LADDER.match(n)]
    fig, axes = plt.subplots(1, len(LENGTHS), figsize=(3.0 * len(LENGTHS), 3.0), sharey=True)
    for ax, length in zip(axes, LENGTHS, strict=True):
        at = d[d.length == length] if len(d) else d
        if len(at):
            ax.scatter(at.params, at.worst, color="tab:blue", zorder=3)
            means = at.groupby("params").worst.mean()
            ax.plot(means.index, means.values, color="tab:blue", alpha=0.4)
            sizes = at.groupby("params")["size"].first()
            ax.set_xscale("log")
            ax.set_xticks(
                list(sizes.index), labels=[f"{s}\n{p:,}" for p, s in sizes.items()], fontsize=7
            )
            ax.minorticks_off()
            ax.set_xlim(sizes.index.min() / 1.8, sizes.index.max() * 1.8)
        ax.axhline(0.9, color="green", lw=0.8, ls="--")
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set(title=f"2l = {length}", xlabel="model (parameters)", ylim=(-0.02, 1.05))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("worst accuracy, k_test <= K_train = 8")
    runs = d.drop_duplicates(["size", "seed"]) if len(d) else d
    fig.suptitle(
        f"Sparse parity on the paper's model (RoPE + PoSE), K_train = 8, trained on "
        f"2l <= 50: {len(runs)} of {len(planned)} ladder runs (dashed: 0.9, dotted: "
        "chance)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return d


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    d = draw(args.out)
    if len(d):
        print(d.pivot_table(index=["size", "seed"], columns="length", values="worst").round(3))


if __name__ == "__main__":
    main()
