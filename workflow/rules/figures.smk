# Every figure of the run (Figs. 1-8, the theory's, the extras a config adds), drawn by one rule:
# its inputs and arguments come from its registry entry (lengen.config.artifacts.FIGURES, read by
# lengen.config.figure_jobs), so no figure is special-cased here.
FIGURE_JOBS = figure_jobs.figure_jobs(config)  # stem -> FigureJob, the figures this config draws
FIGURE_OUTPUTS = [artifacts.figure(config, stem) for stem in FIGURE_JOBS]


rule figure:
    input:
        lambda w: FIGURE_JOBS[w.stem].inputs,
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
        args=lambda w: FIGURE_JOBS[w.stem].args,
        tracking=lambda w: figure_tracking(FIGURE_JOBS[w.stem].section),
        caption=lambda w: FIGURE_JOBS[w.stem].caption,  # report.html's (workflow/report/figure.rst)
    shell:
        "python -m lengen.report.figures {params.args:q} {params.tracking} --out {output:q}"
        " > {log:q} 2>&1"
