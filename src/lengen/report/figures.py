"""Every kind of figure, one object each (`FigureKind`, the registry `KINDS`): how its job is made
from the config (the tables it reads and the arguments of `python -m lengen.report.figures
<kind>`), how it is drawn, and its caption in Snakemake's report.html. The kinds: accuracy vs test
length for sparse parity (Figs. 1, 7; Sec. 5.1) and the tasks scored by generation with their
ablations (Figs. 2, 8, 3a-d; Sec. 5.2); the natural-language loss scatters (Figs. 4, 6) and mask
illustration (Fig. 5) of Sec. 5.3; the theory's exact risks (Prop. C.3, Theorem 4.3, Prop. 4.4);
sparse parity's attention diagnostic. A figure (lengen.config.artifacts.FIGURES, or one a tier
adds) names its kind; the workflow's one figure rule asks `figure_jobs(cfg)` for every figure
of a run.

Importing this module is cheap (the Snakefile reads it when it plans): matplotlib, seaborn,
pandas and the analysis code are imported by the drawers, when a figure is drawn."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lengen import tasks
from lengen.config import artifacts, plan
from lengen.config.figure_jobs import CATEGORIES, FigureJob, eval_lengths, results, to_json
from lengen.core.claims import NEAR_PERFECT
from lengen.core.cli import command_parser, one_line_errors
from lengen.core.positions import scheme_label

if TYPE_CHECKING:
    import argparse

    import pandas as pd


def _pyplot():
    """matplotlib's pyplot (the Agg backend: files, no display) and seaborn, imported when a
    figure is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    return plt, sns


DEFAULT_STYLE = {"context": "paper", "height": 3.0, "aspect": 1.15, "dpi": 150}


def wrapped(title: str, fig, per_inch: int = 9) -> str:
    """A suptitle broken into lines no wider than the figure (about 9 characters an inch at
    matplotlib's default title size; `per_inch` for a smaller font); its own line breaks kept."""
    import textwrap

    width = max(20, int(fig.get_figwidth() * per_inch))
    return "\n".join(line for part in title.split("\n") for line in textwrap.wrap(part, width))


def split_scale(title: str) -> tuple[str, str]:
    """A figure's title and the scale it holds at, apart: "Fig. 2: parity (default tier, 3 layers
    x 128)" -> ("Fig. 2: parity", "(default tier, 3 layers x 128)"): the title on one line, the
    scale as its subtitle. ("", "") parts stay empty."""
    title = title.strip()
    if not title.endswith(")"):
        return title, ""
    depth = 0
    for i in range(len(title) - 1, -1, -1):  # the last parenthesis, with those inside it
        depth += {")": 1, "(": -1}.get(title[i], 0)
        if depth == 0:
            break
    scale = title[i:]
    return (title[:i].rstrip(), scale) if " tier" in scale and i > 0 else (title, "")


def titled(fig, title: str, width_of=None) -> str:
    """The suptitle text of a figure: its title, then its scale on a line of its own, each
    wrapped to the figure's width (`width_of`: another figure whose width counts)."""
    main, scale = split_scale(title)
    return wrapped("\n".join(x for x in (main, scale) if x), width_of or fig)


def palette(sns, n: int) -> list:
    """n colours of viridis short of its palest yellow, so the last line reads on white."""
    import numpy as np

    cmap = sns.color_palette("viridis", as_cmap=True)
    return [cmap(x) for x in np.linspace(0.0, 0.82, n)] if n > 1 else [cmap(0.0)]


def _save(fig, out: Path, dpi: int, metadata: dict | None) -> None:
    """Write a figure (provenance in the PNG's metadata) and free it."""
    plt, _ = _pyplot()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi, bbox_inches="tight", metadata=metadata)
    plt.close(fig)


def draw_runs(panels: list[dict], out: Path, metadata: dict | None, dpi: int = 150) -> None:
    """The report's figure of every run (artifacts.RUNS_FIGURE): a panel per row judged on its
    runs (`panels`: each a dict of `id`, `verdict`, `threshold` and `outcomes`, the row's
    RunOutcomes), each run's value (its worst cell, or its gap to the paired run) as a dot by
    model group, filled where the run passes and hollow where it fails, the rule's threshold
    dashed: a reader sees at a glance whether runs generalize or fail, and how many. A tier
    without such rows gets a figure saying so."""
    plt, _ = _pyplot()
    cols = min(4, max(1, len(panels)))
    rows = max(1, math.ceil(len(panels) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.9 * rows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    if not panels:
        axes[0, 0].text(
            0.5,
            0.5,
            "no row of this tier is judged on training runs",
            ha="center",
            va="center",
            transform=axes[0, 0].transAxes,
        )
    for ax, panel in zip(axes.flat, panels, strict=False):
        groups = list(dict.fromkeys(o.group for o in panel["outcomes"]))
        for i, group in enumerate(groups):
            mine = [o for o in panel["outcomes"] if o.group == group]
            offsets = (
                [0.0]
                if len(mine) == 1
                else [-0.25 + 0.5 * j / (len(mine) - 1) for j in range(len(mine))]
            )
            for o, dx in zip(mine, offsets, strict=True):
                ax.scatter(
                    i + dx,
                    o.value,
                    s=22,
                    color="tab:blue" if o.passed else "white",
                    edgecolors="tab:blue" if o.passed else "tab:red",
                    linewidths=1.2,
                    zorder=3,
                )
        ax.axhline(panel["threshold"], color="grey", ls="--", lw=1)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([_short(g) for g in groups], rotation=30, ha="right", fontsize=7)
        ax.set_xlim(-0.6, len(groups) - 0.4)
        ax.set_title(wrapped(f"{panel['id']}: {panel['verdict']}", fig), fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(
        "Every training run, by sentence and model group: its worst cell (or paired "
        "gap); filled: passes (its test set does not show it below the threshold), "
        "hollow red: fails; dashed: the rule's threshold",
        fontsize=9,
    )
    fig.tight_layout()
    _save(fig, out, dpi, metadata)


def _short(group: str, limit: int = 24) -> str:
    """A model group's name short enough for a tick label."""
    return group if len(group) <= limit else group[: limit - 3] + "..."


# The kinds ------------------------------------------------------------------------------------
# Each kind: `job` (config, figure) -> (the tables it reads, its other CLI arguments), `draw`
# (table, the CLI's arguments, PNG metadata) -> the PNG at args.out, `caption` (config) -> its
# report.html caption (reStructuredText), `reads`: "eval" (per-model eval tables, read and checked
# as the table rule reads them), "tables" (report-level tables), "nothing" (drawn from code).


@dataclass(frozen=True)
class FigureKind:
    """One kind of figure: how its job is made, how it is drawn, what its caption says."""

    name: str
    job: Callable[[dict, artifacts.Figure], tuple[list[str], list[str]]]
    draw: Callable[[pd.DataFrame, argparse.Namespace, dict], None]
    caption: Callable[[dict], str]
    reads: str = "tables"


# Sparse parity (Figs. 1, 7) -------------------------------------------------------------------


def sparse_parity_figure(
    table: pd.DataFrame,
    title: str,
    out: Path,
    style: dict,
    train_range: tuple[int, int] | None,
    metadata: dict | None = None,
    labels: dict[str, str] | None = None,
) -> None:
    """Accuracy vs test length 2l, a line per k_test, a panel per K_train (Figs. 1, 7), a row
    per model variant (labelled by `labels`); training lengths shaded, chance (0.5) dotted."""
    plt, sns = _pyplot()
    from matplotlib.ticker import MaxNLocator

    style = {**DEFAULT_STYLE, **style}
    sns.set_theme(context=style["context"], style="whitegrid")
    table = table.rename(columns={"length": "test length 2l", "k_test": "k_test"})
    if "variant" not in table:
        table["variant"] = "neox"
    labels = labels or {}
    order = [v for v in labels if v in set(table["variant"])] or sorted(table["variant"].unique())
    table["model"] = table["variant"].map(lambda v: labels.get(v, v))
    table["k_test vs K_train"] = (table["k_test"] > table["k_train"]).map(
        {False: "k_test <= K_train", True: "k_test > K_train (untrained k)"}
    )
    runs = table.groupby(["variant", "k_train"])["seed"].nunique() if "seed" in table else None
    models = [labels.get(v, v) for v in order]
    # one K_train (the schemes figure, a small tier's Fig. 1 / 7): the models side by side in one
    # row, not one narrow column; several: a panel per K_train, a row per model
    single = table["k_train"].nunique() == 1
    facets = (
        {"col": "model", "col_order": models}
        if single
        else {"col": "k_train", "row": "model", "row_order": models}
    )
    grid = sns.relplot(
        data=table.sort_values("k_train"),
        x="test length 2l",
        y="accuracy",
        hue="k_test",
        style="k_test vs K_train",
        style_order=["k_test <= K_train", "k_test > K_train (untrained k)"],
        **facets,
        # DEPARTURE (docs/departures.md, Figures): the paper's bands are 95% CIs; ours are
        # the range of the runs (one row per run and length): lowest to highest. Not a CI: a
        # bootstrap over 3 rows (seaborn's "ci") is roughly that range, and reads as more
        # (issue 64); the report's intervals are in REPORT.md
        errorbar=("pi", 100),
        err_kws={"alpha": 0.12},  # light: the bands of several k_test overlap (issue 65)
        kind="line",
        marker="o",
        palette=palette(sns, table["k_test"].nunique()),
        height=style["height"],
        aspect=style["aspect"],
        facet_kws={"sharey": True},
    )
    if single:
        grid.set_titles("{col_name}\nK_train = " + str(int(table["k_train"].iloc[0])))
    else:
        grid.set_titles("{row_name}\nK_train = {col_name}")
    grid.set(ylim=(-0.02, 1.02))  # below-chance accuracy happens (systematic miscounts)
    for ax in grid.axes.flat:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # lengths are whole (not 7.5)
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        if train_range:
            ax.axvspan(*train_range, color="grey", alpha=0.15, lw=0)
        if train_range:  # say what the grey band is, inside it, clear of the lines (top)
            ax.text(sum(train_range) / 2, 0.04, "trained", ha="center", fontsize=6, color="dimgrey")
    for key, ax in grid.axes_dict.items():  # a model that never learned: faint
        model, k_train = (key, table["k_train"].iloc[0]) if single else key
        cell = table[(table.model == model) & (table.k_train == k_train)]
        inside = cell[cell.k_test <= cell.k_train]
        if train_range:
            inside = inside[inside["test length 2l"].between(*train_range)]
        means = inside.groupby(["k_test", "test length 2l"]).accuracy.mean()
        if len(means) and means.min() < NEAR_PERFECT:
            for line in ax.get_lines()[:-1]:
                line.set_alpha(0.3)
            ax.set_title(
                f"{ax.get_title()}\n(did not learn its training range: {means.min():.2f})",
                fontsize=8,
                color="dimgrey",
            )
    per = runs.groupby(level=0).min() if runs is not None and len(runs) else None
    counts = [int(per[v]) for v in order if v in per] if per is not None else [1]
    if len(set(counts)) == 1:  # "training runs per model: 3"
        shown = str(counts[0])
    else:  # a row per model variant: "3 (row 1), 1 (row 2)"
        shown = ", ".join(f"{n} (row {i})" for i, n in enumerate(counts, 1))
    banded = any(n > 1 for n in counts)
    note = (
        f"Training runs per model: {shown}; line: their mean"
        + ("; band: their range, lowest to highest (none with one run)" if banded else "")
        + "; dashed: k_test > K_train; grey: training lengths; dotted: chance."
    )
    lines = titled(grid.figure, title)
    # the title ~0.3 in a line above the panels' titles, whatever the height
    top = 1 + 0.3 * (lines.count("\n") + 1) / grid.figure.get_figheight()
    grid.figure.suptitle(lines, y=top)
    grid.figure.text(0.5, -0.01, wrapped(note, grid.figure), ha="center", va="top", fontsize=8)
    grid.figure.subplots_adjust(hspace=0.45)  # three-line panel titles clear the row above
    _save(grid.figure, out, style["dpi"], metadata)


def _sparse_parity_job(cfg: dict, fig: artifacts.Figure) -> tuple[list[str], list[str]]:
    sp = cfg["sparse_parity"]
    schemes = sp.get("schemes") or {}
    variants = list(sp["variants"])
    if fig.key == "schemes":  # NoPE / ALiBi beside the variants at one K_train
        variants += list(schemes["variants"])
        ks = [schemes["k_train"]]
    else:
        ks = sp["figures"][fig.key]
    title = fig.title.format(
        tier=cfg["tier"],
        k_train=ks[0] if fig.key == "schemes" else ks,
        model=artifacts.trained_model(sp, variants),
    )
    labels = {v: e["label"] for v, e in {**sp["variants"], **schemes.get("variants", {})}.items()}
    args = [
        "--title",
        title,
        "--style",
        to_json(sp["figures"].get("style", {})),
        "--train-range",
        str(sp["train_min_len"]),
        str(sp["train_max_len"]),
        "--labels",
        to_json([[v, labels[v]] for v in variants]),  # config order: row order
        "--lengths",
        eval_lengths(cfg, "sparse_parity"),
    ]
    return plan.evals(cfg, "sparse_parity", variants, ks), args


def _draw_sparse_parity(table: pd.DataFrame, args, meta: dict) -> None:
    labels = dict(json.loads(args.labels))  # insertion order = row order
    sparse_parity_figure(
        table, args.title, args.out, json.loads(args.style), args.train_range, meta, labels
    )


SPARSE_PARITY = FigureKind(
    "sparse_parity",
    _sparse_parity_job,
    _draw_sparse_parity,
    lambda cfg: (
        "Sparse parity (Sec. 5.1, Figs. 1 and 7): final-token accuracy vs test length "
        "2l, a line per k_test (the mean over training runs; band: the range of the runs, lowest "
        "to highest, as in every figure of the report: REPORT.md judges each run), a panel per "
        "K_train; training lengths shaded, chance dotted."
    ),
    reads="eval",
)


# Tasks scored by generation (Figs. 2, 8, 3a-d; majority) --------------------------------------


VARIANT_LABELS = {  # variants named for what they drop; a scheme's own name: its label
    "no_coupling": "scratchpad, no coupling",
    "no_scratchpad": "RoPE + PoSE, no scratchpad",
}


# each task's length axis with what it counts (the paper's own notation: 2l for parity, l for
# variable assignment; both in tokens, said so that Figs. 2 and 3 read on one unit)
UNITS = {
    "test length 2l": "test length 2l (tokens: input + scratchpad)",
    "test length l": "test length l (tokens: the input's assignments)",
}


def panel_label(variant: str) -> str:
    """A panel's title: the variant's label, else its scheme's (lengen.core.positions)."""
    return VARIANT_LABELS.get(variant) or scheme_label(variant)


def run_bands(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per cell of `keys` (+ length): the run-mean accuracy, the range of the runs (lowest and
    highest run: the band of every figure, a DEPARTURE from the paper's 95% CIs,
    docs/departures.md; the report judges each run, and no interval on the
    run means holds its coverage on runs like ours, lengen.report.coverage) and the number of
    runs."""
    import pandas as pd

    from lengen.report import effects

    rows = []
    for cell, g in table.groupby([*keys, "length"]):
        e = effects.level(g, "")
        values = [v for _, v in e.per_run] or [e.estimate]
        rows.append(
            {
                **dict(zip([*keys, "length"], cell, strict=True)),
                "accuracy": e.estimate,
                "low": min(values),
                "high": max(values),
                "runs": e.runs[0],
            }
        )
    return pd.DataFrame(rows)


def learned(bands: pd.DataFrame, train_range: tuple[int, int] | None) -> bool:
    """A line's model learned its training range: run-mean >= NEAR_PERFECT at every tested
    training length (the report's gate; True when no range is given)."""
    if not train_range:
        return True
    inside = bands[bands.length.between(*train_range)]
    return bool(len(inside) == 0 or inside.accuracy.min() >= NEAR_PERFECT)


def generation_figure(
    table: pd.DataFrame,
    panels: list[str],
    title: str,
    out: Path,
    style: dict,
    train_range: tuple[int, int] | None,
    metadata: dict | None = None,
    letters: str = "",
) -> None:
    """Exact-match accuracy vs test length, a line per jump / depth (the run mean, with the range
    of the runs as its band where it has more than one run, as Fig. 1's), a panel per variant in
    `panels` order (Figs. 2, 8, 3a-d); the legend below each panel, never over the data. A line
    whose models did not learn the training range (run mean < NEAR_PERFECT there) is drawn
    dashed and faint and named so in the legend: it is not a length-generalization result."""
    plt, sns = _pyplot()

    style = {**DEFAULT_STYLE, **style}
    sns.set_theme(context=style["context"], style="whitegrid")
    setting = next(  # the task whose per-model setting (jump, depth, ...) the table has
        t.SETTING for t in tasks.generation_tasks().values() if t.SETTING.key in table
    )
    param, x = setting.key, UNITS.get(setting.length_axis, setting.length_axis)
    table = table[table["variant"].isin(panels)]
    letters = (letters or "abcdefgh"[: len(panels)]) if len(panels) > 1 else ""
    values = sorted(table[param].unique())
    colors = dict(zip(values, palette(sns, len(values)), strict=True))
    width, height = style["height"] * style["aspect"], style["height"]
    # one panel: as wide as its title needs (a narrow panel under a wide title filled a third)
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(max(width * len(panels), 5.2), height + 0.9),
        sharey=True,
        squeeze=False,
    )
    drawn = {"dashed": False, "band": False}
    for i, (ax, variant) in enumerate(zip(axes[0], panels, strict=True)):
        bands = run_bands(table[table.variant == variant], [param])
        for value, b in bands.groupby(param):
            ok, runs = learned(b, train_range), int(b.runs.min())
            label = f"{param} {value}, {runs} run{'s' if runs != 1 else ''}"
            label += "" if ok else ", did not learn its training range"
            ax.plot(
                b.length,
                b.accuracy,
                marker="o",
                ms=3,
                color=colors[value],
                ls="-" if ok else "--",
                alpha=1.0 if ok else 0.45,
                label=label,
            )
            drawn["dashed"] |= not ok
            if runs > 1:
                ax.fill_between(b.length, b.low, b.high, color=colors[value], alpha=0.2, lw=0)
                drawn["band"] = True
        if train_range:
            ax.axvspan(*train_range, color="grey", alpha=0.15, lw=0, label="training lengths")
        ax.set_title((f"({letters[i]}) " if letters else "") + panel_label(variant), fontsize=9)
        ax.set_xlabel(x)
        ax.set_ylim(-0.02, 1.02)
        entries = len(ax.get_legend_handles_labels()[0])
        ax.legend(
            fontsize=6,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.26),
            frameon=False,
            ncol=2 if entries > 3 else 1,
        )
    axes[0][0].set_ylabel("accuracy")
    fig.suptitle(titled(fig, title), y=1.0)
    caption = "Lines: the mean over training runs"  # what is drawn, and only that
    if drawn["band"]:
        caption += "; bands: the range of the runs, lowest to highest (REPORT.md judges each run)"
    if drawn["dashed"]:
        caption += (
            f"; dashed: the models did not learn the training range, not a result "
            f"(< {NEAR_PERFECT} there)"
        )
    fig.text(
        0.5, -0.02, wrapped(caption + ".", fig, per_inch=14), ha="center", va="top", fontsize=7
    )
    fig.tight_layout()
    _save(fig, out, style["dpi"], metadata)


def _generation_job(cfg: dict, fig: artifacts.Figure) -> tuple[list[str], list[str]]:
    section = cfg[fig.section]
    spec = section["figures"][fig.key]
    panels = spec["panels"]
    low, high = tasks.generation_tasks()[fig.section].train_lengths(  # the first panel's
        tasks.variant_section(section, panels[0])
    )
    title, letters = spec.get("title", fig.title), ""
    if fig.lettered and set(panels) <= set(fig.lettered):  # the paper's letters, a subset named
        letters = "".join("abcdefgh"[fig.lettered.index(p)] for p in panels)
        if len(panels) < len(fig.lettered) and "title" not in spec:  # "Fig. 3a: ..."
            number, _, rest = title.partition(":")
            title = f"{number}{'/'.join(letters)}:{rest}"
    args = [
        "--panels",
        *panels,
        *(["--letters", letters] if letters else []),
        "--title",
        title + f" ({cfg['tier']} tier, {artifacts.trained_model(section, panels)})",
        "--style",
        to_json(section["figures"].get("style", {})),
        "--train-range",
        str(low),
        str(high),
        "--lengths",
        eval_lengths(cfg, fig.section),
    ]
    return plan.evals(cfg, fig.section, panels), args


def _draw_generation(table: pd.DataFrame, args, meta: dict) -> None:
    generation_figure(
        table,
        args.panels,
        args.title,
        args.out,
        json.loads(args.style),
        args.train_range,
        meta,
        letters=args.letters,
    )


GENERATION = FigureKind(
    "generation",
    _generation_job,
    _draw_generation,
    lambda cfg: (
        "Tasks scored by greedy generation (the scratchpad tasks of Sec. 5.2, Figs. 2, 8, 3a-d; "
        "majority): exact-match accuracy (every scratchpad token and, for Predictive Position "
        "Coupling, every predicted position ID; the answer token without a scratchpad) vs test "
        "length, a line per jump or depth (mean over training runs; band: the range of the runs, "
        "as in Fig. 1), a panel per variant."
    ),
    reads="eval",
)


# Natural language: the loss recovered by k influential tokens (Figs. 4, 6) --------------------


INFLUENCE_PANELS = {  # figure -> (model scored, model choosing J) per panel (Sec. 5.3)
    stem.removesuffix("_influence"): list(fig.panels)
    for stem, fig in artifacts.FIGURES.items()
    if fig.panels
}


def influence_figure(
    table: pd.DataFrame, fig: str, title: str, out: Path, style: dict, metadata: dict | None = None
) -> None:
    """Figs. 4 / 6: per test sequence, (L_short - L_long, L_short - L_short,sparse), one panel per
    (model scored, model choosing J), the diagonal (dashed) and one fit, the rule's: Fig. 4
    ("roughly equal") its reduced-major-axis slope through the origin, with slope and spread and
    their 95% CIs (lengen.core.stats.diagonal_fit); Fig. 6 ("a similar positive correlation")
    Pearson's r and its 95% CI (correlation_ci), no line. Axes as the paper's text (Sec. 5.3:
    L_short - L_long "is roughly equal to" L_short - L_short,sparse), x first; its caption
    swaps them. The legend sits below the panel, never over the points."""
    plt, sns = _pyplot()
    from matplotlib.ticker import MaxNLocator

    from lengen.core.stats import correlation_ci, diagonal_fit

    style = {**DEFAULT_STYLE, **style}
    sns.set_theme(context=style["context"], style="whitegrid")
    panels = INFLUENCE_PANELS[fig]
    fig_, axes = plt.subplots(
        1,
        len(panels),
        figsize=(style["height"] * 1.2 * len(panels), style["height"] * 1.6),
        squeeze=False,
    )
    letters = "abc" if len(panels) > 1 else ""
    for i, (ax, (scored, chosen)) in enumerate(zip(axes[0], panels, strict=True)):
        t = table[(table.scored_by == scored) & (table.chosen_by == chosen)]
        x, y = t["short_minus_long"], t["short_minus_sparse"]
        sns.scatterplot(x=x, y=y, ax=ax, s=10, alpha=0.6, edgecolor=None)
        lo, hi = min(x.min(), y.min()), max(x.max(), y.max())
        ax.plot([lo, hi], [lo, hi], color="grey", lw=1, ls="--", label="y = x (the diagonal)")
        if fig == "fig4":  # NL-Fig4's rule: near the diagonal
            fit = diagonal_fit(x.to_numpy(), y.to_numpy())  # the report's NL-Fig4 numbers
            ax.plot(
                [lo, hi],
                [lo * fit["slope"], hi * fit["slope"]],
                color="C1",
                lw=1,
                label=f"the rule's fit: reduced-major-axis slope through 0, {fit['slope']:.2f}",
            )
            numbers = (
                f"slope {fit['slope']:.2f} [{fit['slope_ci_low']:.2f}, "
                f"{fit['slope_ci_high']:.2f}], spread {fit['spread']:.2f} "
                f"[{fit['spread_ci_low']:.2f}, {fit['spread_ci_high']:.2f}]"
            )
        else:  # NL-Fig6's rule: a positive correlation
            r = correlation_ci(x.to_numpy(), y.to_numpy())  # the report's NL-Fig6 numbers
            numbers = (
                f"Pearson r {r['pearson_r']:.2f} [{r['pearson_r_ci_low']:.2f}, "
                f"{r['pearson_r_ci_high']:.2f}] (the rule's)"
            )
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(MaxNLocator(nbins=4))
        ax.ticklabel_format(axis="both", style="sci", scilimits=(-2, 3))
        label = f"({letters[i]}) " if letters else ""
        ax.set_title(
            f"{label}{scored} CE loss; J from {chosen}, n = {len(t)}\n{numbers}", fontsize=8
        )
        ax.set_xlabel("L_short - L_long", labelpad=2)
        ax.set_ylabel("L_short - L_short,sparse")
        ax.xaxis.get_offset_text().set_fontsize(7)  # the shared exponent, clear of the label
    # never wider than the panels (issue 65); the axes' order said, as the paper disagrees
    fig_.suptitle(
        wrapped(f"{title}; axes as the paper's text (Sec. 5.3), which its caption swaps", fig_),
        y=1.02,
    )
    fig_.tight_layout()
    _save(fig_, out, style["dpi"], metadata)


def _influence_job(cfg: dict, fig: artifacts.Figure) -> tuple[list[str], list[str]]:
    nl = cfg["natural_language"]
    title = fig.title.format(
        k=nl["influence"]["k"], tier=cfg["tier"], model=artifacts.trained_model(nl)
    )
    style = to_json(nl.get("figures", {}).get("style", {}))
    return [artifacts.table(cfg, "influence")], ["--title", title, "--style", style]


def _influence_kind(name: str) -> FigureKind:
    """Fig. 4 or Fig. 6: one kind each (their panels differ: INFLUENCE_PANELS)."""

    def draw(table: pd.DataFrame, args, meta: dict) -> None:
        influence_figure(table, name, args.title, args.out, json.loads(args.style), meta)

    return FigureKind(
        name,
        _influence_job,
        draw,
        lambda cfg: (
            "Natural language (Sec. 5.3, Figs. 4, 6): for each held-out sequence of Lbar tokens, "
            "the loss recovered on the last token by the whole far context (x: L_short - L_long) "
            "against that recovered by only the k leave-one-out influential far tokens of Eq. (6) "
            "(y: L_short - L_short,sparse); one panel per (model scored, model choosing J), the "
            "diagonal dashed, Pearson r in the title."
        ),
    )


# Natural language: the masks (Fig. 5) ---------------------------------------------------------


def mask_illustration(
    out: Path,
    long_len: int = 8,
    short_len: int = 2,
    J: tuple[int, ...] = (2, 4),
    metadata: dict | None = None,
) -> None:
    """Fig. 5: which tokens L_short, L_long and L_short,sparse attend to (gray = masked, blue =
    attended, outlined = the predicted token X_Lbar), drawn from lengen.analysis.influence's
    masks."""
    plt, _ = _pyplot()
    from matplotlib.patches import Rectangle

    from lengen.core.contexts import context_keeps

    keep = context_keeps(long_len, short_len, list(J))
    names = ["L_short", "L_long", "L_short,sparse"]
    fig, ax = plt.subplots(figsize=(0.6 * long_len + 1.6, 1.9))
    for row, name in enumerate(names):
        y = len(names) - 1 - row
        for j in range(long_len):
            if j == long_len - 1:
                face, edge = "white", "black"
            else:
                face, edge = ("#4a90d9" if keep[row, j] else "#c8c8c8"), "white"
            ax.add_patch(Rectangle((j, y), 0.92, 0.8, facecolor=face, edgecolor=edge, lw=1.2))
            ax.text(j + 0.46, y + 0.4, f"X{j + 1}", ha="center", va="center", fontsize=7)
        ax.text(-0.2, y + 0.4, name, ha="right", va="center", fontsize=8)
    ax.set_xlim(-2.2, long_len)
    ax.set_ylim(-0.1, len(names))
    ax.axis("off")
    ax.set_title(
        f"Fig. 5: masks with Lbar = {long_len}, L = {short_len}, k = {len(J)}, J = {set(J)}",
        fontsize=8,
    )
    _save(fig, out, 150, metadata)


MASKS = FigureKind(
    "fig5",
    lambda cfg, fig: ([], []),  # drawn from the code that builds the masks
    lambda table, args, meta: mask_illustration(args.out, metadata=meta),
    lambda cfg: (
        "Fig. 5 (Sec. 5.3): which tokens each loss attends to with Lbar = 8, L = 2, k = 2, J = "
        "{2, 4}; gray = masked in every attention computation (position IDs unchanged), blue = "
        "attended, outlined = the predicted token. Drawn from the masks the influence code uses."
    ),
    reads="nothing",
)


# The theory's exact risks ---------------------------------------------------------------------


def theory_figure(table: pd.DataFrame, out: Path, metadata: dict | None = None) -> None:
    """The theory table (lengen.analysis.theory_cases): test risk of the best and worst risk
    minimiser of Eq. (3) vs Lbar, a panel per case (Prop. C.3, Theorem 4.3, Prop. 4.4)."""
    plt, sns = _pyplot()
    sns.set_theme(context="paper", style="whitegrid")
    cases = list(dict.fromkeys(table["case"]))
    ncol = 4
    nrow = math.ceil(len(cases) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(2.6 * ncol, 2.5 * nrow), sharey=True)
    axes = axes.ravel()
    for ax in axes[len(cases) :]:
        ax.remove()
    for ax, name in zip(axes, cases, strict=False):
        t = table[table["case"] == name]
        ax.plot(t["Lbar"], t["test_risk_worst"], "o-", color="C3", label="worst minimiser")
        ax.plot(t["Lbar"], t["test_risk_best"], "s--", color="C0", label="best minimiser")
        ax.axhline(t["train_risk"].iloc[0], color="grey", ls=":", lw=1, label="training risk")
        title = f"Prop. C.3({name})" if len(name) <= 2 else name.replace("positive", "Thm. 4.3")
        ax.set_title(f"{title}\ndrops: {t['assumption_dropped'].iloc[0]}", fontsize=7)
        ax.set_xlabel("test length Lbar")
        ax.set_xticks(sorted(table["Lbar"].unique()))  # the tested lengths (one: one tick)
        ax.set_ylim(-0.03, 1.03)
    for ax in axes[::ncol]:
        ax.set_ylabel("risk E|h(X) - Y|")
    L = table["L"].iloc[0]
    fig.suptitle(
        f"Prop. C.3, Theorem 4.3 and Prop. 4.4: exact risks of the Eq. (3) minimisers (L = {L})"
    )
    fig.tight_layout()
    # one legend for every panel, below them: never over a panel's points
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        names,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncols=3,
        fontsize=7,
        frameon=False,
    )
    _save(fig, out, 150, metadata)


THEORY = FigureKind(
    "theory",
    lambda cfg, fig: ([artifacts.table(cfg, "theory")], []),
    lambda table, args, meta: theory_figure(table, args.out, meta),
    lambda cfg: (
        "Executable theory (Prop. C.3, Theorem 4.3, Prop. 4.4): exact population risk "
        "at test lengths Lbar of the best and worst minimiser of Eq. (3), a panel per construction."
    ),
)


# Sparse parity's attention diagnostic ---------------------------------------------------------


def attention_figure(
    table: pd.DataFrame, k_train: int, title: str, out: Path, metadata: dict | None = None
) -> None:
    """Sparse parity's attention diagnostic from its table (lengen.analysis.attention).
    Panels at k_test = the largest tested k <= K_train: flagged mass per head vs 2l, selectivity
    per head vs 2l, accuracy by number m of flagged ones; plus, when a k_test above K_train was
    tested, accuracy by m there (SP-2: does the model fail at unseen k, or only at counts m it
    never saw?)."""
    plt, sns = _pyplot()
    from matplotlib.ticker import MaxNLocator

    from lengen.analysis.attention import selectivity

    mass = table[table["table"] == "attention_mass"]
    by_ones = table[table["table"] == "accuracy_by_ones"]
    sns.set_theme(context="paper", style="whitegrid")
    k = int(mass.loc[mass["k_test"] <= k_train, "k_test"].max())
    above = sorted(int(x) for x in by_ones["k_test"].unique() if x > k_train)
    m = mass[mass["k_test"] == k].copy()
    # (the table's layer and head are floats: its accuracy rows leave them empty)
    m["head"] = "L" + m["layer"].astype(int).astype(str) + "H" + m["head"].astype(int).astype(str)
    fig, axes = plt.subplots(1, 3 + bool(above), figsize=(13 + 4.3 * bool(above), 3.4))
    flagged = m[m["category"].isin(["flagged_j", "flagged_bit"])]
    flagged = flagged.groupby(["length", "head"], as_index=False)["mass"].sum()
    # each head its own dashes and markers: equal values draw one line over another (issue 65)
    lines = {"hue": "head", "style": "head", "markers": True, "dashes": True, "alpha": 0.85}
    sns.lineplot(data=flagged, x="length", y="mass", ax=axes[0], **lines)
    axes[0].legend(fontsize=6, ncols=2, title="layer, head")
    axes[0].set(title=f"mass on the 2k flagged tokens (k_test={k})", xlabel="test length 2l")
    sel = selectivity(m, k)
    sns.lineplot(data=sel, x="length", y="log_ratio", ax=axes[1], legend=False, **lines)
    axes[1].set(
        title="selectivity: log(weight per flagged / unflagged token)",
        xlabel="test length 2l",
        ylabel="log ratio",
    )
    lengths = [str(x) for x in sorted(by_ones["length"].unique())]  # one colour per length
    for ax, kk in zip(axes[2:], [k, *above[-1:]], strict=False):
        b = by_ones[by_ones["k_test"] == kk].copy()
        b["2l"] = b["length"].astype(str)  # categorical hue: one colour per tested length
        sns.lineplot(
            data=b,
            x="ones",
            y="accuracy",
            hue="2l",
            style="2l",
            markers=True,
            dashes=True,
            palette="rocket_r",
            hue_order=lengths,
            style_order=lengths,
            alpha=0.85,
            ax=ax,
            legend=ax is axes[2],
        )
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.axvline(k_train, color="grey", lw=0.8, ls="--")  # m = K_train itself
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # m counts: whole numbers
        ax.set(
            title=f"accuracy by m flagged ones, k_test={kk}",
            xlabel=f"m (dashed: m = K_train = {k_train})",
            ylim=(-0.02, 1.02),
        )
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.set_xticks(sorted(m["length"].unique()), labels=sorted(m["length"].unique()))
        ax.minorticks_off()
    fig.suptitle(title, y=1.03)
    _save(fig, out, 150, metadata)


def _attention_job(cfg: dict, fig: artifacts.Figure) -> tuple[list[str], list[str]]:
    k = cfg["sparse_parity"]["figures"]["attention"]["k_train"]
    table = str(artifacts.reports(cfg) / f"sparse_parity_attention_{fig.variant}.csv")
    model = plan.Run("sparse_parity", fig.variant, k, 0).spec(cfg)["run_name"]  # run 0
    size = artifacts.trained_model(cfg["sparse_parity"], [fig.variant])
    title = fig.title.format(tier=cfg["tier"], model=size)
    return [table], ["--title", title, "--k-train", str(k), "--models", model]


ATTENTION = FigureKind(
    "attention",
    _attention_job,
    lambda table, args, meta: attention_figure(table, args.k_train, args.title, args.out, meta),
    lambda cfg: (
        "Sparse-parity diagnostic (``lengen.analysis.attention``): for the K_train = "
        f"{cfg['sparse_parity']['figures']['attention']['k_train']} model, the attention mass of "
        "the predicting ``<SEP>`` token on the 2k flagged tokens and on the unflagged J's and "
        "bits, per layer and head, vs test length 2l; and accuracy by the number m of flagged "
        "ones. Mass moving from flagged to unflagged tokens as 2l grows is dilution; accuracy "
        "below chance at some m is a systematic miscount."
    ),
)

# The registry, the jobs, the CLI --------------------------------------------------------------


KINDS: dict[str, FigureKind] = {  # a figure's `kind` -> how it is made, drawn and captioned
    k.name: k
    for k in (
        SPARSE_PARITY,
        GENERATION,
        _influence_kind("fig4"),
        _influence_kind("fig6"),
        MASKS,
        THEORY,
        ATTENTION,
    )
}


def figure_job(cfg: dict, stem: str) -> FigureJob:
    """The job of one figure this config draws (artifacts.all_figures): its kind's."""
    fig = artifacts.all_figures(cfg)[stem]
    kind = KINDS[fig.kind]
    tables, args = kind.job(cfg, fig)
    ready = results(cfg, "mlflow", f"{fig.section}.ready")
    category = CATEGORIES.get(fig.section, "Generation tasks")
    return FigureJob(fig.section, fig.kind, tables, args, ready, category, kind.caption(cfg))


def figure_jobs(cfg: dict) -> dict[str, FigureJob]:
    """Every figure this config draws (artifacts.drawn_figures), by stem."""
    return {stem: figure_job(cfg, stem) for stem in artifacts.drawn_figures(cfg)}


def cli_parser():
    """The CLI's arguments (`figure_jobs` writes them for each figure of a run)."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument("figure", choices=list(KINDS), help="an artifacts.Figure's kind")
    parser.add_argument("--k-train", type=int, help="attention: the model's K_train")
    parser.add_argument(
        "--models",
        nargs="+",
        help="the training runs the figure shows (MLflow), where its tables do not name them",
    )
    parser.add_argument("--panels", nargs="+", help="generation: variant per panel")
    parser.add_argument(
        "--letters", default="", help="generation: each panel's letter in the paper's figure"
    )
    parser.add_argument("--tables", nargs="*", type=Path, default=[])
    parser.add_argument("--title", default="")
    parser.add_argument("--style", default="{}", help="JSON of style overrides")
    parser.add_argument("--train-range", nargs=2, type=int, help="training lengths, shaded")
    parser.add_argument(
        "--labels", default="[]", help="sparse_parity: JSON [[variant, label], ...], row order"
    )
    parser.add_argument(
        "--lengths",
        type=json.loads,
        default=None,
        help="JSON {variant: [eval lengths]}: the grid the config asks for",
    )
    parser.add_argument("--tracking-uri", help="log the figure to this MLflow store...")
    parser.add_argument("--experiment", help="...in this experiment, as run figure/<name>")
    parser.add_argument("--out", type=Path, required=True)
    return parser


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: python -m lengen.report.figures KIND --tables A.csv ... --out fig.png (KIND: a key of
    KINDS, an artifacts.Figure's kind)."""
    import pandas as pd

    from lengen.analysis.tables import read_eval_table
    from lengen.core import provenance

    args = cli_parser().parse_args(argv)
    kind = KINDS[args.figure]
    if kind.reads == "nothing":
        meta = render(args, pd.DataFrame())
        if args.tracking_uri:
            log_figure(
                args.out,
                pd.DataFrame(),
                args.tracking_uri,
                args.experiment,
                setup={"figure": args.figure},
                provenance_tags=meta,
            )
        return
    if kind.reads == "eval":  # per-model eval tables, checked as the table rule
        tables = [read_eval_table(p, args.lengths) for p in args.tables]  # checks them
    else:  # report-level tables (the leave-one-out, theory, attention tables)
        tables = [pd.read_csv(p, dtype=provenance.DTYPES) for p in args.tables]
    table = pd.concat(tables, ignore_index=True)
    meta = render(args, table)
    setup = drawn_setup(args, table)
    if args.tracking_uri:
        shown = table[table.variant.isin(args.panels)] if args.panels else table
        models = args.models  # the influence figures: the models their panels score and choose
        if args.figure in INFLUENCE_PANELS:
            models = [m for pair in INFLUENCE_PANELS[args.figure] for m in pair]
        log_figure(args.out, shown, args.tracking_uri, args.experiment, models, setup, meta)


def drawn_setup(args, table: pd.DataFrame) -> dict:
    """What was drawn, not where it was logged (its hash depends on the science, not on paths):
    the figure's arguments and its input tables' config hashes."""
    if KINDS[args.figure].reads == "nothing":
        return {"figure": args.figure}
    setup = {
        k: v
        for k, v in vars(args).items()
        if k not in ("tables", "out", "tracking_uri", "experiment")
    }
    setup["inputs"] = sorted(table["config_hash"].unique()) if "config_hash" in table else []
    return setup


def render(args, table: pd.DataFrame, trained_at: str | None = None) -> dict:
    """Draw one figure (cli_parser's `args`) from its table, its provenance in the PNG; returns
    that provenance (the workflow's figure jobs and lengen.report.rejudge's redraw share it).
    `trained_at`: a reference's figure drawn again from its tables keeps the commit that made
    them as its `git_commit` (a reference is one run of one commit) and names the drawing code's
    as `drawn_at`."""
    from lengen.core import provenance

    seeds = provenance.table_seeds(table) if len(table) else ""
    meta = provenance.png_metadata(drawn_setup(args, table), seeds, trained_at)
    KINDS[args.figure].draw(table, args, meta)
    return meta


def log_figure(
    path: Path,
    table: pd.DataFrame,
    uri: str,
    experiment: str,
    models: list[str] | None = None,
    setup: dict | None = None,
    provenance_tags: dict | None = None,
) -> None:
    """One MLflow run per drawn figure, `figure/<file stem>`, holding the PNG; its params are
    what was drawn (`setup`: the figure's config slice and its input tables' config hashes), its
    tags the provenance the PNG carries and the runs of the models it shows (`model_runs`, the
    training runs' names): `mlflow ui` then answers "which runs made this figure". A rerun's run
    replaces the last one, naming what changed (tracking.log_file_run)."""
    from lengen.core import provenance, tracking

    runs = (
        models
        if models is not None
        else (table["run"].astype(str).unique().tolist() if "run" in table else [])
    )
    tags = json.loads(provenance_tags[provenance.PNG_KEY]) if provenance_tags else {}
    if "config_hash" in table:
        tags["input_config_hashes"] = " ".join(sorted(table["config_hash"].astype(str).unique()))
    tracking.log_figure(path, runs, uri, experiment, tags, setup)


if __name__ == "__main__":
    main()
