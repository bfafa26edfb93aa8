# Claims verdict report: one row per claim, measured number, rule and verdict (lengen.report.report);
# then, after every successful run that has it, Snakemake's HTML report of all figures.
import os
import sys

import yaml

REPORT = f"{REPORTS}/{artifacts.REPORT}"
HTML_REPORT = f"{REPORTS}/report.html"


rule report:
    # Named inputs: exactly the tables the claims read (lengen.config.artifacts.report_tables), and only
    # the config slice the rules read: restyling a figure does not rerun the claims.
    input:
        **artifacts.report_tables(config),
    output:
        report(REPORT, caption="../report/report.rst", category="Claims"),
    params:
        cfg=to_json(artifacts.report_config(config)),
        tables=lambda w, input: " ".join(f"{name}={path}" for name, path in input.items()),
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/report.tsv",
    log:
        f"{LOGS}/report.log",
    shell:
        "{PY} -m lengen.report.report --config {params.cfg:q} --table {params.tables}"
        " --out {output} > {log} 2>&1"


onsuccess:
    # `snakemake --report` needs every report() output, so only once REPORT.md (which depends on
    # all of them) exists; it reads the run's metadata, hence --nolock inside this run.
    if os.path.exists(REPORT):
        used = f"{RESULTS}/config.used.yaml"
        with open(used, "w") as f:
            yaml.safe_dump(config, f)
        shell(
            f"{sys.executable} -m snakemake -s {workflow.main_snakefile} --configfile {used}"
            f" --report {HTML_REPORT} --nolock --workflow-profile none"
            f" > {LOGS}/html_report.log 2>&1"
            f" || echo 'HTML report failed: see {LOGS}/html_report.log'"
        )
