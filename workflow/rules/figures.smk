# Every figure of the run (Figs. 1-8, the theory's, the attention diagnostic, the extras a config
# adds), drawn by one rule: its tables and arguments come from its registry entry
# (lengen.config.artifacts.FIGURES, read by lengen.config.figure_jobs), its report.html caption
# from its kind (workflow/report/figure.rst), so no figure is special-cased here.
FIGURE_JOBS = figure_jobs.figure_jobs(config)  # stem -> FigureJob, the figures this config draws
FIGURE_OUTPUTS = [artifacts.figure(config, stem) for stem in FIGURE_JOBS]


rule figure:
    input:
        tables=lambda w: FIGURE_JOBS[w.stem].tables,
        ready=lambda w: FIGURE_JOBS[w.stem].ready,  # its MLflow experiment (the figure's run)
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
        args=lambda w: FIGURE_JOBS[w.stem].args,
        tracking=lambda w: figure_tracking(FIGURE_JOBS[w.stem].section),
    shell:
        "python -m lengen.report.figures {params.kind} --tables {input.tables:q} {params.args:q}"
        " {params.tracking} --out {output:q} > {log:q} 2>&1"
