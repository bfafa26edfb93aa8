"""The artifact contract: every file a run leaves under `reports_dir`, named in one place.

The workflow rules (workflow/rules/*.smk) take their report-level outputs from here, and
`lengen.report.report` receives exactly these tables as named inputs (`report_tables`), with only
the config slice its rules read (`report_config`: no figure sections, so restyling a figure never
reruns the claims). Per-model files under `results_dir` (model.pt, eval.csv, logs, benchmarks) are
wildcard patterns of their own rules.
"""

from __future__ import annotations

from pathlib import Path

from lengen import tasks

REPORT = "REPORT.md"
VERDICTS = "verdicts.csv"  # the report's verdicts as a tidy table (lengen.report.reference)
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
FIGURES = {  # figure stem -> config section (Figs. 1-8 of the paper, diagnostics, majority), or
    # (section, figure key) for a figure drawn only where the section's `figures` names it
    "fig1_sparse_parity": "sparse_parity",
    "fig7_sparse_parity": "sparse_parity",
    "fig2_parity_scratchpad": "parity_scratchpad",
    "fig8_parity_scratchpad_ablations": "parity_scratchpad",
    "fig8_equal_budgets": ("parity_scratchpad", "fig8_equal"),  # drawn when the config has it
    "fig3_variable_assignment": "variable_assignment",
    "fig3_equal_budgets": ("variable_assignment", "fig3_equal"),
    "fig4_influence": "natural_language",
    "fig5_masks": "natural_language",
    "fig6_influence": "natural_language",
    "theory_figure": "theory",
    "fig_majority": "majority",
}


def reports(cfg: dict) -> Path:
    """The run's reports directory."""
    return Path(cfg["reports_dir"])


def table(cfg: dict, name: str) -> str:
    """Path of a report-level table: a name of TABLES, or a generation task's accuracy table."""
    if name in tasks.generation_tasks():
        return str(reports(cfg) / f"{name}_accuracy.csv")
    return str(reports(cfg) / TABLES[name][0])


def figure(cfg: dict, stem: str) -> str:
    """Path of a figure by stem (FIGURES, or a diagnostic such as sparse_parity_attention_neox)."""
    return str(reports(cfg) / f"{stem}.png")


def report_tables(cfg: dict) -> dict[str, str]:
    """The tables lengen.report.report reads, by name, for the sections this config runs."""
    names = [n for n in REPORT_READS if TABLES[n][1] in cfg]
    names += [n for n in tasks.generation_tasks() if n in cfg]
    return {name: table(cfg, name) for name in names}


def _drawn(cfg: dict, where: str | tuple[str, str]) -> bool:
    """Whether this config draws a figure of FIGURES: its section runs (and, for an optional
    figure given as (section, figure key), the section's `figures` has the key)."""
    section, key = (where, None) if isinstance(where, str) else where
    return section in cfg and (key is None or key in cfg[section].get("figures", {}))


def report_figures(cfg: dict) -> list[str]:
    """File names of the figures the run draws (what REPORT.md lists), sections in config order."""
    names = [f"{stem}.png" for stem, where in FIGURES.items() if _drawn(cfg, where)]
    if "sparse_parity" in cfg:
        names += [f"sparse_parity_attention_{v}.png" for v in cfg["sparse_parity"]["variants"]]
        if "schemes" in cfg["sparse_parity"]:
            names.append("sparse_parity_schemes.png")
    return sorted(names)


def report_config(cfg: dict) -> dict:
    """The config slice the report's rules read: everything but the figure sections."""
    return {
        key: {k: v for k, v in value.items() if k != "figures"}
        if isinstance(value, dict)
        else value
        for key, value in cfg.items()
    }
