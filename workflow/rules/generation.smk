# The evaluation of every task scored by greedy generation (lengen.tasks.generation_tasks): the
# scratchpad tasks with Predictive Position Coupling (Sec. 5.2: parity with jumps, Figs. 2, 8;
# variable assignment, Fig. 3a-d) and majority. One rule set for all; `variants` in the config
# pick the position scheme (ppc / absolute / rope_pose / ...) and, for variable assignment, the
# scratchpad. Their training and tables are the synthetic rules' (synthetic.smk).
GENERATION_OUTPUTS = [artifacts.table(config, exp) for exp in GENERATION_TASKS if exp in config]


GENERATION_WILDCARDS = {
    "experiment": "|".join(GENERATION_TASKS),
    "setting": "|".join(rf"{t.SETTING.prefix}\d+" for t in GENERATION_TASKS.values()),
    "run": r"\d+",
}


FUSED_EVAL = "eval_fused.csv"  # a member's table as its group's evaluation wrote it


if plan.fuse_runs(config) == 1:  # each run alone: its own evaluation

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
            **gpus(EVAL_GPUS),
        params:
            # reruns when the code it runs changes (its own task's, not the others')
            code=lambda w: code_hash("lengen.analysis.evaluate", task=w.experiment),
            eval=lambda w: to_json(tasks.variant_section(config[w.experiment], w.variant)["eval"]),
            seed=config["seed"],
            model=lambda w: run_of(w).model(config),
            devices=on_devices,
        shell:
            "{params.devices}python -m lengen.analysis.evaluate generate --model {params.model:q}"
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
            **gpus(EVAL_GPUS),
        params:
            # reruns when the code it runs changes (its own task's, not the others')
            code=lambda w: code_hash("lengen.analysis.evaluate", task=w.experiment),
            eval=lambda w: to_json(tasks.variant_section(config[w.experiment], w.variant)["eval"]),
            seed=config["seed"],
            devices=on_devices,
            models=lambda w: " ".join(shlex.quote(run.model(config)) for run in members(w)),
            outs=lambda w: " ".join(
                shlex.quote(f"{run.folder(config)}/{FUSED_EVAL}") for run in members(w)
            ),
        shell:
            "{params.devices}python -m lengen.analysis.evaluate generate --model {params.models}"
            " --eval {params.eval:q} --seed {params.seed} --out {params.outs} > {log:q} 2>&1"

    rule generation_eval:
        # One run's table from its fused group's evaluation (a copy: the file every table and
        # figure rule reads, as in a tier without fusion).
        input:
            evaluated,
        output:
            f"{RESULTS}/{{experiment}}/{{variant}}/{{setting}}/seed{{run}}/eval.csv",
        wildcard_constraints:
            **GENERATION_WILDCARDS,
        params:
            table=lambda w: f"{run_of(w).folder(config)}/{FUSED_EVAL}",
        shell:
            "cp {params.table:q} {output:q}"
