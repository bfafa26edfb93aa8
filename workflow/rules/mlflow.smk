# The MLflow store and one experiment per branch, created once before the parallel jobs.


rule mlflow_store:
    # Creates the store's schema once, before any job writes to it (platform notes: races).
    output:
        f"{RESULTS}/mlflow.ready",
    log:
        f"{LOGS}/mlflow_store.log",
    benchmark:
        f"{BENCHMARKS}/mlflow_store.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("small"),
    params:
        uri=tracking_uri(config),
    shell:
        "python -m lengen.core.tracking --uri {params.uri:q} --done {output:q} > {log:q} 2>&1"


rule mlflow_setup:
    # Creates one experiment's MLflow experiment before its parallel training jobs. One file per
    # experiment, so adding an experiment to the config never makes finished trainings stale.
    input:
        f"{RESULTS}/mlflow.ready",
    output:
        f"{RESULTS}/mlflow/{{experiment}}.ready",
    log:
        f"{LOGS}/mlflow_setup_{{experiment}}.log",
    benchmark:
        f"{BENCHMARKS}/mlflow_setup_{{experiment}}.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("small"),
    params:
        uri=tracking_uri(config),
        name=lambda w: experiment_name(config["tracking"]["experiment_prefix"], w.experiment),
    shell:
        "python -m lengen.core.tracking --uri {params.uri:q} --experiments {params.name:q}"
        " --done {output:q} > {log:q} 2>&1"
