"""The ground floor: plain types and pure functions every stage shares, importing nothing else of
lengen (and neither torch nor mlflow at import time), so that reading and validating a config
stays cheap.

- `batch`: the batch format (what the model is fed, token for token);
- `positions`: the position-scheme table and its numpy ID functions (Sec. 2.2, 5.2);
- `specs`: the typed run spec, and the sections every job shares (runtime, tracking);
- `provenance`: config hash, versions, git commit stamped on every result;
- `tracking`: the MLflow store (it imports mlflow: only the jobs that log import it);
- `device`: where evaluation runs;
- `floats`: the CPU float environment the committed references are made in;
- `stats`: bootstrap helpers the analysis and the report share;
- `contexts`: Eq. (6)'s contexts as boolean keep-masks (Figs. 4-6);
- `claims`: the report's claim and measurement types (a task states its own claims).

Stages above: tasks, model, data -> train, analysis -> config (the job plan) -> report, cli.
tests/test_layers.py holds the order (an import-linter contract in pyproject.toml).
"""
