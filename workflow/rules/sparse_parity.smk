# Sparse parity (Sec. 5.1, App. E.1): Fig. 1 (K_train 8, 10) and Fig. 7 (K_train 4, 6, 12).
SP = config["sparse_parity"]
SP_DIR = f"{RESULTS}/sparse_parity"
SPARSE_PARITY_FIGURES = [artifacts.figure(config, f"{fig}_sparse_parity") for fig in ("fig1", "fig7")]
SPARSE_PARITY_TABLE = artifacts.table(config, "sparse_parity")
FIG_K = {"fig1": SP["figures"]["fig1"], "fig7": SP["figures"]["fig7"]}
SP_VARIANTS = list(SP["variants"])  # each variant trains every K_train (a figure row each)


wildcard_constraints:
    variant="[a-z][a-z0-9_]*",
    K=r"\d+",


rule sparse_parity_testset:
    # Fixed test draws per (2l, k_test), written once so every model sees the same examples.
    output:
        f"{SP_DIR}/testset.npz",
    params:
        # Only what the draw depends on: changing eval.batch_size keeps the test set.
        eval=lambda w: to_json(
            {key: SP["eval"][key] for key in ("lengths", "k_test", "n_examples")}
        ),
        n=SP["n"],
        seed=config["seed"],
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/sparse_parity/testset.tsv",
    log:
        f"{LOGS}/sparse_parity/testset.log",
    shell:
        "{PY} -m lengen.evaluate testset --eval {params.eval:q} --n {params.n}"
        " --seed {params.seed} --out {output} > {log} 2>&1"


rule sparse_parity_train:
    # One model per (variant, K_train); resumes from its ckpt/ after a crash.
    input:
        f"{RESULTS}/mlflow/sparse_parity.ready",
    output:
        f"{SP_DIR}/{{variant}}/K{{K}}/model.pt",
    params:
        spec=lambda w: to_json(specs.sparse_parity_train(config, int(w.K), w.variant)),
        launcher=launcher(config),
    threads: config["runtime"]["threads_per_job"]
    resources:
        gpu=config["runtime"]["gpus_per_job"],  # read by the SLURM plugin (--gpus)
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/sparse_parity/train_{{variant}}_K{{K}}.tsv",
    log:
        f"{LOGS}/sparse_parity/train_{{variant}}_K{{K}}.log",
    shell:
        "{params.launcher} lengen.train --spec {params.spec:q}"
        " --out {SP_DIR}/{wildcards.variant}/K{wildcards.K}"
        " > {log} 2>&1"


rule sparse_parity_eval:
    # Final-token accuracy over the test grid, batched by length.
    input:
        model=f"{SP_DIR}/{{variant}}/K{{K}}/model.pt",
        testset=f"{SP_DIR}/testset.npz",
    output:
        f"{SP_DIR}/{{variant}}/K{{K}}/eval.csv",
    params:
        batch_size=SP["eval"]["batch_size"],
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/sparse_parity/eval_{{variant}}_K{{K}}.tsv",
    log:
        f"{LOGS}/sparse_parity/eval_{{variant}}_K{{K}}.log",
    shell:
        "{PY} -m lengen.evaluate run --model {input.model} --testset {input.testset}"
        " --batch-size {params.batch_size} --out {output} > {log} 2>&1"


rule sparse_parity_figure:
    # Fig. 1 / Fig. 7: accuracy vs test length, one line per k_test, one panel per K_train.
    input:
        lambda w: expand(f"{SP_DIR}/{{v}}/K{{K}}/eval.csv", v=SP_VARIANTS, K=FIG_K[w.fig]),
    output:
        report(
            f"{REPORTS}/{{fig}}_sparse_parity.png",
            caption="../report/fig_sparse_parity.rst",
            category="Sparse parity",
        ),
    wildcard_constraints:
        fig="fig1|fig7",
    params:
        title=lambda w: f"{w.fig.replace('fig', 'Fig. ')}: sparse parity ({config['tier']} tier)",
        style=to_json(SP["figures"].get("style", {})),
        train_range=f"{SP['train_min_len']} {SP['train_max_len']}",
        labels=to_json([[v, SP["variants"][v]["label"]] for v in SP_VARIANTS]),  # config order
        tracking=figure_tracking("sparse_parity"),
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/sparse_parity/{{fig}}.tsv",
    log:
        f"{LOGS}/sparse_parity/{{fig}}.log",
    shell:
        "{PY} -m lengen.figures sparse_parity --tables {input} --title {params.title:q}"
        " --style {params.style:q} --train-range {params.train_range} --labels {params.labels:q}"
        " {params.tracking} --out {output} > {log} 2>&1"


rule sparse_parity_table:
    # Every model's accuracy in one tidy table (k_train, length, k_test, n, accuracy, ...).
    input:
        expand(f"{SP_DIR}/{{v}}/K{{K}}/eval.csv", v=SP_VARIANTS, K=SP["k_train"]),
    output:
        SPARSE_PARITY_TABLE,
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/sparse_parity/table.tsv",
    log:
        f"{LOGS}/sparse_parity/table.log",
    shell:
        "{PY} -m lengen.evaluate combine --tables {input} --out {output} > {log} 2>&1"


SP_ATTENTION = SP["figures"].get("attention")
SPARSE_PARITY_DIAGNOSTIC = (
    expand(f"{REPORTS}/sparse_parity_attention_{{v}}.{{ext}}", v=SP_VARIANTS, ext=["png", "csv"])
    if SP_ATTENTION
    else []
)


rule sparse_parity_attention:
    # Diagnostic (lengen.attention), one per variant: attention mass of the predicting <SEP>
    # token on flagged / unflagged tokens per head vs test length; accuracy by flagged ones.
    input:
        lambda w: f"{SP_DIR}/{w.variant}/K{SP_ATTENTION['k_train']}/model.pt",
    output:
        figure=report(
            f"{REPORTS}/sparse_parity_attention_{{variant}}.png",
            caption="../report/fig_sparse_parity_attention.rst",
            category="Sparse parity",
        ),
        table=f"{REPORTS}/sparse_parity_attention_{{variant}}.csv",
    params:
        lengths=lambda w: " ".join(map(str, SP_ATTENTION["lengths"])),
        k=lambda w: " ".join(map(str, SP_ATTENTION["k_test"])),
        n=lambda w: SP_ATTENTION["n_examples"],
        seed=config["seed"],
        title=lambda w: (
            f"Where <SEP> attends: sparse parity, K_train = {SP_ATTENTION['k_train']}, "
            f"{SP['variants'][w.variant]['label']} ({config['tier']} tier)"
        ),
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/sparse_parity/attention_{{variant}}.tsv",
    log:
        f"{LOGS}/sparse_parity/attention_{{variant}}.log",
    shell:
        "{PY} -m lengen.attention --model {input} --lengths {params.lengths} --k {params.k}"
        " --n-examples {params.n} --seed {params.seed} --title {params.title:q}"
        " --out-table {output.table} --out-figure {output.figure} > {log} 2>&1"


# Extra figure (not in the paper): NoPE and ALiBi at one K_train beside the variants at that K.
SP_SCHEMES = SP.get("schemes")
SP_SCHEME_EVALS = (
    [f"{SP_DIR}/{v}/K{SP_SCHEMES['k_train']}/eval.csv" for v in [*SP_VARIANTS, *SP_SCHEMES["variants"]]]
    if SP_SCHEMES
    else []
)
SPARSE_PARITY_SCHEMES = (
    [artifacts.figure(config, "sparse_parity_schemes"), artifacts.table(config, "sparse_parity_schemes")]
    if SP_SCHEMES
    else []
)


rule sparse_parity_schemes_table:
    # The extra figure's models and the variants at its K_train, in one tidy table.
    input:
        SP_SCHEME_EVALS,
    output:
        artifacts.table(config, "sparse_parity_schemes"),
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/sparse_parity/schemes_table.tsv",
    log:
        f"{LOGS}/sparse_parity/schemes_table.log",
    shell:
        "{PY} -m lengen.evaluate combine --tables {input} --out {output} > {log} 2>&1"


rule sparse_parity_schemes_figure:
    # Accuracy vs test length, a line per k_test, a row per position scheme, at one K_train.
    input:
        SP_SCHEME_EVALS,
    output:
        report(
            artifacts.figure(config, "sparse_parity_schemes"),
            caption="../report/fig_sparse_parity.rst",
            category="Sparse parity",
        ),
    params:
        title=lambda w: (
            f"Sparse parity, K_train = {SP_SCHEMES['k_train']}: position schemes (not in the "
            f"paper; {config['tier']} tier)"
        ),
        style=to_json(SP["figures"].get("style", {})),
        train_range=f"{SP['train_min_len']} {SP['train_max_len']}",
        labels=lambda w: to_json(
            [[v, SP["variants"][v]["label"]] for v in SP_VARIANTS]
            + [[v, e["label"]] for v, e in SP_SCHEMES["variants"].items()]
        ),
        tracking=figure_tracking("sparse_parity"),
    conda:
        CONDA_ENV
    benchmark:
        f"{BENCHMARKS}/sparse_parity/schemes_figure.tsv",
    log:
        f"{LOGS}/sparse_parity/schemes_figure.log",
    shell:
        "{PY} -m lengen.figures sparse_parity --tables {input} --title {params.title:q}"
        " --style {params.style:q} --train-range {params.train_range} --labels {params.labels:q}"
        " {params.tracking} --out {output} > {log} 2>&1"
