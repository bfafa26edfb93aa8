# Executable theory (Sec. 3-4, App. C-D): Prop. C.3's counterexamples, a Theorem 4.3 positive
# case and position coupling (Prop. 4.4), with exact population risks. CPU seconds, no training.
THEORY = config.get("theory")
THEORY_TABLE = artifacts.table(config, "theory")
THEORY_OUTPUTS = [THEORY_TABLE, THEORY_TABLE.replace(".csv", ".md")] if THEORY else []


rule theory:
    output:
        table=report(THEORY_TABLE, caption="../report/tables.rst", category="Tables"),
        markdown=THEORY_TABLE.replace(".csv", ".md"),
    log:
        f"{LOGS}/theory.log",
    benchmark:
        f"{BENCHMARKS}/theory.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("small"),
    params:
        code=code_hash("lengen.analysis.theory_cases"),  # reruns when the code it runs changes
        L=THEORY["L"] if THEORY else 0,
        lengths=" ".join(map(str, THEORY["test_lengths"])) if THEORY else "",
    shell:
        "python -m lengen.analysis.theory_cases --L {params.L} --test-lengths {params.lengths}"
        " --out-table {output.table:q} > {log:q} 2>&1"
