# lengen: reproduction of "The Role of Sparsity for Length Generalization in Transformers"
# (Golowich et al., 2025). `snakemake --cores all` runs the default (CPU) tier;
# `snakemake --configfile config/<tier>.yaml ...` another tier. See README.md.

configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/sparse_parity.smk"
include: "workflow/rules/scratchpad.smk"
include: "workflow/rules/theory.smk"
include: "workflow/rules/natural_language.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        SPARSE_PARITY_FIGURES,
        SPARSE_PARITY_TABLE,
        SPARSE_PARITY_DIAGNOSTIC,
        SCRATCHPAD_OUTPUTS,
        THEORY_OUTPUTS,
        NL_OUTPUTS,
        REPORT,
    default_target: True
