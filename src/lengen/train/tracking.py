"""The MLflow store's setup job: workflow/rules/mlflow.smk runs `python -m lengen.train.tracking`.
The store itself is lengen.core.tracking; this entry point keeps the rule's command, and so every
result made before the move, unchanged (Snakemake reruns a rule whose command changed)."""

from lengen.core.tracking import main

if __name__ == "__main__":
    main()
