# Validates the config before any job runs; shared paths and helper functions (no rules here:
# `snakemake --lint` wants functions and rules apart).
#
# On SLURM the profiles (workflow/profiles/slurm*) group jobs: each model's training and its
# evaluation run as one job, the setup steps as one, a branch's tables as one, the figures as one.
# Snakemake 9 forms group jobs in local runs too (serialising them), so the rules name none.
import os
import shlex

from lengen import tasks
from lengen.config import artifacts, figure_jobs
from lengen.config.code import code_hash
from lengen.config.cluster import too_large
from lengen.config.config import ConfigError, read_tier, read_yaml, validate
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


onstart:
    # On a cluster, the profile's `cores` states the CPUs of one node: a job kind of the tier asking
    # more would never start (SLURM keeps it PENDING); stop before submitting anything. (Jobs run
    # Snakemake again inside SLURM, not as the main process: they skip this.)
    if workflow.is_main_process and not workflow.local_exec:
        oversized = too_large(
            config, workflow.cores, node="a node (the profile's `cores`)",
            fix="set the profile's `cores` to your nodes' CPUs",
        )  # fmt: skip
        if oversized:
            raise ValueError("the tier's jobs do not fit a node:\n  " + "\n  ".join(oversized))


GENERATION_TASKS = tasks.generation_tasks()  # each task's SETTING: path prefix, config list
RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{RESULTS}/benchmarks"  # every job's wall time, memory, CPU (snakemake --report)
CONDA_ENV = "../../envs/lengen.yaml"  # `--sdm conda` (relative to this folder)


def figure_tracking(experiment):
    """lengen.report.figures arguments that log a figure to its experiment's MLflow store (the
    SQLite store under results_dir named from the working directory, where jobs run: no machine
    path among report.html's parameters)."""
    name = experiment_name(config["tracking"]["experiment_prefix"], experiment)
    uri = tracking_uri(config)
    if uri.startswith("sqlite:///"):
        uri = "sqlite:///" + os.path.relpath(uri.removeprefix("sqlite:///"))
    return f"--tracking-uri {shlex.quote(uri)} --experiment {shlex.quote(name)}"


to_json = figure_jobs.to_json  # compact JSON for a shell argument (quoted with :q in the rule)


def launcher(cfg, gpus=None):
    """`python -m` for one process; the deepspeed launcher for several GPUs per job (the
    runtime's gpus_per_job unless a section sets its own)."""
    gpus = gpus or cfg["runtime"]["gpus_per_job"]
    if cfg["runtime"]["device"] == "cuda" and gpus > 1:
        return f"deepspeed --num_gpus {gpus} --module"
    return "python -m"  # the interpreter of the active environment (envs/lengen.yaml)


def job_resources(kind):
    """What a job of this kind asks a cluster for, from the tier's `jobs` section (the SLURM
    profile keeps only the site's settings): CPUs, memory, minutes."""
    default = {"cpus": config["runtime"]["threads_per_job"], "mem_mb": 4000, "runtime": 60}
    job = config.get("jobs", {}).get(kind, default)  # a config from before `jobs` (schema)
    return {"cpus_per_task": job["cpus"], "mem_mb": job["mem_mb"], "runtime": job["runtime"]}


def out_dir(wildcards, output):
    """The folder of a rule's first output: the --out of jobs that write several files there."""
    return os.path.dirname(output[0])


def sp_evals(variants, ks):
    """eval.csv of every run of every sparse-parity model of the given variants and K_train
    values (a `schemes` model: one run)."""
    return figure_jobs.sparse_parity_evals(config, variants, ks)


def eval_lengths(exp):
    """JSON {variant: the eval lengths its models are scored at}: the grid the table rules check
    every per-model table against (lengen.analysis.evaluate.read_eval_table)."""
    return figure_jobs.eval_lengths(config, exp)


def generation_evals(exp, variants=None):
    """eval.csv of every run of the given variants (all by default) of one generation-scored
    experiment (each variant at its own jumps / depths)."""
    return figure_jobs.generation_evals(config, exp, variants)


FUSE_RUNS = config["runtime"].get("fuse_runs", 1)  # runs trained as one job (lengen.train.group)


def generation_run(w, run=None, value=None):
    """The folder of one run of a generation-task variant: its wildcards' setting and run, or
    the given jump / depth `value` and `run`."""
    run = w.run if run is None else run
    prefix = GENERATION_TASKS[w.experiment].SETTING.prefix
    setting = w.setting if value is None else f"{prefix}{value}"
    return os.path.join(RESULTS, w.experiment, w.variant, setting, f"seed{run}")


def fused_members(experiment, variant):
    """Every (jump / depth, run) of a generation-task variant, in the order fused groups take
    them: its settings' runs one after another (they share every shape: lengen.train.group)."""
    section = tasks.variant_section(config[experiment], variant)
    values = section[GENERATION_TASKS[experiment].SETTING.values]
    runs = config[experiment]["variants"][variant]["runs"]
    return [(value, run) for value in values for run in range(runs)]


def fused_group(w):
    """The (jump / depth, run) members of a fused group job (its `group` wildcard): FUSE_RUNS
    consecutive members of the variant, the last group what is left."""
    members = fused_members(w.experiment, w.variant)
    return members[int(w.group) * FUSE_RUNS : (int(w.group) + 1) * FUSE_RUNS]


def fused_marker(w, what):
    """A generation run's fused group's marker: `done` (trained) or `evaluated`."""
    value = int(w.setting.removeprefix(GENERATION_TASKS[w.experiment].SETTING.prefix))
    group = fused_members(w.experiment, w.variant).index((value, int(w.run))) // FUSE_RUNS
    return os.path.join(RESULTS, w.experiment, w.variant, f"fused{group}.{what}")


def trained(w):
    """What a generation run's evaluation waits for: its model.pt, or its fused group's job."""
    if FUSE_RUNS == 1:
        return os.path.join(generation_run(w), "model.pt")
    return fused_marker(w, "done")


FUSED_EVAL = "eval_fused.csv"  # a member's table as its group's evaluation wrote it


def sp_members(variant):
    """Every (K_train, run) of a sparse-parity variant, in the order fused groups take them (they
    share every shape: K_train changes the data only)."""
    sp = config["sparse_parity"]
    return [(k, run) for k in sp["k_train"] for run in range(sp["variants"][variant]["runs"])]


def sp_group(w):
    """The (K_train, run) members of a fused sparse-parity group job (its `group` wildcard)."""
    return sp_members(w.variant)[int(w.group) * FUSE_RUNS : (int(w.group) + 1) * FUSE_RUNS]


def sp_model(variant, k, run):
    """A sparse-parity model's file, or what stands for it in a tier with fused runs: its
    group's job (the extra schemes figure's models train one by one)."""
    folder = f"{RESULTS}/sparse_parity/{variant}"
    if FUSE_RUNS == 1 or variant not in config["sparse_parity"]["variants"]:
        return f"{folder}/K{k}/seed{run}/model.pt"
    group = sp_members(variant).index((int(k), int(run))) // FUSE_RUNS
    return f"{folder}/fused{group}.done"
