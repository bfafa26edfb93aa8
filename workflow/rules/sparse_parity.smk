# Sparse parity (Sec. 5.1, App. E.1): Fig. 1 (K_train 8, 10) and Fig. 7 (K_train 4, 6, 12): its
# test set, evaluation and diagnostics. Its training and table are the synthetic rules'
# (synthetic.smk).
SP = config["sparse_parity"]
SP_DIR = f"{RESULTS}/sparse_parity"
SPARSE_PARITY_TABLE = artifacts.table(config, "sparse_parity")
SP_VARIANTS = list(SP["variants"])  # each variant trains every K_train (a figure row each)
SP_SCHEMES = SP.get("schemes")  # extra figure (not in the paper): NoPE / ALiBi at one K_train
SP_SCHEMES_MODELS = (  # the extra figure's (not in the paper): NoPE / ALiBi at one K_train
    ([*SP_VARIANTS, *SP_SCHEMES["variants"]], [SP_SCHEMES["k_train"]]) if SP_SCHEMES else ([], [])
)


wildcard_constraints:
    variant="[a-z][a-z0-9_]*",
    K=r"\d+",
    run=r"\d+",


rule sparse_parity_testset:
    # Fixed test draws per (2l, k_test), written once so every model sees the same examples.
    output:
        f"{SP_DIR}/testset.npz",
    log:
        f"{LOGS}/sparse_parity/testset.log",
    benchmark:
        f"{BENCHMARKS}/sparse_parity/testset.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("small"),
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=code_hash("lengen.analysis.tables", task="sparse_parity"),
        # Only what the draw depends on: changing eval.batch_size keeps the test set.
        eval=lambda w: to_json(
            {key: SP["eval"][key] for key in ("lengths", "k_test", "n_examples")}
        ),
        n=SP["n"],
        seed=config["seed"],
    shell:
        "python -m lengen.analysis.tables testset --experiment sparse_parity --eval {params.eval:q}"
        " --n {params.n} --seed {params.seed} --out {output:q} > {log:q} 2>&1"


rule sparse_parity_eval:
    # Final-token accuracy over the test grid, batched by length.
    input:
        trained=trained,
        testset=f"{SP_DIR}/testset.npz",
    output:
        f"{SP_DIR}/{{variant}}/K{{K}}/seed{{run}}/eval.csv",
    log:
        f"{LOGS}/sparse_parity/eval_{{variant}}_K{{K}}_seed{{run}}.log",
    benchmark:
        f"{BENCHMARKS}/sparse_parity/eval_{{variant}}_K{{K}}_seed{{run}}.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("eval"),
        **gpus(EVAL_GPUS),
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=code_hash("lengen.analysis.evaluate", task="sparse_parity"),
        batch_size=SP["eval"]["batch_size"],
        model=f"{SP_DIR}/{{variant}}/K{{K}}/seed{{run}}/model.pt",
        devices=on_devices,
    shell:
        "{params.devices}python -m lengen.analysis.evaluate run --model {params.model:q} --testset {input.testset:q}"
        " --batch-size {params.batch_size} --out {output:q} > {log:q} 2>&1"


SP_ATTENTION = SP["figures"].get("attention")
SPARSE_PARITY_DIAGNOSTIC = (  # the tables; their figures are the figure rule's
    expand(f"{REPORTS}/sparse_parity_attention_{{v}}.csv", v=SP_VARIANTS) if SP_ATTENTION else []
)


rule sparse_parity_attention:
    # Diagnostic (lengen.analysis.attention), one per variant: attention mass of the predicting <SEP>
    # token on flagged / unflagged tokens per head vs test length; accuracy by flagged ones.
    input:
        lambda w: plan.trained(
            config, plan.Run("sparse_parity", w.variant, SP_ATTENTION["k_train"], 0)  # run 0
        ),
    output:
        f"{REPORTS}/sparse_parity_attention_{{variant}}.csv",
    log:
        f"{LOGS}/sparse_parity/attention_{{variant}}.log",
    benchmark:
        f"{BENCHMARKS}/sparse_parity/attention_{{variant}}.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("eval"),
        **gpus(EVAL_GPUS),
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=code_hash("lengen.analysis.attention", task="sparse_parity"),
        devices=on_devices,
        model=lambda w: f"{SP_DIR}/{w.variant}/K{SP_ATTENTION['k_train']}/seed0/model.pt",
        lengths=lambda w: " ".join(map(str, SP_ATTENTION["lengths"])),
        k=lambda w: " ".join(map(str, SP_ATTENTION["k_test"])),
        n=lambda w: SP_ATTENTION["n_examples"],
        seed=config["seed"],
    shell:
        "{params.devices}python -m lengen.analysis.attention --model {params.model:q} --lengths {params.lengths}"
        " --k {params.k} --n-examples {params.n} --seed {params.seed} --out-table {output:q}"
        " > {log:q} 2>&1"


# Extra figure's table (not in the paper): NoPE and ALiBi beside the variants at its K_train.
SPARSE_PARITY_SCHEMES = [artifacts.table(config, "sparse_parity_schemes")] if SP_SCHEMES else []


rule sparse_parity_schemes_table:
    # The extra figure's models and the variants at its K_train, in one tidy table.
    input:
        plan.evals(config, "sparse_parity", *SP_SCHEMES_MODELS),
    output:
        artifacts.table(config, "sparse_parity_schemes"),
    log:
        f"{LOGS}/sparse_parity/schemes_table.log",
    benchmark:
        f"{BENCHMARKS}/sparse_parity/schemes_table.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("small"),
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=code_hash("lengen.analysis.tables", task="sparse_parity"),
        lengths=eval_lengths("sparse_parity"),  # the grid every table is checked against
    shell:
        "python -m lengen.analysis.tables combine --tables {input:q} --lengths {params.lengths:q}"
        " --out {output:q} > {log:q} 2>&1"
