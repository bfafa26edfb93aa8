# Validates the config before any job runs and defines shared paths and the MLflow setup rule.
import json

from lengen import specs
from lengen.config import tracking_uri, validate

validate(config)

RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
LOGS = f"{RESULTS}/logs"
PY = "python"  # the interpreter of the active environment (envs/lengen.yaml on clusters)


def to_json(obj):
    """Compact JSON for a shell argument (quoted with :q in the rule)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def launcher(cfg):
    """`python -m` for one process; the deepspeed launcher for several GPUs per job."""
    gpus = cfg["runtime"]["gpus_per_job"]
    if cfg["runtime"]["device"] == "cuda" and gpus > 1:
        return f"deepspeed --num_gpus {gpus} --module"
    return f"{PY} -m"


rule mlflow_setup:
    # Creates the store's schema and experiments once, before parallel jobs (platform notes).
    output:
        f"{RESULTS}/mlflow.ready",
    params:
        uri=tracking_uri(config),
        experiments=specs.experiments(config),
    log:
        f"{LOGS}/mlflow_setup.log",
    shell:
        "{PY} -m lengen.tracking --uri {params.uri:q} --experiments {params.experiments:q}"
        " --done {output} > {log} 2>&1"
