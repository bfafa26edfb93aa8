"""The artifact contract: every file a run leaves under `reports_dir`, named in one place.

The workflow rules (workflow/rules/*.smk) take their report-level outputs from here, and
`lengen.report.report` receives exactly these tables as named inputs (`report_tables`), with only
the config slice its rules read (`report_config`: no figure sections, so restyling a figure never
reruns the claims). Per-model files under `results_dir` (model.pt, eval.csv, logs, benchmarks) are
wildcard patterns of their own rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lengen import tasks

REPORT = "REPORT.md"
REPORT_HTML = "REPORT.html"  # REPORT.md rendered: report.html's front page, any browser's
VERDICTS = "verdicts.csv"  # the report's verdicts as a tidy table (lengen.report.reference)
RUNS_FIGURE = "verdict_runs.png"  # every run's value by sentence and group (the report draws it)
TABLES = {  # report-level tidy tables: name -> (file under reports_dir, the config section that
    # makes it: a table exists only when its section does)
    "sparse_parity": ("sparse_parity_accuracy.csv", "sparse_parity"),
    "theory": ("theory_table.csv", "theory"),
    "influence": ("influence_loo.csv", "natural_language"),  # Eq. (6) leave-one-out (Figs. 4, 6)
    "perplexity_chunks": ("table1_chunk_nll.csv", "natural_language"),  # Table 1's bootstrap
    "perplexity": ("table1_perplexity.csv", "natural_language"),
    "perplexity_window": ("table1_window_nll.csv", "natural_language"),  # NL-T1w
    "sparse_parity_schemes": ("sparse_parity_schemes.csv", "sparse_parity"),  # extra figure
}
REPORT_READS = (
    "sparse_parity",
    "theory",
    "influence",
    "perplexity_chunks",
    "perplexity_window",
)  # + generation tasks


@dataclass(frozen=True)
class Figure:
    """One figure of the run, described once: the config section that makes it, its `kind` (one
    object of lengen.report.figures.KINDS: how the entry and the config make the job's inputs and
    arguments, how it is drawn, its caption in Snakemake's report.html), the section's `figures`
    key it reads (Fig. 1's K_train list, a scratchpad figure's panels; an `optional` figure is
    drawn only where the config has that key), its default title ({tier} and {model}, the size
    trained, are filled in), and for Figs. 4 / 6 the (model scored, model choosing J) pair of
    each panel."""

    section: str
    kind: str
    key: str | None = None
    title: str = ""
    optional: bool = False
    panels: tuple[tuple[str, str], ...] = ()
    variant: str | None = None  # the model variant a per-variant diagnostic shows
    lettered: tuple[str, ...] = ()  # the paper's panels, a, b, ... in order (Fig. 3a-d)


FIGURES: dict[str, Figure] = {  # figure stem -> Figure (Figs. 1-8 of the paper, extras)
    "fig1_sparse_parity": Figure(
        "sparse_parity", "sparse_parity", "fig1", "Fig. 1: sparse parity ({tier} tier, {model})"
    ),
    "fig7_sparse_parity": Figure(
        "sparse_parity", "sparse_parity", "fig7", "Fig. 7: sparse parity ({tier} tier, {model})"
    ),
    "sparse_parity_schemes": Figure(
        "sparse_parity",
        "sparse_parity",
        "schemes",
        "Sparse parity, K_train = {k_train}: position schemes (not in the paper; {tier} tier, "
        "{model})",
        optional=True,
    ),
    "fig2_parity_scratchpad": Figure(
        "parity_scratchpad", "generation", "fig2", "Fig. 2: parity with scratchpad, PPC"
    ),
    "fig8_parity_scratchpad_ablations": Figure(
        "parity_scratchpad",
        "generation",
        "fig8",
        "Fig. 8: parity with scratchpad, without PPC",
        optional=True,
    ),  # a tier that trains the ablations asks for it (the default tier does not)
    "fig8_equal_budgets": Figure(
        "parity_scratchpad",
        "generation",
        "fig8_equal",
        "Parity with scratchpad: PPC and the ablations at equal budgets (not in the paper)",
        optional=True,
    ),
    "fig3_variable_assignment": Figure(
        "variable_assignment",
        "generation",
        "fig3",
        "Fig. 3: variable assignment",
        lettered=("ppc", "no_coupling", "no_scratchpad", "rope_pose"),
    ),
    "fig3_equal_budgets": Figure(
        "variable_assignment",
        "generation",
        "fig3_equal",
        "Variable assignment: Fig. 3's models at equal budgets (not in the paper)",
        optional=True,
    ),
    "fig_majority": Figure(
        "majority", "generation", "fig_majority", "Majority (not in the paper): position schemes"
    ),
    "fig4_influence": Figure(
        "natural_language",
        "fig4",
        None,
        "Fig. 4: loss recovered by k = {k} influential tokens ({tier} tier, {model})",
        panels=(("h_short", "h_short"),),
    ),
    "fig6_influence": Figure(
        "natural_language",
        "fig6",
        None,
        "Fig. 6: loss recovered by k = {k} influential tokens ({tier} tier, {model})",
        panels=(("h_long", "h_long"), ("h_long", "h_short"), ("h_short", "h_long")),
    ),
    "fig5_masks": Figure("natural_language", "fig5", None, ""),
    "theory_figure": Figure("theory", "theory", None, ""),
}


def trained_model(section: dict, variants: list[str] | None = None) -> str:
    """The size of the models a figure shows, as trained ("3 layers x 64"; issue 64: a label
    names the model actually trained, not the paper's): the section's model with each variant's
    overrides (sparse parity's `schemes` models included), sizes that differ joined by " / ";
    a model with log-length attention scaling says so (a DEPARTURE, named in every title)."""
    table = {**section.get("variants", {}), **(section.get("schemes") or {}).get("variants", {})}
    sizes = []
    for v in variants if variants is not None else [None]:
        model = {**section["model"], **(table.get(v) or {}).get("model", {})}
        scaled = " + log-length attention (DEPARTURE)" if model.get("attn_scale") else ""
        layers = f"{model['n_layer']} layer{'s' if model['n_layer'] != 1 else ''}"
        sizes.append(f"{layers} x {model['d_model']}{scaled}")
    return " / ".join(dict.fromkeys(sizes))


# a config-only sparse-parity figure's title
SP_TITLE = "Sparse parity, K_train in {k_train} ({tier} tier, {model})"


def added_figures(cfg: dict) -> list[Figure]:
    """Figures a tier adds by config alone, of a kind a drawer already exists for
    (docs/extending.md, "A figure"): a key of a generation-scored task's `figures` that no
    FIGURES entry reads (`{panels: [...], title: ...}`), or of sparse parity's `figures` (a
    K_train list, as Fig. 1's). The key is the file stem; validation keeps it apart from every
    other file of the run (lengen.config.config), so a list, where two sections' equal keys
    both show."""
    registered = {(f.section, f.key) for f in FIGURES.values()}
    kinds = {name: "generation" for name in tasks.generation_tasks()}
    kinds["sparse_parity"] = "sparse_parity"
    out = []
    for section, kind in kinds.items():
        for key, spec in cfg.get(section, {}).get("figures", {}).items():
            if key in ("style", "attention") or (section, key) in registered:
                continue
            title = spec.get("title", key) if isinstance(spec, dict) else SP_TITLE
            out.append(Figure(section, kind, key, title))
    return out


def diagnostic_figures(cfg: dict) -> dict[str, Figure]:
    """Sparse parity's attention diagnostic, one figure per model variant, where the config asks
    for it (`sparse_parity.figures.attention`), by stem."""
    sp = cfg.get("sparse_parity", {})
    if "attention" not in sp.get("figures", {}):
        return {}
    k = sp["figures"]["attention"]["k_train"]
    return {
        f"sparse_parity_attention_{v}": Figure(
            "sparse_parity",
            "attention",
            "attention",
            f"Where <SEP> attends: sparse parity, K_train = {k}, {spec['label']} ({{tier}} tier, "
            "{model})",
            optional=True,
            variant=v,
        )
        for v, spec in sp["variants"].items()
    }


def all_figures(cfg: dict) -> dict[str, Figure]:
    """The registry's figures, the config's own (`added_figures`) and the per-variant
    diagnostics (`diagnostic_figures`), by stem."""
    return {**FIGURES, **{f.key: f for f in added_figures(cfg)}, **diagnostic_figures(cfg)}


def _drawn(cfg: dict, fig: Figure) -> bool:
    """Whether this config draws the figure: its section runs (and, for an optional figure, the
    section has its key: in `figures`, or as a section key such as sparse parity's `schemes`)."""
    if fig.section not in cfg:
        return False
    section = cfg[fig.section]
    return not fig.optional or fig.key in section.get("figures", {}) or fig.key in section


def drawn_figures(cfg: dict) -> dict[str, Figure]:
    """The figures this config draws (`all_figures`, less those it does not run), by stem."""
    return {stem: fig for stem, fig in all_figures(cfg).items() if _drawn(cfg, fig)}


def reports(cfg: dict) -> Path:
    """The run's reports directory."""
    return Path(cfg["reports_dir"])


def table(cfg: dict, name: str) -> str:
    """Path of a report-level table: a name of TABLES, or a generation task's accuracy table."""
    if name in tasks.generation_tasks():
        return str(reports(cfg) / f"{name}_accuracy.csv")
    return str(reports(cfg) / TABLES[name][0])


def figure(cfg: dict, stem: str) -> str:
    """Path of a figure by stem (`all_figures`)."""
    return str(reports(cfg) / f"{stem}.png")


def report_tables(cfg: dict) -> dict[str, str]:
    """The tables lengen.report.report reads, by name, for the sections this config runs."""
    names = [n for n in REPORT_READS if TABLES[n][1] in cfg]
    names += [n for n in tasks.generation_tasks() if n in cfg]
    return {name: table(cfg, name) for name in names}


def report_figures(cfg: dict) -> list[str]:
    """File names of the figures the run draws (what REPORT.md lists), sections in config order."""
    return sorted(f"{stem}.png" for stem in drawn_figures(cfg))


def report_config(cfg: dict) -> dict:
    """The config slice the report's rules read: everything but the figure sections and what a
    job asks a machine or a cluster for (`jobs`, `gpu_model`, `jobs_per_gpu`: no verdict moves)."""
    return {
        key: {k: v for k, v in value.items() if k != "figures"}
        if isinstance(value, dict)
        else value
        for key, value in cfg.items()
        if key not in ("jobs", "gpu_model", "jobs_per_gpu")
    }
