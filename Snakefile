# lengen: reproduction of "The Role of Sparsity for Length Generalization in Transformers"
# (Golowich et al., 2025). `snakemake --cores all` runs the default (CPU) tier;
# `snakemake --configfile config/<tier>.yaml ...` another tier. See README.md.

configfile: "config/config.yaml"


# A `--configfile` is the whole config: Snakemake would merge it over config/config.yaml, so a key
# it leaves out would silently take the default tier's value. Start again from the command line's
# config files (and --config), and let validation name whatever is missing.
if workflow.overwrite_configfiles:
    config.clear()
    config.update(workflow.config_settings.overwrite_config)


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
        SPARSE_PARITY_SCHEMES,
        SCRATCHPAD_OUTPUTS,
        THEORY_OUTPUTS,
        NL_OUTPUTS,
        REPORT,
    default_target: True
