"""A lost or replaced MLflow store heals on a plain rerun (lengen.core.stores): its setup markers
record the store they mark, the workflow drops stale ones, and a new marker reruns no training
(the jobs read it as `ancient`)."""

from __future__ import annotations

import json
import shutil
import sqlite3

from lengen.core import stores

from .conftest import ROOT
from .test_workflow import snakemake


def _store(tmp_path):
    results = tmp_path / "results"
    (results / "mlflow").mkdir(parents=True)
    db = results / "mlflow.db"
    sqlite3.connect(db).close()
    uri = f"sqlite:///{db}"
    done = {"uri": uri, "store": stores.identity(uri)}
    (results / "mlflow.ready").write_text(json.dumps(done))
    (results / "mlflow" / "sparse_parity.ready").write_text("{}")
    return results, db, uri


def test_markers_are_stale_when_their_store_is_gone_or_replaced(tmp_path):
    results, db, uri = _store(tmp_path)
    assert stores.stale_markers(results, uri) == ([], "")  # the store they were made for
    copy = db.with_suffix(".copy")
    shutil.copy(db, copy)
    copy.replace(db)  # another file in its place (a restored backup): another inode
    markers, why = stores.stale_markers(results, uri)
    assert why == f"MLflow store {db} was replaced since its setup ran"
    assert markers == [results / "mlflow.ready", results / "mlflow" / "sparse_parity.ready"]
    db.unlink()
    assert stores.stale_markers(results, uri)[1] == f"MLflow store {db} is gone"
    # a tracking server is not a file: never judged; no marker yet: nothing to drop
    assert stores.stale_markers(results, "http://mlflow:5000") == ([], "")
    assert stores.stale_markers(tmp_path / "fresh", uri) == ([], "")
    # a marker of older code (no record) is judged by the file alone
    sqlite3.connect(db).close()
    (results / "mlflow.ready").write_text("not json")
    assert stores.stale_markers(results, uri) == ([], "")


def test_a_plain_rerun_after_a_lost_store_reruns_its_setup(tmp_path):
    """The drill: mlflow.db deleted after its setup ran. The next run names the lost store in one
    line and plans the setup rules again, which make the store and the experiment again; every
    job that reads a marker reads it as `ancient`, so the new marker reruns no training."""
    cfg = str(ROOT / "config" / "smoke.yaml")
    ready = "results/smoke/mlflow/sparse_parity.ready"
    snakemake(tmp_path, ready, "--cores", "1", "--configfile", cfg)
    assert "Nothing to be done" in snakemake(tmp_path, ready, "-n", "--configfile", cfg).stdout
    (tmp_path / "results" / "smoke" / "mlflow.db").unlink()
    dry = snakemake(tmp_path, ready, "-n", "--configfile", cfg)
    assert "mlflow.db is gone: its setup runs again" in dry.stderr
    assert "mlflow_store" in dry.stdout and "mlflow_setup" in dry.stdout
    snakemake(tmp_path, ready, "--cores", "1", "--configfile", cfg)
    done = json.loads((tmp_path / "results" / "smoke" / "mlflow.ready").read_text())
    assert done["store"]["inode"] == (tmp_path / "results" / "smoke" / "mlflow.db").stat().st_ino
    rules = "".join(
        p.read_text() for p in (ROOT / "workflow" / "rules").glob("*.smk") if p.name != "mlflow.smk"
    )  # the setup rules write the markers
    reads = [line for line in rules.splitlines() if ".ready" in line and "output" not in line]
    marker_inputs = [x for x in reads if "mlflow/" in x or "FIGURE_JOBS" in x]
    assert marker_inputs and all("ancient(" in x for x in marker_inputs), marker_inputs
