# Validates the config before any job runs; shared paths and helper functions (no rules here:
# `snakemake --lint` wants functions and rules apart).
#
# On SLURM the profiles (workflow/profiles/slurm*) group jobs: each model's training and its
# evaluation run as one job, the setup steps as one, a branch's tables as one, the figures as one.
# Snakemake 9 forms group jobs in local runs too (serialising them), so the rules name none.
import os
import shlex
import sys

from lengen import tasks
from lengen.config import artifacts, figure_jobs, lock, plan
from lengen.config.code import code_hash
from lengen.config.cluster import at_start, disk_short
from lengen.config.config import ConfigError, read_tier, read_yaml, validate
from lengen.core import gpus
from lengen.core.cli import EXIT_KNOWN, error_line
from lengen.core.floats import portable
from lengen.core.stores import stale_markers
from lengen.core.specs import experiment_name, tracking_uri

for path in {*workflow.configfiles, *workflow.overwrite_configfiles}:
    read_yaml(path)  # Snakemake's YAML reader keeps the last of two equal keys: name them instead
if "extends" in config:  # a tier that lists only its differences: the whole config, merged
    if len(workflow.overwrite_configfiles) != 1:
        raise ConfigError("a config with `extends` must be the one --configfile")
    whole = read_tier(workflow.overwrite_configfiles[0])
    config.clear()
    config.update(whole)
validate(config)


# A GPU tier on one machine: each job's devices are its own (lengen.core.gpus, `on_devices`), and
# at most as many GPU jobs run at once as the machine lends: `--resources gpu=G` (G at most the
# pool), else the whole pool. (A machine showing no GPU, as for a dry run, registers nothing.)
GPU_POOL, SLOTS = [], 0  # the machine's GPUs, and the jobs they take at once
if config["runtime"]["device"] == "cuda" and workflow.local_exec and workflow.is_main_process:
    GPU_POOL = gpus.pool()
    SLOTS = len(GPU_POOL) * config.get("jobs_per_gpu", 1)  # a GPU takes jobs_per_gpu jobs at once
    asked = None  # --resources gpu=, where given
    if "gpu" in workflow.global_resources:
        asked = workflow.global_resources["gpu"].value
        if GPU_POOL and asked is not None and asked > SLOTS:
            raise ConfigError(
                f"--resources gpu={asked}, but this machine lends {len(GPU_POOL)} GPU(s) "
                f"({','.join(GPU_POOL)}; {gpus.POOL} or nvidia-smi) x jobs_per_gpu "
                f"{config.get('jobs_per_gpu', 1)}: at most {SLOTS}"
            )
    elif GPU_POOL:
        workflow.register_resource("gpu", SLOTS)
    # Snakemake would cap a job's `gpu` at the pool, or at --resources gpu=, silently: refuse a
    # job that cannot fit instead
    for key, want in plan.gpus_per_job(config).items():
        if GPU_POOL and want > len(GPU_POOL):
            raise ConfigError(
                f"{key} is {want}, but this machine lends {len(GPU_POOL)} GPU(s) "
                f"({','.join(GPU_POOL)}): lower it (the global batch stays, accumulated), or run "
                "on SLURM (--profile workflow/profiles/slurm)"
            )
        if asked is not None and want > asked:
            raise ConfigError(
                f"{key} is {want}, but --resources gpu={asked} lets {asked} GPU(s) run at once: "
                f"give --resources gpu={want} or more, or lower {key} (the global batch stays, "
                "accumulated)"
            )


onstart:
    # On a cluster, the profile's `cores` states the CPUs of one node: a job kind of the tier asking
    # more would never start (SLURM keeps it PENDING); stop before submitting anything. (Jobs run
    # Snakemake again inside SLURM, not as the main process: they skip this.)
    if workflow.is_main_process and not workflow.local_exec:
        oversized = at_start(config, workflow.cores)  # what lengen.config.cluster says first
        if oversized:
            raise ValueError("the tier's jobs do not fit a node:\n  " + "\n  ".join(oversized))
    check_disk()
    take_results()


onerror:
    give_results()


# A CPU tier's jobs run with the CPU kernels pinned to AVX2, as the references were made
# (lengen.core.floats: AVX-512 kernels round differently), so a run on any x86-64 machine equals
# the committed reference to the last bit. Every job inherits this process's environment.
if config["runtime"]["device"] == "cpu":
    os.environ.update(portable())


# Every job's shell: Snakemake's strict bash, and a descriptor (3) on Snakemake's own stderr. A
# tool ending on a known error (lengen.core.cli.KnownError) writes its one line there too, so it
# shows where Snakemake reports the job, even when the job's log (on the results disk) is full.
shell.prefix("set -euo pipefail; exec 3>&2; export LENGEN_ERROR_FD=3; ")


GENERATION_TASKS = tasks.generation_tasks()  # each task's SETTING: path prefix, config list
RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{RESULTS}/benchmarks"  # every job's wall time, memory, CPU (snakemake --report)
CONDA_ENV = "../../envs/lengen.yaml"  # `--sdm conda` (relative to this folder)


# A lost or replaced MLflow store (mlflow.db deleted, or another file in its place): its setup
# markers no longer mark it (lengen.core.stores), so they go and the setup rules run again; every
# job reads a marker as `ancient`, so no finished training or table reruns for it.
if workflow.is_main_process:
    STALE, WHY = stale_markers(RESULTS, tracking_uri(config))
    for marker in STALE:
        marker.unlink(missing_ok=True)
    if STALE:
        print(
            f"{WHY}: its setup runs again (trained models and tables stay; their MLflow runs "
            "went with the old store)",
            file=sys.stderr,
        )


def figure_tracking(experiment):
    """lengen.report.figures arguments that log a figure to its experiment's MLflow store (the
    SQLite store under results_dir named from the working directory, where jobs run: no machine
    path among report.html's parameters)."""
    name = experiment_name(config["tracking"]["experiment_prefix"], experiment)
    uri = tracking_uri(config)
    if uri.startswith("sqlite:///"):
        uri = "sqlite:///" + os.path.relpath(uri.removeprefix("sqlite:///"))
    return f"--tracking-uri {shlex.quote(uri)} --experiment {shlex.quote(name)}"


def force_unfinished(w):
    """Every training job's input function (it adds no file): forces the trainings that began
    and did not end (UNFINISHED, the Snakefile's). Snakemake alone would say "Nothing to be done"
    once their evaluation has run (a missing file between two present ones is not remade); forced,
    each resumes from its checkpoints and what it feeds reruns, as its output is then newer. It
    fills what `--forcerun` fills (the DAG's forcefiles, Snakemake 9.27); jobs running Snakemake
    again inside SLURM skip it."""
    dag = getattr(workflow, "_dag", None)
    if UNFINISHED and dag is not None and workflow.is_main_process:
        dag.forcefiles.update(UNFINISHED)
    return []


def take_results():
    """One workflow writes results_dir at a time (lengen.config.lock): taken when jobs are about
    to run (onstart; a dry run takes none), given back when the run ends (onsuccess, onerror).
    Another workflow's is refused in one line, naming it."""
    if not workflow.is_main_process:
        return
    try:
        note = lock.claim(RESULTS, os.getcwd())
    except (lock.ResultsLocked, lock.ResultsUnwritable) as err:
        print(error_line(err), file=sys.stderr)
        sys.exit(EXIT_KNOWN)
    if note:
        print(note, file=sys.stderr)


def check_disk():
    """Before the first job: results_dir's disk holds what the tier writes there (its model files,
    token files and the checkpoints of the training jobs that can run at once: one machine's cores
    or GPU slots, a cluster's --jobs); else one line and exit (lengen.config.cluster.disk_short)."""
    if not workflow.is_main_process or os.environ.get("LENGEN_DISK_CHECK") == "0":
        return
    threads = max(1, config["runtime"]["threads_per_job"])
    at_once = max(1, workflow.cores // threads) if workflow.local_exec else workflow.nodes
    if workflow.local_exec and config["runtime"]["device"] == "cuda" and GPU_POOL:
        at_once = min(at_once, SLOTS)
    short = disk_short(config, max(1, at_once or 1))
    if short:
        print(short, file=sys.stderr)
        sys.exit(EXIT_KNOWN)


def give_results():
    if workflow.is_main_process:
        lock.release(RESULTS)


to_json = figure_jobs.to_json  # compact JSON for a shell argument (quoted with :q in the rule)


launcher = plan.launcher  # a training job's `python -m` or the deepspeed launcher
EVAL_GPUS = plan.eval_gpus(config)  # an evaluation job's GPUs: one on a GPU tier
GPU_MODEL = config.get("gpu_model")  # the site's GPU type (the SLURM profile's `config`), or None


def gpus(n):
    """A job's GPU resources: `gpu` (the SLURM plugin's --gpus=N; on one machine, lengen.core.gpus
    takes that many devices), and where the site names a GPU type, `gpu_model` (--gpus=TYPE:N)
    on the jobs that ask for GPUs only."""
    return {"gpu": n, **({"gpu_model": GPU_MODEL} if GPU_MODEL and n else {})}


def on_devices(wildcards, resources):
    """What a job's command starts with so that its `gpu` resource's devices are its own
    (lengen.core.gpus: on one machine, CUDA_VISIBLE_DEVICES naming devices no other running job
    holds; under SLURM, the allocation's); nothing on a CPU tier."""
    prefix = plan.devices(config, resources.gpu)
    return prefix + " " if prefix else ""


def job_resources(kind, steps=None):
    """What a job of this kind asks a cluster for, from the tier's `jobs` section (the SLURM
    profile keeps only the site's settings): CPUs, memory, minutes. A training kind's minutes
    may come from its steps (`steps`: the job's wildcards -> its steps) and the measured step
    time with a margin (lengen.config.plan.job_minutes), one job at a time."""
    default = {"cpus": config["runtime"]["threads_per_job"], "mem_mb": 4000, "runtime": 60}
    job = config.get("jobs", {}).get(kind, default)  # a config from before `jobs` (schema)
    if "step_s" in job:
        runtime = lambda w: plan.job_minutes(job, steps(w))
    else:
        runtime = job["runtime"]
    return {"cpus_per_task": job["cpus"], "mem_mb": job["mem_mb"], "runtime": runtime}


def nl_steps(w):
    """A language model's training steps (h_short or h_long)."""
    return tasks.get("natural_language").train_spec(config, w.which)["train"]["steps"]


def run_steps(w):
    """A synthetic training job's steps (a fused group's runs share them)."""
    if hasattr(w, "group"):
        return members(w)[0].spec(config)["train"]["steps"]
    return run_of(w).spec(config)["train"]["steps"]


def out_dir(wildcards, output):
    """The folder of a rule's first output: the --out of jobs that write several files there."""
    return os.path.dirname(output[0])


def eval_lengths(exp):
    """JSON {variant: the eval lengths its models are scored at}: the grid the table rules check
    every per-model table against (lengen.analysis.tables.read_eval_table)."""
    return figure_jobs.eval_lengths(config, exp)


def run_of(w):
    """The plan's run (lengen.config.plan.Run) a rule's wildcards name: experiment, variant,
    setting (K8, k2, d3, ...) or sparse parity's K, and run."""
    experiment = getattr(w, "experiment", "sparse_parity")
    setting = w.setting.removeprefix(plan.prefix(experiment)) if hasattr(w, "setting") else w.K
    return plan.Run(experiment, w.variant, int(setting), int(w.run))


def members(w):
    """The runs of a fused group job (its `group` wildcard), as lengen.config.plan groups them."""
    return plan.group(config, w.experiment, w.variant, int(w.group))


def trained(w):
    """What a run's evaluation waits for: its model.pt, or its fused group's job."""
    return plan.trained(config, run_of(w))


def evaluated(w):
    """A fused generation run's group evaluation marker (its table is written there)."""
    run = run_of(w)
    return plan.marker(config, run.experiment, run.variant, plan.group_index(config, run),
                       "evaluated")  # fmt: skip
