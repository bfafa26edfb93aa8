# Validates the config before any job runs and defines shared paths and the MLflow setup rule.
import json

from lengen.config import artifacts, specs
from lengen.config.config import tracking_uri, validate
from lengen.train.tracking import experiment_name

validate(config)

RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{RESULTS}/benchmarks"  # every job's wall time, memory, CPU (snakemake --report)
CONDA_ENV = "../../envs/lengen.yaml"  # `--sdm conda` (relative to this folder)
PY = "python"  # the interpreter of the active environment (envs/lengen.yaml on clusters)


def figure_tracking(experiment):
    """lengen.report.figures arguments that log a figure to its experiment's MLflow store."""
    name = experiment_name(config["tracking"]["experiment_prefix"], experiment)
    return f"--tracking-uri {tracking_uri(config)} --experiment {name}"


def to_json(obj):
    """Compact JSON for a shell argument (quoted with :q in the rule)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def launcher(cfg, gpus=None):
    """`python -m` for one process; the deepspeed launcher for several GPUs per job (the
    runtime's gpus_per_job unless a section sets its own)."""
    gpus = gpus or cfg["runtime"]["gpus_per_job"]
    if cfg["runtime"]["device"] == "cuda" and gpus > 1:
        return f"deepspeed --num_gpus {gpus} --module"
    return f"{PY} -m"


rule mlflow_store:
    # Creates the store's schema once, before any job writes to it (platform notes: races).
    output:
        f"{RESULTS}/mlflow.ready",
    params:
        uri=tracking_uri(config),
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/mlflow_store.tsv",
    log:
        f"{LOGS}/mlflow_store.log",
    shell:
        "{PY} -m lengen.train.tracking --uri {params.uri:q} --done {output} > {log} 2>&1"


rule mlflow_setup:
    # Creates one experiment's MLflow experiment before its parallel training jobs. One file per
    # experiment, so adding an experiment to the config never makes finished trainings stale.
    input:
        f"{RESULTS}/mlflow.ready",
    output:
        f"{RESULTS}/mlflow/{{experiment}}.ready",
    params:
        uri=tracking_uri(config),
        name=lambda w: experiment_name(config["tracking"]["experiment_prefix"], w.experiment),
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/mlflow_setup_{{experiment}}.tsv",
    log:
        f"{LOGS}/mlflow_setup_{{experiment}}.log",
    shell:
        "{PY} -m lengen.train.tracking --uri {params.uri:q} --experiments {params.name:q}"
        " --done {output} > {log} 2>&1"
