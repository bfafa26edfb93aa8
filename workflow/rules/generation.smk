# Every task scored by greedy generation (lengen.tasks.generation_tasks): the scratchpad tasks with
# Predictive Position Coupling (Sec. 5.2: parity with jumps, Figs. 2, 8; variable assignment,
# Fig. 3a-d) and majority. One rule set for all; `variants` in the config pick the position scheme
# (ppc / absolute / rope_pose / ...) and, for variable assignment, the scratchpad.
GENERATION_OUTPUTS = [artifacts.table(config, exp) for exp in GENERATION_TASKS if exp in config]


GENERATION_WILDCARDS = {
    "experiment": "|".join(GENERATION_TASKS),
    "setting": "|".join(rf"{t.SETTING.prefix}\d+" for t in GENERATION_TASKS.values()),
    "run": r"\d+",
}


rule generation_train:
    # One training run of one variant at one jump / depth; resumes from ckpt/ after a crash.
    input:
        f"{RESULTS}/mlflow/{{experiment}}.ready",
    output:
        f"{RESULTS}/{{experiment}}/{{variant}}/{{setting}}/seed{{run}}/model.pt",
    log:
        f"{LOGS}/{{experiment}}/train_{{variant}}_{{setting}}_seed{{run}}.log",
    benchmark:
        f"{BENCHMARKS}/{{experiment}}/train_{{variant}}_{{setting}}_seed{{run}}.tsv"
    wildcard_constraints:
        **GENERATION_WILDCARDS,
    conda:
        CONDA_ENV
    threads: config["runtime"]["threads_per_job"]
    resources:
        **job_resources("train"),
        gpu=config["runtime"]["gpus_per_job"],  # read by the SLURM plugin (--gpus)
    params:
        code=code_hash("lengen.train.train"),  # reruns when the code it runs changes
        spec=lambda w: to_json(
            tasks.generation_spec(config, w.experiment, w.variant, int(w.setting[1:]), int(w.run))
        ),
        launcher=launcher(config),
        out=out_dir,
    shell:
        "{params.launcher} lengen.train.train --spec {params.spec:q}"
        " --out {params.out:q} > {log:q} 2>&1"


rule generation_train_group:
    # Up to FUSE_RUNS runs of one variant (its jumps / depths and seeds share every shape) trained
    # as one fused model (one job, one GPU): each run's model.pt, spec.json and MLflow run in its
    # own folder, as alone.
    input:
        f"{RESULTS}/mlflow/{{experiment}}.ready",
    output:
        touch(f"{RESULTS}/{{experiment}}/{{variant}}/fused{{group}}.done"),
    log:
        f"{LOGS}/{{experiment}}/train_{{variant}}_fused{{group}}.log",
    benchmark:
        f"{BENCHMARKS}/{{experiment}}/train_{{variant}}_fused{{group}}.tsv"
    wildcard_constraints:
        experiment=GENERATION_WILDCARDS["experiment"],
        group=r"\d+",
    conda:
        CONDA_ENV
    threads: config["runtime"]["threads_per_job"]
    resources:
        **job_resources("train"),
        gpu=config["runtime"]["gpus_per_job"],  # read by the SLURM plugin (--gpus)
    params:
        code=code_hash("lengen.train.group"),  # reruns when the code it runs changes
        specs=lambda w: to_json(
            [
                tasks.generation_spec(config, w.experiment, w.variant, value, run)
                for value, run in fused_group(w)
            ]
        ),
        outs=lambda w: " ".join(
            shlex.quote(generation_run(w, run, value)) for value, run in fused_group(w)
        ),
    shell:
        "python -m lengen.train.group --specs {params.specs:q} --out {params.outs}"
        " > {log:q} 2>&1"


if FUSE_RUNS == 1:

    rule generation_eval:
        # Greedy generation from the prompt over the test lengths; exact-match accuracy per length.
        input:
            trained,
        output:
            f"{RESULTS}/{{experiment}}/{{variant}}/{{setting}}/seed{{run}}/eval.csv",
        log:
            f"{LOGS}/{{experiment}}/eval_{{variant}}_{{setting}}_seed{{run}}.log",
        benchmark:
            f"{BENCHMARKS}/{{experiment}}/eval_{{variant}}_{{setting}}_seed{{run}}.tsv"
        wildcard_constraints:
            **GENERATION_WILDCARDS,
        conda:
            CONDA_ENV
        resources:
            **job_resources("eval"),
        params:
            code=code_hash("lengen.analysis.evaluate"),  # reruns when the code it runs changes
            eval=lambda w: to_json(tasks.variant_section(config[w.experiment], w.variant)["eval"]),
            seed=config["seed"],
            model=lambda w: os.path.join(generation_run(w), "model.pt"),
        shell:
            "python -m lengen.analysis.evaluate generate --model {params.model:q}"
            " --eval {params.eval:q} --seed {params.seed} --out {output:q} > {log:q} 2>&1"

else:

    rule generation_eval_group:
        # A fused group's evaluation in one pass (issue 45): its members that share a test set
        # (one jump / depth) decode it as one fused model; each member's table lands beside its
        # model.pt, for generation_eval to take.
        input:
            f"{RESULTS}/{{experiment}}/{{variant}}/fused{{group}}.done",
        output:
            touch(f"{RESULTS}/{{experiment}}/{{variant}}/fused{{group}}.evaluated"),
        log:
            f"{LOGS}/{{experiment}}/eval_{{variant}}_fused{{group}}.log",
        benchmark:
            f"{BENCHMARKS}/{{experiment}}/eval_{{variant}}_fused{{group}}.tsv"
        wildcard_constraints:
            experiment=GENERATION_WILDCARDS["experiment"],
            group=r"\d+",
        conda:
            CONDA_ENV
        resources:
            **job_resources("eval"),
        params:
            code=code_hash("lengen.analysis.evaluate"),  # reruns when the code it runs changes
            eval=lambda w: to_json(tasks.variant_section(config[w.experiment], w.variant)["eval"]),
            seed=config["seed"],
            models=lambda w: " ".join(
                shlex.quote(os.path.join(generation_run(w, run, value), "model.pt"))
                for value, run in fused_group(w)
            ),
            outs=lambda w: " ".join(
                shlex.quote(os.path.join(generation_run(w, run, value), FUSED_EVAL))
                for value, run in fused_group(w)
            ),
        shell:
            "python -m lengen.analysis.evaluate generate --model {params.models}"
            " --eval {params.eval:q} --seed {params.seed} --out {params.outs} > {log:q} 2>&1"

    rule generation_eval:
        # One run's table from its fused group's evaluation (a copy: the file every table and
        # figure rule reads, as in a tier without fusion).
        input:
            lambda w: fused_marker(w, "evaluated"),
        output:
            f"{RESULTS}/{{experiment}}/{{variant}}/{{setting}}/seed{{run}}/eval.csv",
        wildcard_constraints:
            **GENERATION_WILDCARDS,
        params:
            table=lambda w: os.path.join(generation_run(w), FUSED_EVAL),
        shell:
            "cp {params.table:q} {output:q}"


rule generation_table:
    # Every run's accuracy in one tidy table per experiment.
    input:
        lambda w: generation_evals(w.experiment),
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
        experiment=GENERATION_WILDCARDS["experiment"],
    conda:
        CONDA_ENV
    resources:
        **job_resources("small"),
    params:
        code=code_hash("lengen.analysis.evaluate"),  # reruns when the code it runs changes
        lengths=lambda w: eval_lengths(w.experiment),  # the grid every table is checked against
    shell:
        "python -m lengen.analysis.evaluate combine --tables {input:q} --lengths {params.lengths:q}"
        " --out {output:q} > {log:q} 2>&1"
