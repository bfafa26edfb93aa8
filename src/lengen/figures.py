"""Figures with seaborn: accuracy vs test length for sparse parity (Figs. 1, 7; Sec. 5.1) and the
scratchpad tasks with their ablations (Figs. 2, 8, 3a-d; Sec. 5.2)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lengen import provenance  # noqa: E402

DEFAULT_STYLE = {"context": "paper", "height": 3.0, "aspect": 1.15, "dpi": 150}


def sparse_parity_figure(
    table: pd.DataFrame,
    title: str,
    out: Path,
    style: dict,
    train_range: tuple[int, int] | None,
    metadata: dict | None = None,
) -> None:
    """Accuracy vs test length 2l, a line per k_test, a panel per K_train (Figs. 1, 7);
    the training lengths are shaded and chance (0.5) dotted."""
    style = {**DEFAULT_STYLE, **style}
    sns.set_theme(context=style["context"], style="whitegrid")
    table = table.rename(columns={"length": "test length 2l", "k_test": "k_test"})
    grid = sns.relplot(
        data=table.sort_values("k_train"),
        x="test length 2l",
        y="accuracy",
        hue="k_test",
        col="k_train",
        kind="line",
        marker="o",
        palette="viridis",
        height=style["height"],
        aspect=style["aspect"],
        facet_kws={"sharey": True},
    )
    grid.set_titles("K_train = {col_name}")
    grid.set(ylim=(-0.02, 1.02))  # below-chance accuracy happens (systematic miscounts)
    for ax in grid.axes.flat:
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        if train_range:
            ax.axvspan(*train_range, color="grey", alpha=0.15, lw=0)
    grid.figure.suptitle(title, y=1.04)
    out.parent.mkdir(parents=True, exist_ok=True)
    grid.figure.savefig(out, dpi=style["dpi"], bbox_inches="tight", metadata=metadata)
    plt.close(grid.figure)


PANEL_LABELS = {
    "ppc": "Predictive Position Coupling",
    "absolute": "absolute PE, random shift (no coupling)",
    "no_coupling": "scratchpad, no coupling",
    "no_scratchpad": "RoPE + PoSE, no scratchpad",
    "rope_pose": "RoPE + PoSE",
}


def scratchpad_figure(
    table: pd.DataFrame,
    panels: list[str],
    title: str,
    out: Path,
    style: dict,
    train_range: tuple[int, int] | None,
    metadata: dict | None = None,
) -> None:
    """Exact-match accuracy vs test length, a line per jump / depth (mean over training runs with
    a 95% CI band, as the paper), a panel per variant in `panels` order (Figs. 2, 8, 3a-d)."""
    style = {**DEFAULT_STYLE, **style}
    sns.set_theme(context=style["context"], style="whitegrid")
    param = "jump" if "jump" in table else "depth"
    table = table[table["variant"].isin(panels)].copy()
    letters = "abcdefgh" if len(panels) > 1 else ""
    names = {
        v: (f"({letters[i]}) " if letters else "") + PANEL_LABELS.get(v, v)
        for i, v in enumerate(panels)
    }
    table["panel"] = table["variant"].map(names)
    x = "test length 2l" if param == "jump" else "test length l"
    table = table.rename(columns={"length": x})
    grid = sns.relplot(
        data=table,
        x=x,
        y="accuracy",
        hue=param,
        col="panel",
        col_order=[names[v] for v in panels],
        kind="line",
        marker="o",
        errorbar=("ci", 95),
        palette="viridis",
        height=style["height"],
        aspect=style["aspect"],
        facet_kws={"sharey": True},
    )
    grid.set_titles("{col_name}")
    grid.set(ylim=(-0.02, 1.02))
    for ax in grid.axes.flat:
        if train_range:
            ax.axvspan(*train_range, color="grey", alpha=0.15, lw=0)
    runs = table.groupby("variant")["seed"].nunique()
    counts = ", ".join(f"{v} {runs[v]}" for v in panels if v in runs)
    grid.figure.suptitle(f"{title}\ntraining runs per line: {counts}", y=1.08)
    out.parent.mkdir(parents=True, exist_ok=True)
    grid.figure.savefig(out, dpi=style["dpi"], bbox_inches="tight", metadata=metadata)
    plt.close(grid.figure)


def main(argv: list[str] | None = None) -> None:
    """CLI: python -m lengen.figures {sparse_parity|scratchpad} --tables A.csv ... --out fig.png."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figure", choices=["sparse_parity", "scratchpad"])
    parser.add_argument("--panels", nargs="+", help="scratchpad: variant per panel")
    parser.add_argument("--tables", nargs="+", type=Path, required=True)
    parser.add_argument("--title", default="")
    parser.add_argument("--style", default="{}", help="JSON of style overrides")
    parser.add_argument("--train-range", nargs=2, type=int, help="training lengths, shaded")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    table = pd.concat([pd.read_csv(p) for p in args.tables], ignore_index=True)
    style = json.loads(args.style)
    setup = {k: v for k, v in vars(args).items() if k not in ("tables", "out")}
    setup["inputs"] = sorted(table["config_hash"].unique()) if "config_hash" in table else []
    meta = provenance.png_metadata(setup, provenance.table_seeds(table))
    if args.figure == "sparse_parity":
        sparse_parity_figure(table, args.title, args.out, style, args.train_range, meta)
    else:
        scratchpad_figure(table, args.panels, args.title, args.out, style, args.train_range, meta)


if __name__ == "__main__":
    main()
