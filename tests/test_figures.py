"""The figures' layout at their committed sizes: no text over other text, a legend for every
line, panels side by side where there is one K_train, ticks at the tested lengths."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from lengen.report import figures

from .conftest import ROOT

SMOKE = ROOT / "reference" / "smoke"


@pytest.fixture
def drawn(monkeypatch):
    """The figures the drawers save, kept open for inspection."""
    kept = []
    monkeypatch.setattr(figures, "_save", lambda fig, out, dpi, meta: kept.append(fig))
    yield kept
    import matplotlib.pyplot as plt

    plt.close("all")


def texts(fig, legends: bool = True):
    """Every drawn text of a figure with its box on the canvas: the titles, axis labels, the
    tick labels inside the view, the exponents, (with `legends`) the legends' texts."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = [fig._suptitle] if fig._suptitle is not None else []
    for ax in fig.axes:
        found += [
            ax.title,
            ax._left_title,
            ax._right_title,
            ax.xaxis.label,
            ax.yaxis.label,
            ax.xaxis.get_offset_text(),
            ax.yaxis.get_offset_text(),
        ]
        for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            found += [
                t.label1
                for t in axis.get_major_ticks()
                if min(lo, hi) <= t.get_loc() <= max(lo, hi)
            ]
        if legends and ax.get_legend() is not None:
            found += list(ax.get_legend().get_texts())
    for legend in fig.legends if legends else []:
        found += list(legend.get_texts())
    return [
        (t.get_text(), t.get_window_extent(renderer))
        for t in found
        if t.get_visible() and t.get_text().strip()
    ]


def overlapping(boxes):
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


def test_influence_panels_have_no_colliding_text_and_one_fit_the_rules(drawn, tmp_path):
    """Fig. 6 (a positive correlation): the diagonal and no fit, Pearson's r in the title;
    Fig. 4 (roughly equal): the diagonal and the rule's one fit; legends below the panels."""
    table = pd.read_csv(SMOKE / "influence_loo.csv")  # losses ~1e-3: long tick labels before
    figures.influence_figure(table, "fig6", "Fig. 6", tmp_path / "f.png", {})
    fig = drawn[0]
    for ax in fig.axes:
        labels = [t.get_label() for t in ax.get_lines()]
        assert labels == ["y = x (the diagonal)"] and "Pearson r" in ax.get_title()
        assert ax.get_legend().get_bbox_to_anchor().y1 < ax.get_window_extent().y0
    assert not overlapping(texts(fig, legends=False))  # ticks, labels, exponents, titles
    figures.influence_figure(table, "fig4", "Fig. 4", tmp_path / "g.png", {})
    ax = drawn[1].axes[0]
    labels = [t.get_label() for t in ax.get_lines()]
    assert labels[0] == "y = x (the diagonal)" and len(labels) == 2
    assert labels[1].startswith("the rule's fit: reduced-major-axis slope")


def test_one_k_train_puts_the_models_side_by_side(drawn, tmp_path):
    """The schemes figure (one K_train, four models): one row of panels, the two-line title
    above the panel titles, not over them."""
    table = pd.read_csv(SMOKE / "sparse_parity_schemes.csv")
    figures.sparse_parity_figure(table, "Schemes", tmp_path / "f.png", {}, (8, 12))
    fig = drawn[0]
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len({round(ax.get_position().y0, 3) for ax in panels}) == 1  # one row
    assert len(panels) == table["variant"].nunique()
    assert not overlapping(texts(fig))


def test_the_theory_figure_ticks_are_the_tested_lengths(tmp_path):
    """One tested length (the smoke tier's): one tick at it, not 15.5-16.5."""
    import matplotlib.pyplot as plt

    from lengen.report import figures

    table = pd.read_csv(SMOKE / "theory_table.csv")
    kept = []
    close = plt.close
    plt.close = lambda fig=None: kept.append(fig)  # keep it open
    try:
        figures.theory_figure(table, tmp_path / "t.png")
    finally:
        plt.close = close
    ticks = {float(t) for ax in kept[0].axes for t in ax.get_xticks()}
    assert ticks == set(table["Lbar"].astype(float))
    close("all")


def _in_view(axis, lim):
    lo, hi = sorted(lim)
    return [t for t in axis.get_majorticklocs() if lo <= t <= hi]


def test_the_attention_figure_keeps_equal_lines_apart_and_counts_m_in_whole_numbers(
    drawn, tmp_path
):
    """Issue 65: L0H0's line lay hidden under L0H1's, 2l = 8's under 2l = 24's; the m axis was
    ticked every 0.5 and the K_train marker stood at K_train + 0.5. Each head and each length now
    has its own dashes and markers, m is ticked at whole numbers, the marker at m = K_train."""
    table = pd.read_csv(SMOKE / "sparse_parity_attention_neox.csv")
    k_train = 2
    figures.attention_figure(table, k_train, "Attention", tmp_path / "a.png")
    fig = drawn[0]
    for ax in fig.axes[:3]:
        drawn_lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1]
        looks = {
            (
                ln.get_linestyle(),
                str(ln.get_dashes() if hasattr(ln, "get_dashes") else ""),
                ln.get_marker(),
            )
            for ln in drawn_lines
        }
        assert len(looks) == len(drawn_lines) > 1, ax.get_title()
    for ax in fig.axes[2:]:
        assert all(float(t).is_integer() for t in _in_view(ax.xaxis, ax.get_xlim()))
        markers = [
            ln.get_xdata()[0]
            for ln in ax.get_lines()
            if ln.get_linestyle() == "--" and len(set(ln.get_xdata())) == 1
        ]
        assert markers == [k_train] and f"K_train = {k_train}" in ax.get_xlabel()


def test_length_ticks_are_whole_numbers(drawn, tmp_path):
    """The schemes figure ticked its lengths at 7.5, 12.5, ... (issue 65)."""
    table = pd.read_csv(SMOKE / "sparse_parity_schemes.csv")
    figures.sparse_parity_figure(table, "Schemes", tmp_path / "f.png", {}, (8, 12))
    for ax in drawn[0].axes:
        ticks = _in_view(ax.xaxis, ax.get_xlim())
        assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_a_one_panel_figures_title_is_no_wider_than_the_figure(drawn, tmp_path):
    """Fig. 4 (one panel) had a title wider than its plot (issue 65): it is wrapped."""
    table = pd.read_csv(SMOKE / "influence_loo.csv")
    title = (
        "Fig. 4: leave-one-out influential tokens (Eq. 6), k = 5, h_short, the default tier, "
        "1,000 held-out sequences"
    )  # as long as the tiers' titles get
    figures.influence_figure(table, "fig4", title, tmp_path / "f.png", {})
    fig = drawn[0]
    fig.canvas.draw()
    box = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
    assert box.width <= fig.bbox.width and "\n" in fig._suptitle.get_text()


def test_a_figures_mlflow_run_holds_what_drew_it_and_a_rerun_replaces_it(tmp_path):
    """Issue 65: figure runs logged no parameter, and a rerun left a second run of the same
    name that could not be told apart. Its run now holds what was drawn as params and the PNG's
    provenance as tags; a rerun's run names the run it replaces and what changed, and the old
    one is deleted (restorable)."""
    from mlflow.tracking import MlflowClient

    from lengen.core import tracking

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking.prepare_store(uri, ["figs"])
    table = SMOKE / "theory_table.csv"
    argv = [
        "theory",
        "--tables",
        str(table),
        "--out",
        str(tmp_path / "theory.png"),
        "--tracking-uri",
        uri,
        "--experiment",
        "figs",
    ]
    figures.main(argv)
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("figs")
    [first] = client.search_runs([exp.experiment_id])
    assert first.info.run_name == "figure/theory"
    assert first.data.params["figure"] == "theory" and "inputs" in first.data.params
    assert {"config_hash", "git_commit", "versions", "input_config_hashes"} <= set(first.data.tags)
    figures.main(argv)  # the same again
    figures.main([*argv, "--title", "Theory, retitled"])  # a changed setting
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1  # one live run per figure
    [last] = runs
    assert last.data.tags["changed"] == "title" and last.data.params["title"] == "Theory, retitled"
    second = last.data.tags["replaces"]
    assert client.get_run(second).data.tags["changed"].startswith("nothing")
    assert client.get_run(second).data.tags["replaces"] == first.info.run_id
    assert client.get_run(first.info.run_id).info.lifecycle_stage == "deleted"


def test_a_generation_figure_fills_its_canvas_and_its_caption_says_what_is_drawn(drawn, tmp_path):
    """Figs. 2, 3, 8: the title on its first line, the scale it holds at on its own line below,
    no text wider than the figure (a one-panel figure under a wide title filled a third of its
    canvas); the caption names bands and dashed lines only where some are drawn; the palette's
    last colour reads on white (viridis's palest yellow did not)."""
    from matplotlib.colors import to_rgb

    table = pd.read_csv(SMOKE / "parity_scratchpad_accuracy.csv")
    title = "Fig. 2: parity with scratchpad, PPC (smoke tier, 1 layer x 16)"
    for panels in (["ppc"], ["absolute", "rope_pose"]):
        figures.generation_figure(table, panels, title, tmp_path / "f.png", {}, (10, 20))
        fig = drawn[-1]
        lines = fig._suptitle.get_text().split("\n")
        assert lines[0] == "Fig. 2: parity with scratchpad, PPC"
        assert lines[1] == "(smoke tier, 1 layer x 16)"
        width = fig.bbox.width
        assert all(box.width <= width for _, box in texts(fig)), panels
        caption = next(t.get_text() for t in fig.texts if t.get_text().startswith("Lines:"))
        caption = " ".join(caption.split())
        styles = [ln.get_linestyle() for ax in fig.axes for ln in ax.get_lines()]
        assert ("dashed:" in caption) == ("--" in styles)
        banded = any(c.get_paths() for ax in fig.axes for c in ax.collections)
        assert ("bands:" in caption) == banded
        for ax in fig.axes:
            for line in ax.get_lines():
                r, g, b = to_rgb(line.get_color())
                assert 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.75, line.get_label()


def test_a_tier_drawing_part_of_a_lettered_figure_names_its_panels():
    """Fig. 3 has panels a-d in the paper; a tier that draws the PPC panel alone titles it
    Fig. 3a (it was "Fig. 3" holding 3a only), one that draws all four keeps "Fig. 3" with each
    panel lettered; a model of one layer is "1 layer"."""
    from lengen.config import artifacts
    from lengen.config.config import load

    fig = artifacts.FIGURES["fig3_variable_assignment"]
    for tier, expected in (
        ("config", "Fig. 3a: variable assignment"),
        ("paper", "Fig. 3: variable assignment"),
    ):
        cfg = load(ROOT / "config" / f"{tier}.yaml")
        _, args = figures.KINDS["generation"].job(cfg, fig)
        title = args[args.index("--title") + 1]
        assert figures.split_scale(title)[0] == expected, title
        panels = cfg["variable_assignment"]["figures"]["fig3"]["panels"]
        letters = args[args.index("--letters") + 1]
        assert letters == "".join("abcd"[fig.lettered.index(p)] for p in panels)
    one = {"model": {"n_layer": 1, "d_model": 16}}
    assert artifacts.trained_model(one) == "1 layer x 16"
