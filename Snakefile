# lengen: reproduction of "The Role of Sparsity for Length Generalization in Transformers"
# (Golowich et al., 2025). `snakemake --cores all` runs the default (CPU) tier;
# `snakemake --configfile config/<tier>.yaml ...` another tier. See README.md.

# A `--configfile` is the whole config: Snakemake would merge it over config/config.yaml, so a key
# it leaves out would silently take the default tier's value. The default tier's file is read only
# when the command line names none; validation then names whatever is missing.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/mlflow.smk"
include: "workflow/rules/synthetic.smk"
include: "workflow/rules/sparse_parity.smk"
include: "workflow/rules/generation.smk"
include: "workflow/rules/theory.smk"
include: "workflow/rules/natural_language.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"


# Trainings that began and did not end (a kill of a forced rerun, a deleted model.pt), found on
# disk and named here; their jobs are forced once the DAG is built (common.smk: force_unfinished).
UNFINISHED = plan.unfinished({**plan.training_jobs(config), **NL_TRAINING})
if workflow.is_main_process:
    for output, found in UNFINISHED.items():
        print(f"unfinished training: {found}; {output} reruns", file=sys.stderr)


# report.html opens on the result: its front page is REPORT.md rendered (REPORT.html, written by
# the report rule), once there is one
if os.path.exists(f"{REPORTS}/{artifacts.REPORT_HTML}"):

    report: "workflow/report/front.rst"


rule all:
    default_target: True
    input:
        FIGURE_OUTPUTS,
        SPARSE_PARITY_TABLE,
        SPARSE_PARITY_DIAGNOSTIC,
        SPARSE_PARITY_SCHEMES,
        GENERATION_OUTPUTS,
        THEORY_OUTPUTS,
        NL_OUTPUTS,
        REPORT,
