# Natural language (Sec. 5.3, App. F): C4-format corpus, tokens, h_short (context L, PoSE for the
# final steps) and h_long (context Lbar), Table 1 perplexities, leave-one-out influence (Eq. 6)
# and Figs. 4-6.
NL = config.get("natural_language")
NL_DIR = f"{RESULTS}/{tasks.get('natural_language').RESULTS_SUBDIR}"
NL_TOKENS = [f"{NL_DIR}/tokens/{name}" for name in ("train.bin", "validation.bin", "meta.json")]
NL_TABLE = artifacts.table(config, "perplexity")
NL_CHUNKS = artifacts.table(config, "perplexity_chunks")  # the report's paired bootstrap
NL_WINDOW = artifacts.table(config, "perplexity_window")  # NL-T1w: full context vs a window
NL_INFLUENCE = artifacts.table(config, "influence")
NL_OUTPUTS = (
    [NL_TABLE, NL_TABLE.replace(".csv", ".md"), NL_CHUNKS, NL_WINDOW, NL_INFLUENCE] if NL else []
)
NL_TRAINING = (  # each training job's output -> the folder it trains (plan.unfinished)
    {f"{NL_DIR}/h_{w}/model.pt": [f"{NL_DIR}/h_{w}"] for w in ("short", "long")} if NL else {}
)
# App. F's models span several GPUs: natural_language.gpus_per_job overrides the runtime's
NL_GPUS = NL.get("gpus_per_job", config["runtime"]["gpus_per_job"]) if NL else 0


rule natural_language_corpus:
    # C4-format shards (docstrings or Debian text offline, or a link to real C4), with sources.json
    output:
        f"{NL_DIR}/corpus/sources.json",
    log:
        f"{LOGS}/natural_language/corpus.log",
    benchmark:
        f"{BENCHMARKS}/natural_language/corpus.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("natural_language_data"),
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=code_hash("lengen.data.corpus", task="natural_language"),
        corpus=lambda w: to_json(NL["corpus"]),
        seed=config["seed"],
        out=out_dir,
    shell:
        "python -m lengen.data.corpus --corpus {params.corpus:q} --seed {params.seed}"
        " --out {params.out:q} > {log:q} 2>&1"


rule natural_language_tokens:
    # tokenizer (HF format) and one uint16 token file per split, tokenized once
    input:
        f"{NL_DIR}/corpus/sources.json",
    output:
        NL_TOKENS,
    log:
        f"{LOGS}/natural_language/tokens.log",
    benchmark:
        f"{BENCHMARKS}/natural_language/tokens.tsv"
    conda:
        CONDA_ENV
    # as every other job: one asking for more cores than the rest waits until every running job has
    # ended (each freed core starts a one-core job). Rayon still uses every core the job sees; the
    # token files do not depend on it (RAYON_NUM_THREADS 1 and 2: byte-equal)
    threads: config["runtime"]["threads_per_job"]
    resources:
        **job_resources("natural_language_data"),
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=code_hash("lengen.data.tokens", task="natural_language"),
        tokenizer=lambda w: to_json(NL["tokenizer"]),
        source=lambda w: NL["corpus"]["source"],
        max_tokens=lambda w: to_json(NL["max_tokens"]),
        corpus=lambda w, input: os.path.dirname(input[0]),
        out=out_dir,
    shell:
        "python -m lengen.data.tokens --tokenizer {params.tokenizer:q} --source {params.source}"
        " --corpus-dir {params.corpus:q} --max-tokens {params.max_tokens:q}"
        " --out {params.out:q} > {log:q} 2>&1"


rule natural_language_train:
    # h_short or h_long through DeepSpeed; resumes from ckpt/ after a crash
    input:
        NL_TOKENS,
        ancient(f"{RESULTS}/mlflow/natural_language.ready"),
        force_unfinished,
    output:
        f"{NL_DIR}/h_{{which}}/model.pt",
    log:
        f"{LOGS}/natural_language/train_{{which}}.log",
    benchmark:
        f"{BENCHMARKS}/natural_language/train_{{which}}.tsv"
    wildcard_constraints:
        which="short|long",
    conda:
        CONDA_ENV
    threads: config["runtime"]["threads_per_job"]
    resources:
        **job_resources("natural_language_train", nl_steps),
        **gpus(NL_GPUS),  # one node, DeepSpeed across its GPUs
        nodes=1,
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=code_hash("lengen.train.train", task="natural_language"),
        spec=lambda w: to_json(tasks.get("natural_language").train_spec(config, w.which)),
        launcher=launcher(config, NL_GPUS),
        devices=on_devices,
        out=out_dir,
    shell:
        "{params.devices}{params.launcher} lengen.train.train --spec {params.spec:q} --out {params.out:q}"
        " > {log:q} 2>&1"


rule natural_language_perplexity:
    # Table 1: perplexity of both models at every eval length, with the paper's numbers
    input:
        short=f"{NL_DIR}/h_short/model.pt",
        long=f"{NL_DIR}/h_long/model.pt",
        tokens=f"{NL_DIR}/tokens/validation.bin",
    output:
        csv=report(NL_TABLE, caption="../report/tables.rst", category="Tables"),  # Table 1
        md=NL_TABLE.replace(".csv", ".md"),
        chunks=NL_CHUNKS,
    log:
        f"{LOGS}/natural_language/perplexity.log",
    benchmark:
        f"{BENCHMARKS}/natural_language/perplexity.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("natural_language_eval"),
        **gpus(EVAL_GPUS),
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=code_hash("lengen.analysis.perplexity", task="natural_language"),
        devices=on_devices,
        eval=lambda w: to_json(NL["eval"]),
    shell:
        "{params.devices}python -m lengen.analysis.perplexity --short {input.short:q} --long {input.long:q}"
        " --tokens {input.tokens:q} --eval {params.eval:q} --out {output.csv:q}"
        " --out-chunks {output.chunks:q} > {log:q} 2>&1"


rule natural_language_window:
    # NL-T1w: h_short's NLL on tokens L + 1 .. Lbar with the whole chunk before them vs with a
    # sliding window of L tokens (what Table 1's 64-vs-128 comparison cannot tell apart)
    input:
        model=f"{NL_DIR}/h_short/model.pt",
        tokens=f"{NL_DIR}/tokens/validation.bin",
    output:
        NL_WINDOW,
    log:
        f"{LOGS}/natural_language/window.log",
    benchmark:
        f"{BENCHMARKS}/natural_language/window.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("natural_language_eval"),
        **gpus(EVAL_GPUS),
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=code_hash("lengen.analysis.perplexity", task="natural_language"),
        devices=on_devices,
        eval=lambda w: to_json(NL["eval"]),
        window=lambda w: NL["short_context"],
    shell:
        "{params.devices}python -m lengen.analysis.perplexity window --model {input.model:q} --name h_short"
        " --tokens {input.tokens:q} --eval {params.eval:q} --window {params.window}"
        " --out {output:q} > {log:q} 2>&1"


rule natural_language_influence:
    # Eq. (6) leave-one-out J for both models; L_short, L_long, L_short,sparse per pair
    input:
        short=f"{NL_DIR}/h_short/model.pt",
        long=f"{NL_DIR}/h_long/model.pt",
        tokens=f"{NL_DIR}/tokens/validation.bin",
    output:
        NL_INFLUENCE,
    log:
        f"{LOGS}/natural_language/influence.log",
    benchmark:
        f"{BENCHMARKS}/natural_language/influence.tsv"
    conda:
        CONDA_ENV
    resources:
        **job_resources("natural_language_eval"),
        **gpus(EVAL_GPUS),
    params:
        # reruns when the code it runs changes (its own task's, not the others')
        code=code_hash("lengen.analysis.influence", task="natural_language"),
        devices=on_devices,
        # test sequences follow the perplexity chunks in the held-out split
        influence=lambda w: to_json(
            {
                **NL["influence"],
                "short_len": NL["short_context"],
                "long_len": NL["long_context"],
                "offset": NL["eval"]["n_chunks"] * (NL["long_context"] + 1),
            }
        ),
    shell:
        "{params.devices}python -m lengen.analysis.influence --short {input.short:q} --long {input.long:q}"
        " --tokens {input.tokens:q} --influence {params.influence:q} --out {output:q} > {log:q} 2>&1"
