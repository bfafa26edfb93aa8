# Claims verdict report: one row per claim, measured number, rule and verdict (lengen.report.report);
# then, after every successful run that has it, Snakemake's HTML report of all figures.
import os
import shlex
import sys

import yaml

from lengen.report import reference

REPORT = f"{REPORTS}/{artifacts.REPORT}"
HTML_REPORT = f"{REPORTS}/report.html"
# The committed reference of this tier (reference/<tier>/ beside the Snakefile; no rule writes
# there): REPORT.md compares this run's verdicts with it (lengen.report.reference).
REFERENCE_LABEL = str(reference.reference_dir(config["tier"]) / artifacts.VERDICTS)
REFERENCE_VERDICTS = os.path.relpath(os.path.join(workflow.basedir, REFERENCE_LABEL))  # from the
# working directory, where jobs run: no machine path among report.html's parameters
REFERENCE_INPUT = {"reference": REFERENCE_VERDICTS} if os.path.exists(REFERENCE_VERDICTS) else {}


# the tidy tables the report does not read, held by its MLflow run beside those it does
REPORT_ATTACHED = [
    t
    for t in [*SPARSE_PARITY_DIAGNOSTIC, *SPARSE_PARITY_SCHEMES, *([NL_TABLE] if NL else [])]
    if t not in artifacts.report_tables(config).values()
]


rule report:
    # Named inputs: exactly the tables the claims read (lengen.config.artifacts.report_tables), the
    # reference's verdicts, and only the config slice the rules read: restyling a figure does not
    # rerun the claims.
    input:
        **artifacts.report_tables(config),
        **REFERENCE_INPUT,
        attached=REPORT_ATTACHED,
    output:
        report=report(REPORT, caption="../report/report.rst", category="Claims"),
        html=f"{REPORTS}/{artifacts.REPORT_HTML}",  # REPORT.md rendered: report.html's front
        verdicts=report(
            f"{REPORTS}/{artifacts.VERDICTS}", caption="../report/tables.rst", category="Claims"
        ),
        runs=report(
            f"{REPORTS}/{artifacts.RUNS_FIGURE}", caption="../report/runs.rst", category="Claims"
        ),
    log:
        f"{LOGS}/report.log",
    benchmark:
        f"{BENCHMARKS}/report.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("small"),
    params:
        code=code_hash("lengen.report.report"),  # reruns when the code it runs changes
        cfg=to_json(artifacts.report_config(config)),
        tables=[f"{name}={path}" for name, path in artifacts.report_tables(config).items()],
        reference=lambda w, input: (
            f"--reference {shlex.quote(input.reference)}" if REFERENCE_INPUT else ""
        ),
        label=lambda w: REFERENCE_LABEL,  # how REPORT.md names it, from any working directory
        figures=artifacts.report_figures(config),  # the list alone: restyling reruns nothing
        tracking=figure_tracking("report"),  # its MLflow run: the report and every tidy table
    shell:
        "python -m lengen.report.report --config {params.cfg:q} --table {params.tables:q}"
        " {params.reference} --reference-label {params.label:q} --figures {params.figures:q}"
        " {params.tracking} --attach {input.attached:q} --out {output.report:q}"
        " > {log:q} 2>&1"


REPORT_STYLE = os.path.join(os.path.dirname(workflow.main_snakefile), "workflow/report/style.css")


onsuccess:
    # `snakemake --report` needs every report() output, so only once REPORT.md (which depends on
    # all of them) exists; it reads the run's metadata, hence --nolock inside this run.
    if os.path.exists(REPORT):
        used = f"{RESULTS}/config.used.yaml"
        with open(used, "w") as f:
            yaml.safe_dump(config, f)
        shell(
            f"{sys.executable} -m snakemake -s {shlex.quote(workflow.main_snakefile)}"
            f" --configfile {shlex.quote(used)} --report {shlex.quote(HTML_REPORT)} --nolock"
            f" --report-stylesheet {shlex.quote(REPORT_STYLE)}"
            f" --workflow-profile none > {shlex.quote(LOGS)}/html_report.log 2>&1"
            f" || echo 'HTML report failed: see {LOGS}/html_report.log'"
        )
    give_results()
