# The synthetic tasks' training and tables, one rule set for all: sparse parity (Sec. 5.1) and
# every task scored by greedy generation (Sec. 5.2: the scratchpad tasks with PPC, majority).
# Which runs a tier trains, where each lives and which fused group trains it is
# lengen.config.plan's; each task's evaluation has its own rules (sparse_parity.smk,
# generation.smk).
SYNTHETIC = plan.experiments(config)
SYNTHETIC_WILDCARDS = {
    "experiment": "|".join(SYNTHETIC) or "^$",
    "setting": "|".join(rf"{plan.prefix(e)}\d+" for e in SYNTHETIC) or "^$",
    "run": r"\d+",
}


rule synthetic_train:
    # One training run (variant, K_train / jump / depth, seed); resumes from ckpt/ after a crash.
    input:
        ancient(f"{RESULTS}/mlflow/{{experiment}}.ready"),
        force_unfinished,
    output:
        f"{RESULTS}/{{experiment}}/{{variant}}/{{setting}}/seed{{run}}/model.pt",
    log:
        f"{LOGS}/{{experiment}}/train_{{variant}}_{{setting}}_seed{{run}}.log",
    benchmark:
        f"{BENCHMARKS}/{{experiment}}/train_{{variant}}_{{setting}}_seed{{run}}.tsv"
    wildcard_constraints:
        **SYNTHETIC_WILDCARDS,
    conda:
        CONDA_ENV
    threads: config["runtime"]["threads_per_job"]
    resources:
        **job_resources("train", run_steps),
        **gpus(config["runtime"]["gpus_per_job"]),  # the SLURM plugin: --gpus
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=lambda w: code_hash("lengen.train.train", task=w.experiment),
        spec=lambda w: to_json(run_of(w).spec(config)),
        launcher=launcher(config),
        devices=on_devices,
        out=out_dir,
    shell:
        "{params.devices}{params.launcher} lengen.train.train --spec {params.spec:q}"
        " --out {params.out:q} > {log:q} 2>&1"


rule synthetic_train_group:
    # Up to runtime.fuse_runs runs of one variant (its settings and seeds share every shape)
    # trained as one fused model (one job, one GPU): each run's model.pt, spec.json and MLflow run
    # in its own folder, as alone.
    input:
        ancient(f"{RESULTS}/mlflow/{{experiment}}.ready"),
        force_unfinished,
    output:
        touch(f"{RESULTS}/{{experiment}}/{{variant}}/fused{{group}}.done"),
    log:
        f"{LOGS}/{{experiment}}/train_{{variant}}_fused{{group}}.log",
    benchmark:
        f"{BENCHMARKS}/{{experiment}}/train_{{variant}}_fused{{group}}.tsv"
    wildcard_constraints:
        experiment=SYNTHETIC_WILDCARDS["experiment"],
        group=r"\d+",
    conda:
        CONDA_ENV
    threads: config["runtime"]["threads_per_job"]
    resources:
        **job_resources("train", run_steps),
        **gpus(config["runtime"]["gpus_per_job"]),  # the SLURM plugin: --gpus
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=lambda w: code_hash("lengen.train.group", task=w.experiment),
        specs=lambda w: to_json([run.spec(config) for run in members(w)]),
        outs=lambda w: " ".join(shlex.quote(run.folder(config)) for run in members(w)),
        devices=on_devices,
    shell:
        "{params.devices}python -m lengen.train.group --specs {params.specs:q} --out {params.outs}"
        " > {log:q} 2>&1"


rule synthetic_table:
    # Every run's accuracy in one tidy table per experiment, each run's table checked against
    # the lengths the config scores.
    input:
        lambda w: plan.evals(config, w.experiment),
    output:
        report(
            f"{REPORTS}/{{experiment}}_accuracy.csv",
            caption="../report/tables.rst",
            category="Tables",
        ),
    log:
        f"{LOGS}/{{experiment}}/table.log",
    benchmark:
        f"{BENCHMARKS}/{{experiment}}/table.tsv"
    wildcard_constraints:
        experiment=SYNTHETIC_WILDCARDS["experiment"],
    conda:
        CONDA_ENV
    resources:
        **job_resources("small"),
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=lambda w: code_hash("lengen.analysis.tables", task=w.experiment),
        lengths=lambda w: eval_lengths(w.experiment),  # the grid every table is checked against
    shell:
        "python -m lengen.analysis.tables combine --tables {input:q} --lengths {params.lengths:q}"
        " --out {output:q} > {log:q} 2>&1"
