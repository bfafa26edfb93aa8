"""One training life cycle (lengen.train.lifecycle): a run alone and a fused group go through the
same engine build, loop, checkpoints and MLflow runs; what a group gained from sharing it (a
diverged member named, its tokens per second logged, a changed spec starting the group again);
and no module reaches into another's private names."""

from __future__ import annotations

import ast
import json

import pytest
import torch

from lengen.train import group as group_module
from lengen.train.group import train_group
from lengen.train.lifecycle import NonFiniteLoss
from tests.conftest import ROOT
from tests.test_group import run_specs
from tests.test_train import _copy_task

SRC = ROOT / "src" / "lengen"


@pytest.fixture
def copy_task(monkeypatch):
    from lengen import tasks

    monkeypatch.setitem(tasks.REGISTRY, "copy", _copy_task())


def _calls(name: str) -> list[str]:
    """The modules of lengen.train that call `name` (an attribute or a bare name)."""
    found = []
    for path in sorted((SRC / "train").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called == name:
                    found.append(path.relative_to(SRC).as_posix())
    return found


def test_the_engine_loop_and_checkpoints_are_written_once():
    """The optimizer, the schedule, the DeepSpeed engine, a checkpoint's save and load, and the
    loop's progress bar each have one call site in the trainers: the life cycle's."""
    for name in (
        "AdamW",
        "LambdaLR",
        "deepspeed_engine",
        "save_checkpoint",
        "load_checkpoint",
        "tqdm",
    ):
        assert _calls(name) == ["train/lifecycle.py"], name


def test_no_module_imports_another_modules_private_names():
    """`from lengen.x import _y` nowhere in src, tools, benchmarks or probes (a private name is
    its module's own)."""
    crossing = []
    for folder in ("src", "tools", "benchmarks", "probes"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lengen"):
                    private = [a.name for a in node.names if a.name.startswith("_")]
                    crossing += [
                        f"{path.name}: {name}" for name in private if not name.startswith("__")
                    ]
    assert crossing == []


def test_a_diverged_member_is_named_and_nothing_is_written(
    tiny_spec, tmp_path, copy_task, monkeypatch
):
    """A member whose loss turns NaN stops the group with NonFiniteLoss naming that run and its
    step (as a run alone names itself), before any model.pt or checkpoint is written from it;
    every member's MLflow run ends FAILED."""
    from mlflow.tracking import MlflowClient

    specs = run_specs(tiny_spec, seeds=(0, 1))
    real, calls = group_module.run_losses, []

    def nan_in_the_second(*args):
        losses = real(*args)
        calls.append(1)
        return losses * torch.tensor([1.0, float("nan")]) if len(calls) == 3 else losses

    monkeypatch.setattr(group_module, "run_losses", nan_in_the_second)
    outs = [tmp_path / "a", tmp_path / "b"]
    with pytest.raises(NonFiniteLoss, match=r"copy/seed1 \(.*b\): training loss nan at step 3"):
        train_group(specs, outs)
    assert not any((o / "model.pt").exists() for o in outs)
    assert not (outs[0] / "group_ckpt").exists()  # the first checkpoint (step 20) never came
    client = MlflowClient(tracking_uri=specs[0]["tracking"]["uri"])
    for out in outs:
        assert client.get_run((out / "mlflow_run_id").read_text()).info.status == "FAILED"


def test_each_member_logs_its_loss_lr_and_tokens_per_second(tiny_spec, tmp_path, copy_task):
    """The metrics a run alone logs, per member of a group: train_loss, lr and tokens_per_s (its
    own tokens fed, the group's padding not counted) at every log_every step."""
    from mlflow.tracking import MlflowClient

    specs = run_specs(tiny_spec, seeds=(0, 1))
    outs = [tmp_path / "a", tmp_path / "b"]
    train_group(specs, outs)
    client = MlflowClient(tracking_uri=specs[0]["tracking"]["uri"])
    for out in outs:
        run_id = (out / "mlflow_run_id").read_text()
        for metric in ("train_loss", "lr", "tokens_per_s"):
            history = client.get_metric_history(run_id, metric)
            assert [m.step for m in history] == list(range(10, 61, 10)), metric
        assert all(m.value > 0 for m in client.get_metric_history(run_id, "tokens_per_s"))


def test_a_group_whose_member_changed_trains_from_its_start(tiny_spec, tmp_path, copy_task, capfd):
    """As a run alone does: a member folder last trained by another spec keeps that spec's run
    id aside (replaced/), and the group's checkpoint, made with the old spec, is not resumed."""
    specs = run_specs(tiny_spec, seeds=(0, 1))
    outs = [tmp_path / "a", tmp_path / "b"]
    train_group(specs, outs, stop_after=30)  # a checkpoint at step 20
    assert (outs[0] / "group_ckpt" / "step_20").is_dir()
    changed = [specs[0], dict(specs[1], seed=7)]
    old_id = (outs[1] / "mlflow_run_id").read_text()
    train_group(changed, outs)
    err = capfd.readouterr().err
    assert "another spec trained here before" in err and "the group trains from its start" in err
    assert "resumed from" not in err
    assert (outs[1] / "replaced" / old_id / "spec.json").is_file()
    saved = json.loads((outs[1] / "spec.json").read_text())
    assert saved["seed"] == 7
    alone = train_group(changed, [tmp_path / "c", tmp_path / "d"])  # the same from scratch
    for a, b in zip(alone, [o / "model.pt" for o in outs], strict=True):
        want, got = (torch.load(p, weights_only=True)["state_dict"] for p in (a, b))
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=0, atol=0)


def test_a_checkpoint_written_before_the_one_life_cycle_is_refused(tmp_path, capfd):
    """Checkpoints of the two loops before the one life cycle kept their state apart (a run
    alone: one `early_stop_streak`; a group: its stops under `group`): code older than the
    committed references, refused in one line that names the folder and says to delete it and
    rerun; the one life cycle's own format resumes into the members."""
    import types

    from lengen.core.files import UnreadableState
    from lengen.train import lifecycle

    frozen = []
    trainee = types.SimpleNamespace(
        engine=None, freeze=frozen.append, load_client_state=lambda client, where: None
    )

    def members(n):
        stopper = types.SimpleNamespace(streak=0)
        return [
            lifecycle.Member(None, tmp_path, types.SimpleNamespace(**vars(stopper)))
            for _ in range(n)
        ]

    def resume(client, n):
        ckpts = types.SimpleNamespace(folder=tmp_path, load=lambda engine: ("step_20", client))
        runs = members(n)
        frozen.clear()
        return lifecycle._resume(trainee, runs, ckpts), runs

    old_group = {
        "step": 30,
        "streaks": [1, 0],
        "layout": "x",
        "group": {"active": [True, False], "stopped": {"1": [20, "target"]}},
    }
    for old in ({"step": 20, "early_stop_streak": 2}, old_group):
        with pytest.raises(
            UnreadableState,
            match=f"{tmp_path}/step_20: a checkpoint of code older.*delete {tmp_path} and rerun",
        ):
            resume(old, len(old.get("streaks", [0])))
    new = {"step": 40, "streaks": [0, 3], "stopped": {"0": [10, "plateau"]}}
    step, group = resume(new, 2)
    assert step == 40 and group[0].stopped == (10, "plateau") and frozen == [0]
    assert group[1].stopper.streak == 3
    assert "resumed from" in capfd.readouterr().err


def test_a_groups_batches_made_ahead_are_the_batches_made_in_the_step(tiny_spec, copy_task):
    """A fused group's batches made a step ahead in a worker (CUDA's default, the run alone's
    HostBatches) are the ones made in the step, bitwise, with each run's unpadded token count;
    a batch made ahead for a step that never runs is dropped at close."""
    from lengen import tasks
    from lengen.model.fused import FusedGPTNeoX
    from lengen.tasks import parse_spec
    from lengen.train.group import GroupBatches
    from lengen.train.lifecycle import build_model

    specs = [parse_spec(s) for s in run_specs(tiny_spec, seeds=(0, 1))]
    fused = FusedGPTNeoX([build_model(s) for s in specs])
    made = {}
    for prefetch in (False, True):
        batches = GroupBatches(tasks.get("copy"), specs, fused, "cpu", prefetch=prefetch)
        made[prefetch] = [batches.get(step) for step in range(3)]
        assert (batches.pool is not None) == prefetch and (3 in batches.ahead) == prefetch
        batches.close()
        assert batches.ahead == {}
    for (a,), (b,) in zip(made[False], made[True], strict=True):
        assert a[1] == b[1] == [16 * 3, 16 * 3]  # each run's tokens fed (batch 16, 4 tokens)
        for key in a[0]:
            torch.testing.assert_close(a[0][key], b[0][key], rtol=0, atol=0)
