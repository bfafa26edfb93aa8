# Claims verdict report: one row per claim, measured number, rule and verdict (lengen.report).
REPORT = f"{REPORTS}/REPORT.md"


rule report:
    input:
        SPARSE_PARITY_FIGURES,
        SPARSE_PARITY_TABLE,
        SCRATCHPAD_OUTPUTS,
        THEORY_OUTPUTS,
    output:
        report(REPORT, caption="../report/report.rst", category="Claims"),
    params:
        cfg=to_json(config),
    log:
        f"{LOGS}/report.log",
    shell:
        "{PY} -m lengen.report --config {params.cfg:q} --out {output} > {log} 2>&1"
