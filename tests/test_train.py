"""Trainer: learns a trivially learnable task; resume after a crash gives identical weights;
MLflow holds the run with params, loss curve and the eval table."""

from __future__ import annotations

import copy
import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from lengen import tasks
from lengen.core.batch import Example
from lengen.core.specs import EarlyStopSpec, TrainSpec
from lengen.tasks import natural_language, parse_spec, sparse_parity
from lengen.train.train import lr_lambda, train
from tests.helpers import on_device, reproducible


def _copy_task() -> types.SimpleNamespace:
    """`<BOS> a <SEP> a`: predict the token two places back (one attention hop)."""

    def train_batch(spec, rng, step):
        a = rng.integers(2, 10, size=(spec.train.batch_size, 1))
        tokens = np.concatenate([np.zeros_like(a), a, np.ones_like(a), a], axis=1)
        mask = np.zeros_like(tokens)
        mask[:, -1] = 1
        return Example(tokens, np.tile(np.arange(1, 5), (len(a), 1)), mask)

    return types.SimpleNamespace(  # its spec's task section: the tiny spec's sparse parity one
        TaskSpec=sparse_parity.TaskSpec, vocab_size=lambda spec: 10, train_batch=train_batch
    )


def test_trainer_learns_a_trivial_task(tiny_spec, tmp_path, monkeypatch, device):
    monkeypatch.setitem(tasks.REGISTRY, "copy", _copy_task())
    spec = on_device(copy.deepcopy(tiny_spec), device)
    spec["experiment"] = "copy"
    spec["train"].update(steps=60, batch_size=32, lr=1e-2, warmup_steps=5, log_every=10)
    spec["model"].update(d_model=32, n_head=2)
    path = train(spec, tmp_path / "copy")
    model_state = torch.load(path, weights_only=True)
    assert model_state["spec"]["experiment"] == "copy"
    from lengen.model.modelfile import load_model

    model = load_model(path)
    batch = _copy_task().train_batch(parse_spec(spec), np.random.default_rng(99), 0).model_inputs()
    with torch.no_grad():
        pred = model(batch["input_ids"], batch["position_ids"])[:, -1].argmax(-1)
    assert (pred == batch["labels"][:, -1]).float().mean() > 0.95


def test_resume_after_crash_gives_same_final_weights(tiny_spec, tmp_path, device):
    spec = on_device(copy.deepcopy(tiny_spec), device)
    spec["train"].update(steps=8, checkpoint_every=3)
    same = reproducible(device)
    straight = torch.load(train(spec, tmp_path / "straight"), weights_only=True)["state_dict"]
    again = torch.load(train(spec, tmp_path / "again"), weights_only=True)["state_dict"]
    for name in straight:  # same spec and seed, same numbers
        torch.testing.assert_close(straight[name], again[name], **same)
    crashed = tmp_path / "crashed"
    train(spec, crashed, stop_after=5)  # "crash" after step 5: last checkpoint is step 3
    assert not (crashed / "model.pt").exists()
    assert (crashed / "ckpt" / "latest").read_text().strip() == "step_3"
    resumed = torch.load(train(spec, crashed), weights_only=True)["state_dict"]
    assert straight.keys() == resumed.keys()
    for name in straight:
        torch.testing.assert_close(straight[name], resumed[name], **same)
    assert not (crashed / "ckpt").exists()  # checkpoints removed once model.pt is written


def test_mlflow_run_has_params_and_loss_curve(tiny_spec, tmp_path):
    from mlflow.tracking import MlflowClient

    spec = copy.deepcopy(tiny_spec)
    out = tmp_path / "run"
    train(spec, out)
    client = MlflowClient(tracking_uri=spec["tracking"]["uri"])
    run = client.get_run((out / "mlflow_run_id").read_text())
    assert run.data.params["train.lr"] == str(spec["train"]["lr"])
    assert run.data.params["task.k_train"] == "2"
    assert int(run.data.params["model.num_params"]) > 0
    history = client.get_metric_history(run.info.run_id, "train_loss")
    assert [m.step for m in history] == [2, 4, 6]
    assert run.info.status == "FINISHED"
    # which model file the run made, and artifacts kept under the tier's results dir
    from lengen.core.provenance import file_sha256

    assert run.data.tags["model_sha256"] == file_sha256(out / "model.pt")
    assert run.data.tags["model_path"] == str((out / "model.pt").resolve())
    # the model file is a registered model's version (issue 65): its source the file, not a copy
    [version] = client.search_model_versions(f"run_id='{run.info.run_id}'")
    assert version.source == str((out / "model.pt").resolve())
    assert version.tags["model_sha256"] == run.data.tags["model_sha256"]
    assert run.data.tags["model_version"] == str(version.version) == "1"
    results_dir = spec["tracking"]["uri"].removeprefix("sqlite:///").rsplit("/", 1)[0]
    assert run.info.artifact_uri.startswith(f"file://{results_dir}/mlartifacts/")


def test_lr_schedule_linear_warmup_then_decay():
    base = {"batch_size": 1, "lr": 1.0, "weight_decay": 0.0}
    f = lr_lambda(TrainSpec(warmup_steps=10, steps=110, schedule="linear", **base))
    assert f(0) == 0.1 and f(9) == 1.0 and f(10) == 1.0
    assert abs(f(60) - 0.5) < 1e-9 and f(110) == 0.0
    g = lr_lambda(TrainSpec(warmup_steps=0, steps=100, schedule="cosine", min_lr_ratio=0.1, **base))
    assert abs(g(100) - 0.1) < 1e-9 and abs(g(0) - 1.0) < 1e-9


@pytest.mark.slow
def test_two_processes_share_the_batch(tiny_spec, tmp_path):
    """Data parallel on CPU (gloo): torchrun with 2 processes trains and writes one model, with the
    weights of one process that accumulates the same two micro-batches (streams 0 and 1)."""
    import json
    import os
    import subprocess
    import sys

    spec = copy.deepcopy(tiny_spec)
    spec["train"].update(steps=4, batch_size=8)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_PORT": "29517"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "-m",
            "lengen.train.train",
            "--spec",
            json.dumps(spec),
            "--out",
            str(tmp_path / "ddp"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = torch.load(tmp_path / "ddp" / "model.pt", weights_only=True)
    assert saved["spec"]["train"]["batch_size"] == 8
    one = copy.deepcopy(spec)
    one["train"]["micro_batch_size"] = 4  # 1 process x 2 accumulated micro-batches of 4
    train(one, tmp_path / "one")
    single = torch.load(tmp_path / "one" / "model.pt", weights_only=True)["state_dict"]
    assert single.keys() == saved["state_dict"].keys()
    for name, w in saved["state_dict"].items():
        torch.testing.assert_close(w, single[name], atol=1e-5, rtol=1e-4, msg=name)
    train(spec, tmp_path / "other")  # 1 x 8 from stream 0 alone: other data, other weights
    other = torch.load(tmp_path / "other" / "model.pt", weights_only=True)["state_dict"]
    assert any((other[n] - w).abs().max() > 1e-4 for n, w in saved["state_dict"].items())


@pytest.mark.slow
def test_zero_2_over_two_processes_through_the_workflows_launcher_resumes_a_kill_9(
    tiny_spec, tmp_path
):
    """Issue 66: the paper tier's language models train 8-way under ZeRO-2 through the deepspeed
    launcher; on CPU (gloo) two processes run the very launcher line the workflow writes
    (lengen.config.plan.launcher, its port apart), with the paper's ZeRO stage and buckets. A
    kill -9 of the whole job after a checkpoint, then the same command: it resumes (ZeRO-2's
    optimizer state is split over the ranks) and writes one model.pt, one spec.json and one
    MLflow run, FINISHED, whose weights equal one process accumulating the same global batch
    (atol 1e-5, rtol 1e-4: the reduction order differs)."""
    import os
    import signal
    import subprocess
    import time

    from mlflow.tracking import MlflowClient

    from lengen.config import plan
    from lengen.config.config import load
    from lengen.core.specs import read_ds_config

    from .conftest import ROOT

    paper = load(ROOT / "config" / "paper.yaml")
    nl = paper["natural_language"]
    line = plan.launcher(paper, 2)  # the paper's 8 GPUs a job, here 2 processes
    assert line == "deepspeed --module" and nl["zero_stage"] == 2  # its devices: the job's
    spec = copy.deepcopy(tiny_spec)
    spec["train"].update(steps=300, batch_size=8, checkpoint_every=20, log_every=20)
    spec["runtime"].update(
        zero_stage=nl["zero_stage"], ds_config=read_ds_config(ROOT / nl["ds_config"])
    )
    out = tmp_path / "zero2"
    first, *rest = line.split()
    cmd = [
        first,
        "--master_port",
        "29519",
        *rest,
        "lengen.train.train",
        "--spec",
        json.dumps(spec),
        "--out",
        str(out),
    ]
    # the job's two devices, as lengen.core.gpus or SLURM names them (DeepSpeed's CPU accelerator
    # counts LOCAL_SIZE devices)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "0,1", "LOCAL_SIZE": "2"}
    job = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    deadline = time.monotonic() + 240

    def whole():  # a checkpoint renamed from step_N.partial: one a rerun resumes from
        return [p for p in (out / "ckpt").glob("step_*") if p.name[5:].isdigit()]

    while not whole() and job.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint within 240 s"
        time.sleep(0.05)
    assert job.poll() is None, "the job ended before its kill: make it longer"
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    assert not (out / "model.pt").exists()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resumed from" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "finished",
        "mlflow_run_id",
        "model.pt",
        "spec.json",
    ]
    client = MlflowClient(spec["tracking"]["uri"])
    exp = client.get_experiment_by_name(spec["tracking"]["experiment"])
    [run] = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_id == (out / "mlflow_run_id").read_text()
    saved = torch.load(out / "model.pt", weights_only=True)
    assert saved["steps_run"] == 300
    one = copy.deepcopy(spec)
    one["train"]["micro_batch_size"] = 4  # 1 process x 2 accumulated micro-batches of 4
    one["runtime"]["zero_stage"] = 0
    one["runtime"].pop("ds_config")
    single = torch.load(train(one, tmp_path / "one"), weights_only=True)["state_dict"]
    for name, w in saved["state_dict"].items():
        torch.testing.assert_close(w, single[name], atol=1e-5, rtol=1e-4, msg=name)


def test_early_stop_ends_training_at_target_and_records_it(tiny_spec, tmp_path, monkeypatch):
    """train.early_stop: a task learned by step ~40 stops at the first check run of `patience`
    passing checks, and model.pt records the steps run and the reason; without the key it runs
    every step."""
    monkeypatch.setitem(tasks.REGISTRY, "copy", _copy_task())
    spec = copy.deepcopy(tiny_spec)
    spec["experiment"] = "copy"
    spec["train"].update(steps=400, batch_size=32, lr=1e-2, warmup_steps=5, log_every=10)
    spec["train"]["early_stop"] = {"every": 20, "target_accuracy": 0.99, "patience": 2}
    spec["model"].update(d_model=32, n_head=2)
    saved = torch.load(train(spec, tmp_path / "stop"), weights_only=True)
    assert saved["steps_run"] < 400 and saved["steps_run"] % 20 == 0
    assert "exact match >= 0.99" in saved["stop_reason"]
    # a run still near chance at the plateau budget stops with "did not learn"
    spec["train"]["early_stop"] = {
        "every": 2,
        "target_accuracy": 0.99,
        "patience": 2,
        "plateau_steps": 2,
    }
    saved = torch.load(train(spec, tmp_path / "plateau"), weights_only=True)
    assert saved["steps_run"] == 2 and saved["stop_reason"].startswith("did not learn in 2 ")
    del spec["train"]["early_stop"]
    spec["train"]["steps"] = 30
    saved = torch.load(train(spec, tmp_path / "full"), weights_only=True)
    assert (saved["steps_run"], saved["stop_reason"]) == (30, "steps")


def test_early_stop_heldout_spans_training_lengths(tiny_spec):
    """n_draws: the held-out set is that many training batches, each of its own length drawn from
    the training range (one batch would judge a single length), n_examples split evenly."""
    from lengen.train.train import EarlyStop

    spec = copy.deepcopy(tiny_spec)
    spec["experiment"] = "parity_scratchpad"
    spec["task"] = {
        "jump": 1,
        "scheme": "ppc",
        "train_min_len": 10,
        "train_max_len": 40,
        "l_max": 60,
    }
    spec["train"]["early_stop"] = {
        "every": 10,
        "target_accuracy": 0.9,
        "patience": 1,
        "n_examples": 64,
        "n_draws": 8,
    }
    stop = EarlyStop(parse_spec(spec), tasks.get("parity_scratchpad"), "cpu")
    assert [len(d["input_ids"]) for d in stop.draws] == [8] * 8
    assert len({d["input_ids"].shape[1] for d in stop.draws}) >= 3


def test_early_stop_min_steps_delays_only_the_target_stop():
    """min_steps holds back the stop on accuracy (a run that must keep training after it first
    fits), never the plateau stop: checks still run from the first `every` steps."""
    from lengen.train.train import EarlyStop

    stop = EarlyStop.__new__(EarlyStop)
    stop.cfg = EarlyStopSpec(
        every=10,
        target_accuracy=0.9,
        patience=2,
        min_steps=100,
        plateau_steps=30,
        plateau_accuracy=0.5,
    )
    stop.streak = 0
    assert stop.due(10) and stop.due(20) and not stop.due(25)
    assert stop.update(1.0, 10) is None and stop.update(1.0, 20) is None  # fitted, too early
    assert stop.update(1.0, 100).startswith("held-out exact match >= 0.9")
    stop.streak = 0
    assert stop.update(0.1, 20) is None  # below the plateau bar, before the budget
    assert stop.update(0.1, 30) == "did not learn in 30 steps (held-out exact match 0.10)"


def test_a_checkpoint_cut_mid_write_is_never_resumed_and_a_damaged_one_is_named(
    tiny_spec, tmp_path, capfd
):
    """Issue 63: a checkpoint is written as step_N.partial and renamed once whole, and only the
    newest whole one is kept (two on the disk at most, not three). A write a kill cut off is
    removed and the run resumes from the whole one before it, to the weights of an uninterrupted
    run; a whole one damaged afterwards is named in the log and the run starts again from step
    0, to the same weights."""
    spec = copy.deepcopy(tiny_spec)
    spec["train"].update(steps=8, checkpoint_every=2)
    straight = torch.load(train(spec, tmp_path / "straight"), weights_only=True)["state_dict"]
    crashed = tmp_path / "crashed"
    train(spec, crashed, stop_after=5)
    assert sorted(p.name for p in (crashed / "ckpt").glob("step_*")) == ["step_4"]
    assert (crashed / "ckpt" / "latest").read_text().strip() == "step_4"
    cut = crashed / "ckpt" / "step_6.partial"  # a kill while step 6 was being written
    cut.mkdir()
    (cut / "mp_rank_00_model_states.pt").write_bytes(b"cut")
    resumed = torch.load(train(spec, crashed), weights_only=True)["state_dict"]
    err = capfd.readouterr().err
    assert "resumed from" in err and "step_4 (step 4)" in err and not cut.exists()
    for name in straight:
        torch.testing.assert_close(straight[name], resumed[name], rtol=0, atol=0)
    train(spec, tmp_path / "damaged", stop_after=5)
    for f in (tmp_path / "damaged" / "ckpt" / "step_4").glob("*.pt"):
        f.write_bytes(f.read_bytes()[:100])
    again = torch.load(train(spec, tmp_path / "damaged"), weights_only=True)["state_dict"]
    err = capfd.readouterr().err
    assert "step_4 is unreadable" in err and "training from step 0" in err
    for name in straight:
        torch.testing.assert_close(straight[name], again[name], rtol=0, atol=0)


def test_a_failed_run_is_closed_failed_not_left_running(tiny_spec, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    def broken(spec, rng, step):
        raise RuntimeError("disk full")

    broken_task = types.SimpleNamespace(
        TaskSpec=sparse_parity.TaskSpec, vocab_size=lambda spec: 10, train_batch=broken
    )
    monkeypatch.setitem(tasks.REGISTRY, "broken", broken_task)
    spec = copy.deepcopy(tiny_spec)
    spec["experiment"] = "broken"
    out = tmp_path / "broken"
    with pytest.raises(RuntimeError, match="disk full"):
        train(spec, out)
    client = MlflowClient(tracking_uri=spec["tracking"]["uri"])
    assert client.get_run((out / "mlflow_run_id").read_text()).info.status == "FAILED"


def test_ds_config_json_is_merged_over_the_computed_config(tmp_path):
    """A tier's ds_config JSON (config/ds_config_lm.json for the paper's language models) is
    read into the spec and merged key by key over the computed DeepSpeed config; a batch key
    that disagrees with the train section is an error naming it."""
    from lengen.config.config import ConfigError, load, validate
    from lengen.train.runtime import deepspeed_config

    from .conftest import ROOT

    cfg = load(ROOT / "config" / "paper.yaml")
    spec = natural_language.train_spec(cfg, "short")
    ds = deepspeed_config(parse_spec(spec), world=8)
    zero = ds["zero_optimization"]
    assert zero["stage"] == 2 and zero["overlap_comm"] and ds["bf16"] == {"enabled": True}
    assert (ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"]) == (256, 4)
    assert "ds_config" not in sparse_parity.train_spec(cfg, 8)["runtime"]
    spec["runtime"]["ds_config"]["gradient_accumulation_steps"] = 2
    with pytest.raises(ValueError, match="gradient_accumulation_steps = 2, but the train"):
        deepspeed_config(parse_spec(spec), world=8)
    bad = tmp_path / "ds.json"
    bad.write_text("{not json")
    cfg["natural_language"]["ds_config"] = str(bad)
    with pytest.raises(ConfigError, match=r"natural_language.ds_config: .*not valid JSON"):
        validate(cfg)


def test_the_ds_config_json_cannot_override_what_the_config_sets(tmp_path):
    """One source per setting (issue 46): the paper tier's language models run the ZeRO stage
    its YAML states (natural_language.zero_stage: 2; it said runtime.zero_stage 0 while the JSON
    ran stage 2), and a JSON that sets the stage, bf16 or clipping to another value than the
    config is an error naming both, at validation and when the engine config is built."""
    import json

    from lengen.config.config import ConfigError, load, validate
    from lengen.train.runtime import deepspeed_config

    from .conftest import ROOT

    cfg = load(ROOT / "config" / "paper.yaml")
    assert cfg["natural_language"]["zero_stage"] == 2 and cfg["runtime"]["zero_stage"] == 0
    spec = natural_language.train_spec(cfg, "long")
    assert spec["runtime"]["zero_stage"] == 2  # what runs is what the YAML says
    assert sparse_parity.train_spec(cfg, 8)["runtime"]["zero_stage"] == 0
    for key, value, named in (
        ("zero_optimization", {"stage": 3}, "natural_language.zero_stage"),
        ("bf16", {"enabled": False}, "runtime.precision"),
        ("gradient_clipping", 0.5, "train.grad_clip"),
    ):
        clash = tmp_path / f"{key}.json"
        clash.write_text(json.dumps({key: value}))
        bad = {**cfg, "natural_language": {**cfg["natural_language"], "ds_config": str(clash)}}
        with pytest.raises(
            ConfigError, match=rf"natural_language.ds_config: ds_config sets .*{named}"
        ):
            validate(bad)
        spec["runtime"]["ds_config"] = {key: value}
        with pytest.raises(ValueError, match=rf"ds_config sets .*{named}"):
            deepspeed_config(parse_spec(spec), world=8)
    spec["runtime"]["ds_config"] = {"zero_optimization": {"stage": 2}, "gradient_clipping": 1.0}
    assert (
        deepspeed_config(parse_spec(spec), world=8)["zero_optimization"]["stage"] == 2
    )  # equal: fine


def test_a_resumed_run_logs_each_step_once(tiny_spec, tmp_path):
    """A crash after step 5 (last checkpoint: step 3) and a resume: the resumed run trains steps
    4-5 again, but MLflow holds each logged step of the loss curve once (issue 47: a resume
    logged them twice), with the values an uninterrupted run logs."""
    from mlflow.tracking import MlflowClient

    spec = copy.deepcopy(tiny_spec)
    spec["train"].update(steps=8, checkpoint_every=3, log_every=1)
    client = MlflowClient(tracking_uri=spec["tracking"]["uri"])

    def curve(out):
        run_id = (out / "mlflow_run_id").read_text()
        return [(m.step, m.value) for m in client.get_metric_history(run_id, "train_loss")]

    train(spec, tmp_path / "straight")
    train(spec, tmp_path / "crashed", stop_after=5)
    assert [s for s, _ in curve(tmp_path / "crashed")] == [1, 2, 3, 4, 5]
    train(spec, tmp_path / "crashed")
    resumed = sorted(curve(tmp_path / "crashed"))
    assert [s for s, _ in resumed] == list(range(1, 9))  # each step once
    assert resumed == sorted(curve(tmp_path / "straight"))


def test_a_changed_seed_keeps_the_old_model_beside_its_run(tiny_spec, tmp_path):
    """A folder retrained with another seed (a changed config, then a rerun) keeps the old model,
    spec and run id in replaced/<old run id>/, the old MLflow run's model_path pointing there
    (the old model was once deleted while its run still named it), the run KILLED if a kill
    had left it RUNNING."""
    from mlflow.tracking import MlflowClient

    out = tmp_path / "run"
    first = torch.load(train(tiny_spec, out), weights_only=True)["state_dict"]
    old_id = (out / "mlflow_run_id").read_text()
    client = MlflowClient(tracking_uri=tiny_spec["tracking"]["uri"])
    client.update_run(old_id, status="RUNNING")  # as a kill -9 leaves it
    reseeded = dict(copy.deepcopy(tiny_spec), seed=tiny_spec["seed"] + 7)
    second = torch.load(train(reseeded, out), weights_only=True)["state_dict"]
    kept = out / "replaced" / old_id
    assert json.loads((kept / "spec.json").read_text())["seed"] == tiny_spec["seed"]
    kept_weights = torch.load(kept / "model.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(kept_weights[k], first[k]) for k in first)
    assert any(not torch.equal(second[k], first[k]) for k in first)
    old_run = client.get_run(old_id)
    assert old_run.data.tags["model_path"] == str((kept / "model.pt").resolve())
    # a run a kill left RUNNING never goes on once its spec is replaced: it ends KILLED
    assert old_run.info.status == "KILLED" and old_run.data.tags["set_aside_in"] == str(
        kept.resolve()
    )
    assert (out / "mlflow_run_id").read_text() != old_id  # the new spec's own run
    # each model file a version of the run's registered model; the moved one says where it went
    from lengen.core.tracking import model_name

    name = model_name(tiny_spec["tracking"]["experiment"], parse_spec(tiny_spec).run_name)
    versions = {v.run_id: v for v in client.search_model_versions(f"name='{name}'")}
    assert set(versions) == {old_id, (out / "mlflow_run_id").read_text()}
    assert versions[old_id].tags["moved_to"] == str((kept / "model.pt").resolve())


def test_a_ds_config_may_add_communication_only_and_names_any_other_key(tmp_path):
    """Issue 62: a ds_config JSON beside the YAML may add communication, buckets and logging
    (DS_CONFIG_MAY_ADD); a key the YAML owns (precision: fp16 / bf16 / amp / torch_autocast,
    ZeRO, clipping, batch sizes, optimizer, schedule) passes only where it agrees, and any other
    key is refused, named, at validation and where the engine's config is built. Before, an
    fp16 section beside precision fp32 passed silently."""
    import json

    from lengen.config.config import ConfigError, load, validate
    from lengen.train.runtime import deepspeed_config

    from .conftest import ROOT

    cfg = load(ROOT / "config" / "paper.yaml")  # the language models: bf16, ZeRO 2
    spec = natural_language.train_spec(cfg, "long")
    refused = (
        ({"fp16": {"enabled": True}}, r"fp16.enabled = True, but runtime.precision gives bf16"),
        ({"amp": {"enabled": True}}, r"amp.enabled = True, but runtime.precision"),
        ({"torch_autocast": {"enabled": True}}, r"torch_autocast.enabled = True"),
        (
            {"bf16": {"enabled": True, "immediate_grad_update": True}},
            r"bf16.immediate_grad_update: precision is runtime.precision's alone",
        ),
        ({"optimizer": {"type": "Adam"}}, r"optimizer: the YAML owns it \(train.lr"),
        ({"scheduler": {"type": "WarmupLR"}}, r"scheduler: the YAML owns it \(train.warmup"),
        (
            {"zero_optimization": {"offload_optimizer": {"device": "cpu"}}},
            r"zero_optimization.offload_optimizer.device: not a key a ds_config may add",
        ),
        ({"data_types": {"grad_accum_dtype": "fp32"}}, r"data_types.grad_accum_dtype: not a key"),
    )
    for i, (user, message) in enumerate(refused):
        path = tmp_path / f"ds{i}.json"
        path.write_text(json.dumps(user))
        bad = {**cfg, "natural_language": {**cfg["natural_language"], "ds_config": str(path)}}
        where = "natural_language.ds_config: ds_config sets "
        with pytest.raises(ConfigError, match=rf"{where}{message}"):
            validate(bad)
        spec["runtime"]["ds_config"] = user
        with pytest.raises(ValueError, match=rf"ds_config sets {message}"):
            deepspeed_config(parse_spec(spec), world=8)
    agreed = {
        "fp16": {"enabled": False},
        "bf16": {"enabled": True},
        "gradient_clipping": 1.0,
        "zero_optimization": {"stage": 2, "overlap_comm": True, "reduce_bucket_size": 10},
        "train_batch_size": spec["train"]["batch_size"],
        "steps_per_print": 100,
        "communication_data_type": "fp32",
        "wall_clock_breakdown": True,
    }
    spec["runtime"]["ds_config"] = agreed
    ds = deepspeed_config(parse_spec(spec), world=8)
    assert ds["zero_optimization"]["reduce_bucket_size"] == 10 and ds["steps_per_print"] == 100
    path = tmp_path / "agreed.json"
    path.write_text(json.dumps(agreed))
    validate({**cfg, "natural_language": {**cfg["natural_language"], "ds_config": str(path)}})


def test_a_finished_model_removed_by_a_cut_job_is_restored_not_retrained(
    tiny_spec, tmp_path, capfd, monkeypatch
):
    """A job cut after its model.pt (its evaluation, MLflow's last writes, a time limit) has
    its outputs removed by Snakemake, and its checkpoints are gone: the retry finds the hard
    link kept in finished/ (no second copy on the disk), of this spec and code and whole, and
    links it back without training; its MLflow run, left RUNNING by the cut, ends FINISHED. A
    changed trainer (another code fingerprint), a damaged kept file or another spec trains."""
    from mlflow.tracking import MlflowClient

    from lengen.core.provenance import file_sha256
    from lengen.train import lifecycle

    spec = copy.deepcopy(tiny_spec)
    spec["train"].update(steps=6, checkpoint_every=2)
    out = tmp_path / "run"
    model = train(spec, out)
    sha, inode = file_sha256(model), model.stat().st_ino
    assert (out / "finished" / "model.pt").stat().st_ino == inode  # a link, not a copy
    assert not (out / "ckpt").exists()
    client = MlflowClient(tracking_uri=spec["tracking"]["uri"])
    run_id = (out / "mlflow_run_id").read_text().strip()
    client.set_terminated(run_id, "RUNNING")  # the cut came before MLflow's last write
    model.unlink()  # what Snakemake does to a failed job's outputs
    capfd.readouterr()
    assert train(spec, out) == model and file_sha256(model) == sha
    err = capfd.readouterr().err
    assert "restored from" in err and "nothing trains" in err and "MLflow" not in err, err
    assert client.get_run(run_id).info.status == "FINISHED"
    assert client.get_run(run_id).data.tags["model_sha256"] == sha
    model.unlink()
    monkeypatch.setattr(lifecycle, "code_fingerprint", lambda: "another trainer")
    train(spec, out)
    assert "restored" not in capfd.readouterr().err and model.stat().st_ino != inode
    monkeypatch.undo()
    model.unlink()
    with open(out / "finished" / "model.pt", "r+b") as f:  # damaged where it lies
        f.seek(100)
        f.write(b"\0" * 16)
    train(spec, out)
    assert "restored" not in capfd.readouterr().err and file_sha256(model) == sha
    other = copy.deepcopy(spec)
    other["train"]["lr"] *= 2
    model.unlink()
    train(other, out)
    assert "restored" not in capfd.readouterr().err


def test_a_job_cut_after_its_model_under_snakemake_finishes_on_its_retry_untrained(
    tiny_spec, tmp_path
):
    """Through Snakemake with --retries 1: the training job writes its model.pt and is then cut
    (here it exits 1, as a time limit during its evaluation or MLflow's writes ends it);
    Snakemake removes model.pt, and the retry restores it without a training step: the same
    file, and the retry's log says so."""
    import subprocess
    import sys

    from lengen.core.provenance import file_sha256

    spec = copy.deepcopy(tiny_spec)
    spec["train"].update(steps=6, checkpoint_every=2, log_every=2)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "Snakefile").write_text(
        'rule train:\n    output: "run/model.pt"\n    log: "train.log"\n'
        '    shell: "python -m lengen.train.train --spec spec.json --out run > {log} 2>&1; '
        'test -e cut || {{ sha256sum run/model.pt > first.sha; touch cut; exit 1; }}"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--retries", "1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    log = (tmp_path / "train.log").read_text()  # the retry's
    assert "restored from" in log and "resumed from" not in log and "MLflow: new" not in log, log
    assert (tmp_path / "first.sha").read_text().split()[0] == file_sha256(
        tmp_path / "run" / "model.pt"
    )


def test_model_versions_survive_a_moved_results_folder(tiny_spec, tmp_path):
    """A registered model version's source and its run's model_path tag are the model file
    relative to the store's folder (results_dir): the results folder moved whole (to another
    disk, another machine), the store there still finds every model, the same file by its hash."""
    import shutil

    from mlflow.tracking import MlflowClient

    from lengen.core import tracking
    from lengen.core.provenance import file_sha256

    uri = tiny_spec["tracking"]["uri"]
    home = tracking.recorded_file(uri, "x").parent
    model = train(copy.deepcopy(tiny_spec), home / "sparse_parity" / "run")
    table = tmp_path / "eval.csv"
    table.write_text("length,accuracy\n20,1.0\n")
    run_id = (model.parent / "mlflow_run_id").read_text()
    MlflowClient(tracking_uri=uri).log_artifact(run_id, str(table))  # as an evaluation does
    moved = tmp_path / "elsewhere"
    shutil.move(str(home), moved)
    new_uri = f"sqlite:///{moved / uri.rsplit('/', 1)[-1]}"
    client = MlflowClient(tracking_uri=new_uri)
    (version,) = client.search_model_versions()
    found = tracking.recorded_file(new_uri, version.source)
    assert not Path(version.source).is_absolute() and found.is_file()
    assert (
        file_sha256(found)
        == version.tags["model_sha256"]
        == file_sha256(moved / model.relative_to(home))
    )
    run = client.get_run(version.run_id)
    assert tracking.recorded_file(new_uri, run.data.tags["model_path"]) == found
    # the artifacts the run logged (MLflow records their place absolute): the store's next
    # use (a job opening its run, a setup) points them at the moved folder's mlartifacts
    before = run.info.artifact_uri
    assert before.startswith(Path(home, "mlartifacts").as_uri())
    assert tracking.relocate_artifacts(new_uri) >= 2  # the experiment and the run
    assert tracking.relocate_artifacts(new_uri) == 0  # nothing moved since
    run = client.get_run(version.run_id)
    assert run.info.artifact_uri == before.replace(home.as_uri(), moved.as_uri())
    assert [a.path for a in client.list_artifacts(version.run_id)] == ["eval.csv"]
    got = client.download_artifacts(version.run_id, "eval.csv", str(tmp_path))
    assert Path(got).read_text() == table.read_text()
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.artifact_location.startswith(Path(moved, "mlartifacts").as_uri())
