"""What a figure's job is made of (`FigureJob`) and the helpers every job builder shares: the
per-model tables' grid (`eval_lengths`), a path under results_dir, compact JSON for a shell
argument. Each kind of figure builds its own job (lengen.report.figures.KINDS: its job, drawer and
caption in one object); the workflow's one figure rule asks `lengen.report.figures.figure_jobs`.

    job = figures.figure_job(cfg, "fig1_sparse_parity")
    job.tables  # every eval.csv the figure draws
    job.argv    # ["sparse_parity", "--tables", ..., "--title", ...] (less --out and tracking)
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lengen import tasks
from lengen.config import plan

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
    kind: str  # its kind (lengen.report.figures.KINDS): how it is drawn and captioned
    tables: list[str]
    args: list[str]
    ready: str  # its MLflow experiment's marker: the figure's run is logged there
    category: str
    caption: str = ""  # its report.html caption (reStructuredText), its kind's

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
    jobs check every per-model table against (lengen.analysis.tables.read_eval_table)."""
    section, variants = cfg[exp], plan.variants(cfg, exp)
    if exp == plan.SPARSE_PARITY:  # one stored test set for every model, scheme models' too
        return to_json({v: section["eval"]["lengths"] for v in variants})
    return to_json({v: tasks.variant_section(section, v)["eval"]["lengths"] for v in variants})
