# Every figure of the run (Figs. 1-8, the theory's, the attention diagnostic, the extras a config
# adds), drawn by one rule: its tables, arguments and report.html caption come from its kind
# (lengen.report.figures.KINDS: job, drawer and caption in one object) and its registry entry
# (lengen.config.artifacts.FIGURES, or a figure the tier adds), so no figure is special-cased here.
from lengen.report import figures

FIGURE_JOBS = figures.figure_jobs(config)  # stem -> FigureJob, the figures this config draws
FIGURE_OUTPUTS = [artifacts.figure(config, stem) for stem in FIGURE_JOBS]


rule figure:
    input:
        tables=lambda w: FIGURE_JOBS[w.stem].tables,
        ready=ancient(lambda w: FIGURE_JOBS[w.stem].ready),  # its MLflow experiment (the figure's run)
    output:
        report(
            f"{REPORTS}/{{stem}}.png",
            caption="../report/figure.rst",
            category=lambda w: FIGURE_JOBS[w.stem].category,
        ),
    log:
        f"{LOGS}/figures/{{stem}}.log",
    benchmark:
        f"{BENCHMARKS}/figures/{{stem}}.tsv"
    wildcard_constraints:
        stem="|".join(FIGURE_JOBS) or "^$",
    conda:
        CONDA_ENV
    resources:
        **job_resources("small"),
    params:
        code=code_hash("lengen.report.figures"),  # reruns when the code it runs changes
        kind=lambda w: FIGURE_JOBS[w.stem].kind,
        caption=lambda w: FIGURE_JOBS[w.stem].caption,  # report.html's (workflow/report/figure.rst)
        args=lambda w: FIGURE_JOBS[w.stem].args,
        tracking=lambda w: figure_tracking(FIGURE_JOBS[w.stem].section),
    shell:
        "python -m lengen.report.figures {params.kind} --tables {input.tables:q} {params.args:q}"
        " {params.tracking} --out {output:q} > {log:q} 2>&1"
