"""Change a value, rerun, trust the result: reruns after an edit, diverging training, bad input
(config files, job specs, paths with spaces)."""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
import sys

import pytest
import torch
import yaml

from lengen.config.config import ConfigError, load, validate
from lengen.train.train import NonFiniteLoss, train

from .conftest import ROOT


def test_a_changed_value_trains_a_new_run_and_keeps_the_old_one(tiny_spec, tmp_path):
    """Edit train.lr after a finished run, rerun into the same folder: a new MLflow run with the
    new value and a model trained with it; the old run stays FINISHED with its own value (it
    used to be reopened, refused by MLflow, and left FAILED for good)."""
    from mlflow.tracking import MlflowClient

    out = tmp_path / "run"
    spec = dict(tiny_spec, train={**tiny_spec["train"], "checkpoint_every": 2})
    train(spec, out)
    old_id = (out / "mlflow_run_id").read_text()
    (out / "ckpt" / "step_2").mkdir(parents=True)  # a crashed old run's checkpoint is no resume
    changed = dict(spec, train={**spec["train"], "lr": 5e-4})
    train(changed, out)
    new_id = (out / "mlflow_run_id").read_text()
    client = MlflowClient(tracking_uri=spec["tracking"]["uri"])
    old, new = client.get_run(old_id), client.get_run(new_id)
    assert new_id != old_id
    assert (old.info.status, new.info.status) == ("FINISHED", "FINISHED")
    assert (old.data.params["train.lr"], new.data.params["train.lr"]) == ("0.001", "0.0005")
    saved = torch.load(out / "model.pt", weights_only=False)
    assert saved["spec"]["train"]["lr"] == 5e-4
    assert json.loads((out / "spec.json").read_text())["train"]["lr"] == 5e-4
    train(changed, out)  # the same spec again: the same run goes on
    assert (out / "mlflow_run_id").read_text() == new_id


def test_a_diverging_run_stops_failed_without_a_model(tiny_spec, tmp_path):
    from mlflow.tracking import MlflowClient

    out = tmp_path / "run"
    spec = dict(tiny_spec, train={**tiny_spec["train"], "lr": 1e30, "grad_clip": 1e30})
    with pytest.raises(
        NonFiniteLoss, match=r"neox/K2/seed0 .* at step \d+: the run diverged.*lr = 1e\+30"
    ):
        train(spec, out)
    assert not (out / "model.pt").exists()
    run = MlflowClient(tracking_uri=spec["tracking"]["uri"]).get_run(
        (out / "mlflow_run_id").read_text()
    )
    assert run.info.status == "FAILED"


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_non_finite_numbers_are_rejected_naming_the_key(tmp_path, value):
    text = (ROOT / "config" / "smoke.yaml").read_text().replace("lr: 1.0e-3", f"lr: {value}", 1)
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"sparse_parity\.train\.lr: .* is not a finite number"):
        load(path)


def test_a_duplicate_yaml_key_names_file_line_and_key(tmp_path):
    text = (
        (ROOT / "config" / "smoke.yaml")
        .read_text()
        .replace("    lr: 1.0e-3\n", "    lr: 5.0\n    lr: 1.0e-3\n", 1)
    )
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    line = text.splitlines().index("    lr: 1.0e-3") + 1
    with pytest.raises(ConfigError, match=rf"dup.yaml:{line}: duplicate key 'lr' \(first on line"):
        load(path)


def test_snakemake_refuses_a_duplicate_key(tmp_path):
    text = (ROOT / "config" / "smoke.yaml").read_text().replace("seed: 0\n", "seed: 0\nseed: 1\n")
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode != 0 and "duplicate key 'seed'" in proc.stdout + proc.stderr


def _invalid(cfg: dict, key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        validate(cfg)
    assert key in str(err.value)


def test_values_the_schema_accepts_but_make_no_sense(smoke_config):
    c = copy.deepcopy(smoke_config)
    c["sparse_parity"]["eval"]["k_test"] = [30]
    _invalid(c, "sparse_parity.eval.k_test", r"\[30\] not below l = 12 .*no test example")
    c = copy.deepcopy(smoke_config)
    c["sparse_parity"]["train"]["warmup_steps"] = 7
    _invalid(c, "sparse_parity.train.warmup_steps", r"must be <= steps \(6\)")
    c = copy.deepcopy(smoke_config)
    c["sparse_parity"]["eval"]["lengths"] = [8, 24, 16]
    _invalid(c, "sparse_parity.eval.lengths", "must be increasing")
    c = copy.deepcopy(smoke_config)
    c["reports_dir"] = c["results_dir"]
    _invalid(c, "reports_dir", "must differ from results_dir")
    c["reports_dir"] = "reference/smoke"
    _invalid(c, "reports_dir", "no run writes there")


def test_the_train_entry_point_takes_a_spec_file_or_text_and_names_bad_keys(
    tiny_spec, tmp_path, capsys
):
    import signal

    from lengen.train.train import main

    sigterm = signal.getsignal(signal.SIGTERM)  # main() sets its own; put pytest's back after
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(tiny_spec))
    main(["--spec", str(path), "--out", str(tmp_path / "run")])  # the spec.json beside a model
    assert (tmp_path / "run" / "model.pt").exists()
    for spec, message in (
        ('{"experiment": ', "--spec: not valid JSON"),
        ("{}", "experiment None is not a task; known:"),
        (str(tmp_path / "missing.json"), "neither a file nor JSON text"),
        (
            json.dumps(dict(tiny_spec, train={**tiny_spec["train"], "lr": "fast"})),
            "'train': lr = 'fast' is not a",
        ),
        (
            json.dumps(dict(tiny_spec, train={**tiny_spec["train"], "lr": float("nan")})),
            "'train': lr = nan is not a \\(finite\\)",
        ),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["--spec", spec, "--out", str(tmp_path / "bad")])
        assert exit_.value.code == 2  # argparse's usage error: a message, no traceback
        assert re.search(message, capsys.readouterr().err)
    signal.signal(signal.SIGTERM, sigterm)


def test_paths_with_spaces_are_quoted_in_every_command(tmp_path, smoke_config):
    c = copy.deepcopy(smoke_config)
    c["results_dir"], c["reports_dir"] = "results/smoke run", "results/smoke run/my reports"
    path = tmp_path / "spaces.yaml"
    path.write_text(yaml.safe_dump(c))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-n",
        "-p",
        "--cores",
        "1",
        "--configfile",
        str(path),
        "--directory",
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    prefix = "Shell command: "
    commands = [line.removeprefix(prefix) for line in out.splitlines() if line.startswith(prefix)]
    assert len(commands) > 50
    for line in commands:  # as the shell splits it: no path cut at its space
        words = shlex.split(line)
        assert not any(w.endswith("/smoke") or w.startswith("run/") for w in words), line


def _prepare(args) -> str:
    """One process's first use of a fresh store (for the concurrency drill)."""
    uri, name = args
    from lengen.core import tracking

    tracking.prepare_store(uri, [name])
    return "ok"


@pytest.mark.slow
def test_concurrent_first_uses_of_a_store_leave_it_whole(tmp_path):
    """Four processes create the same fresh SQLite store at once (as jobs run with --nolock
    would): every one succeeds and the store then works (without the lock, migrations raced:
    'table _alembic_tmp_experiments already exists')."""
    import multiprocessing

    from lengen.core import tracking

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        assert pool.map(_prepare, [(uri, f"exp{i}") for i in range(4)]) == ["ok"] * 4
    assert sorted(tracking.prepare_store(uri, [f"exp{i}" for i in range(4)])) == [
        f"exp{i}" for i in range(4)
    ]


def test_a_broken_store_names_its_path_and_the_recovery(tmp_path):
    from lengen.core import tracking

    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    tracking.prepare_store(uri, ["e"])
    db.write_bytes(db.read_bytes()[:3000])  # truncated
    with pytest.raises(tracking.StoreError, match=rf"{db} is unreadable .*mv {db} {db}.broken"):
        tracking.prepare_store(uri, ["e"])
    with pytest.raises(tracking.StoreError, match="Recover"):
        tracking.start_run(uri, "e", "r", tmp_path / "run_id")


def test_an_evaluation_after_a_replaced_store_opens_a_new_run_for_its_model(tmp_path):
    """The recovery a broken store's line advises (move it aside, a new store made): the
    model's evaluation finds its training run gone and opens a new run for it from its spec.json
    (params logged, tagged with the lost run's id), whose id the folder then records; a second
    evaluation resumes that run. Without a readable spec.json: one line naming both files."""
    import json

    import mlflow

    from lengen.core import tracking

    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    tracking.prepare_store(uri, ["e"])
    model = tmp_path / "run"
    model.mkdir()
    run_file = model / "mlflow_run_id"
    spec = {"run_name": "k2/seed0", "tracking": {"uri": uri, "experiment": "e"}, "seed": 0}
    (model / "spec.json").write_text(json.dumps(spec))
    tracking.start_run(uri, "e", "k2/seed0", run_file)
    tracking.end_run()
    lost = run_file.read_text()
    db.rename(tmp_path / "mlflow.db.broken")  # the advised recovery: a new store, each job
    evaluate = (
        f"from lengen.core import tracking\n"  # a process of its own (as jobs are)
        f"tracking.prepare_store({uri!r}, ['e'])\n"
        f"tracking.resume_run({uri!r}, __import__('pathlib').Path({str(run_file)!r}))\n"
        "tracking.log_metrics({'acc_len20': 1.0})\ntracking.end_run()\n"
    )
    for _ in range(2):  # the second evaluation resumes the new run
        proc = subprocess.run([sys.executable, "-c", evaluate], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    new = run_file.read_text()
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    SqlAlchemyStore._engine_map.pop(uri).dispose()  # this process's engine: on the moved file
    run = mlflow.MlflowClient(tracking_uri=uri).get_run(new)
    assert new != lost and run.data.tags[tracking.RELOGGED_FROM] == lost
    assert run.data.params["run_name"] == "k2/seed0" and run.data.metrics["acc_len20"] == 1.0
    assert run.info.run_name == "k2/seed0"
    assert len(mlflow.MlflowClient(tracking_uri=uri).search_runs([run.info.experiment_id])) == 1
    run_file.write_text(lost)
    (model / "spec.json").write_text("{")
    with pytest.raises(
        tracking.StoreError,
        match=f"{run_file}: MLflow run {lost} is not in the "
        f"store .*{model / 'spec.json'} cannot say",
    ):
        tracking.resume_run(uri, run_file)


def test_a_failure_that_also_breaks_the_store_reports_the_first_cause(
    tiny_spec, tmp_path, monkeypatch, capsys
):
    """A full disk during a checkpoint: the store cannot record FAILED either. The error raised
    is the disk's, and the log says the run could not be closed (it used to be SQLAlchemy's)."""
    from lengen.core import tracking
    from lengen.train import train as train_mod

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    def store_full(err):
        raise RuntimeError("(sqlite3.OperationalError) database or disk is full")

    monkeypatch.setattr(train_mod, "_train", disk_full)
    monkeypatch.setattr(tracking, "close_failed_run", store_full)
    with pytest.raises(OSError, match="No space left on device"):
        train_mod.train(tiny_spec, tmp_path / "run")
    assert "the MLflow run could not be closed (RuntimeError" in capsys.readouterr().err


def test_influence_refuses_a_masked_lm_and_a_missing_directory(tmp_path, capsys):
    from transformers import BertConfig, BertForMaskedLM

    bert = tmp_path / "bert"
    cfg = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    BertForMaskedLM(cfg).save_pretrained(bert)
    text = tmp_path / "t.txt"
    text.write_text("")
    cases = (
        (["--model", str(bert), "--tokens", str(text)], "BertForMaskedLM is not a causal"),
        (["--model", str(tmp_path / "nope"), "--tokens", str(text)], "nope: not a local"),
    )
    from lengen.cli import main

    for args, message in cases:
        with pytest.raises(SystemExit) as exit_:
            main(["influence", *args, "--out", str(tmp_path / "x.csv")])
        assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_provenance_hash_depends_on_the_science_not_the_path(
    tmp_path, smoke_config, monkeypatch
):
    """The same spec built in two clones (results folders, MLflow stores) hashes the same; a
    changed value does not."""
    from lengen.core.provenance import config_hash
    from lengen.tasks import sparse_parity

    specs = []
    for clone in ("a", "b c"):
        (tmp_path / clone).mkdir()
        monkeypatch.chdir(tmp_path / clone)  # results_dir is relative: a different clone
        cfg = copy.deepcopy(smoke_config)
        specs.append(sparse_parity.train_spec(cfg, 2))
    assert specs[0]["tracking"]["uri"] != specs[1]["tracking"]["uri"]
    assert config_hash(specs[0]) == config_hash(specs[1])
    changed = dict(specs[0], train={**specs[0]["train"], "lr": 5e-4})
    assert config_hash(changed) != config_hash(specs[0])
    report_slices = [dict(smoke_config, results_dir=d, reports_dir=f"{d}/r") for d in ("x", "y")]
    assert config_hash(report_slices[0]) == config_hash(report_slices[1])
