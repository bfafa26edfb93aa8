"""How each figure of a run is drawn: its input files and the arguments of `python -m
lengen.report.figures`, from its registry entry (lengen.config.artifacts.FIGURES, or a figure the
config adds) and the config. The workflow's one figure rule (workflow/rules/figures.smk) reads
nothing else, so a figure has one home: its entry, and the drawer its `kind` names.

    job = figure_job(cfg, "fig1_sparse_parity")
    job.tables  # every eval.csv the figure draws
    job.argv    # ["sparse_parity", "--tables", ..., "--title", ...] (less --out and tracking)
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lengen import tasks
from lengen.config import artifacts, plan

CATEGORIES = {  # a section's heading in Snakemake's report.html (generation tasks: one heading)
    "sparse_parity": "Sparse parity",
    "theory": "Theory",
    "natural_language": "Natural language",
}


@dataclass(frozen=True)
class FigureJob:
    """One figure's job: what it reads, how it is drawn, where report.html files it.

    python -m lengen.report.figures KIND --tables TABLES ARGS --out <reports>/<stem>.png"""

    section: str  # its config section (its MLflow experiment)
    kind: str  # the drawer (and report.html's caption: workflow/report/figure.rst)
    tables: list[str]
    args: list[str]
    ready: str  # its MLflow experiment's marker: the figure's run is logged there
    category: str

    @property
    def inputs(self) -> list[str]:
        return [*self.tables, self.ready]

    @property
    def argv(self) -> list[str]:
        """The CLI's arguments, less --out and the tracking ones."""
        return [self.kind, "--tables", *self.tables, *self.args]


def to_json(obj) -> str:
    """Compact JSON for a shell argument, keys sorted (the workflow's params)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def results(cfg: dict, *parts) -> str:
    return "/".join([cfg["results_dir"], *map(str, parts)])


def eval_lengths(cfg: dict, exp: str) -> str:
    """JSON {variant: the eval lengths its models are scored at}: the grid the table and figure
    jobs check every per-model table against (lengen.analysis.evaluate.read_eval_table)."""
    if exp == "sparse_parity":
        sp = cfg["sparse_parity"]
        variants = [*sp["variants"], *(sp.get("schemes") or {}).get("variants", {})]
        return to_json({v: sp["eval"]["lengths"] for v in variants})
    section = cfg[exp]
    return to_json(
        {v: tasks.variant_section(section, v)["eval"]["lengths"] for v in section["variants"]}
    )


def _sparse_parity(cfg: dict, fig: artifacts.Figure) -> tuple[list[str], list[str]]:
    sp = cfg["sparse_parity"]
    schemes = sp.get("schemes") or {}
    variants = list(sp["variants"])
    if fig.key == "schemes":  # NoPE / ALiBi beside the variants at one K_train
        variants += list(schemes["variants"])
        ks = [schemes["k_train"]]
        title = fig.title.format(tier=cfg["tier"], k_train=schemes["k_train"])
    else:
        ks = sp["figures"][fig.key]
        title = fig.title.format(tier=cfg["tier"], k_train=ks)
    labels = {v: e["label"] for v, e in {**sp["variants"], **schemes.get("variants", {})}.items()}
    args = ["--title", title, "--style", to_json(sp["figures"].get("style", {})),
            "--train-range", str(sp["train_min_len"]), str(sp["train_max_len"]),
            "--labels", to_json([[v, labels[v]] for v in variants]),  # config order: row order
            "--lengths", eval_lengths(cfg, "sparse_parity")]  # fmt: skip
    return plan.evals(cfg, "sparse_parity", variants, ks), args


def _generation(cfg: dict, fig: artifacts.Figure) -> tuple[list[str], list[str]]:
    section = cfg[fig.section]
    spec = section["figures"][fig.key]
    panels = spec["panels"]
    low, high = tasks.generation_tasks()[fig.section].train_lengths(  # the first panel's
        tasks.variant_section(section, panels[0])
    )
    args = ["--panels", *panels,
            "--title", spec.get("title", fig.title) + f" ({cfg['tier']} tier)",
            "--style", to_json(section["figures"].get("style", {})),
            "--train-range", str(low), str(high),
            "--lengths", eval_lengths(cfg, fig.section)]  # fmt: skip
    return plan.evals(cfg, fig.section, panels), args


def _influence(cfg: dict, fig: artifacts.Figure) -> tuple[list[str], list[str]]:
    nl = cfg["natural_language"]
    title = fig.title.format(k=nl["influence"]["k"], tier=cfg["tier"])
    style = to_json(nl.get("figures", {}).get("style", {}))
    return [artifacts.table(cfg, "influence")], ["--title", title, "--style", style]


def _masks(cfg: dict, fig: artifacts.Figure) -> tuple[list[str], list[str]]:
    return [], []  # drawn from the code that builds the masks


def _theory(cfg: dict, fig: artifacts.Figure) -> tuple[list[str], list[str]]:
    return [artifacts.table(cfg, "theory")], []


def _attention(cfg: dict, fig: artifacts.Figure) -> tuple[list[str], list[str]]:
    k = cfg["sparse_parity"]["figures"]["attention"]["k_train"]
    table = str(artifacts.reports(cfg) / f"sparse_parity_attention_{fig.variant}.csv")
    model = tasks.get("sparse_parity").train_spec(cfg, k, fig.variant, 0)["run_name"]  # run 0
    return [table], ["--title", fig.title.format(tier=cfg["tier"]), "--k-train", str(k),
                     "--models", model]  # fmt: skip


DRAWERS = {  # Figure.kind -> (config, figure) -> (tables it reads, its other arguments)
    "sparse_parity": _sparse_parity,
    "generation": _generation,
    "fig4": _influence,
    "fig6": _influence,
    "fig5": _masks,
    "theory": _theory,
    "attention": _attention,
}


def _job(cfg: dict, fig: artifacts.Figure) -> FigureJob:
    tables, args = DRAWERS[fig.kind](cfg, fig)
    ready = results(cfg, "mlflow", f"{fig.section}.ready")
    category = CATEGORIES.get(fig.section, "Generation tasks")
    return FigureJob(fig.section, fig.kind, tables, args, ready, category)


def figure_job(cfg: dict, stem: str) -> FigureJob:
    """The job of one figure this config draws (artifacts.drawn_figures)."""
    return _job(cfg, artifacts.all_figures(cfg)[stem])


def figure_jobs(cfg: dict) -> dict[str, FigureJob]:
    """Every figure this config draws, by stem."""
    return {stem: _job(cfg, fig) for stem, fig in artifacts.drawn_figures(cfg).items()}
