"""runtime.precision bf16 without ZeRO trains through DeepSpeed's torch_autocast mode
(lengen.core.specs.bf16_section, issue 63): fp32 weights, the forward in bf16 under
torch.autocast, the client's AdamW stepping the weights itself, no bf16 optimizer wrapper; with
ZeRO, DeepSpeed's bf16 section. A fused group in bf16 still trains each run as it trains alone,
up to bf16 rounding."""

from __future__ import annotations

import pytest
import torch

from lengen.core.specs import ds_config_clashes
from lengen.tasks import parse_spec
from lengen.train import runtime
from lengen.train.group import Fused, train_group
from lengen.train.train import train
from tests.test_group import member_0_stopped, run_specs, weights
from tests.test_train import _copy_task


@pytest.fixture
def copy_task(monkeypatch):
    from lengen import tasks

    monkeypatch.setitem(tasks.REGISTRY, "copy", _copy_task())


def bf16(specs: list[dict]) -> list[dict]:
    for spec in specs:
        spec["runtime"]["precision"] = "bf16"
    return specs


def test_the_deepspeed_section_follows_the_zero_stage(tiny_spec):
    spec = bf16([tiny_spec])[0]
    got = runtime.deepspeed_config(parse_spec(spec), 1)
    assert got["torch_autocast"] == {"enabled": True, "dtype": "bfloat16"}
    assert "bf16" not in got  # DeepSpeed's bf16 optimizer is not built at stage 0
    spec["runtime"]["zero_stage"] = 2
    got = runtime.deepspeed_config(parse_spec(spec), 1)
    assert got["bf16"] == {"enabled": True} and "torch_autocast" not in got
    spec["runtime"]["precision"] = "fp32"
    got = runtime.deepspeed_config(parse_spec(spec), 1)
    assert got["bf16"] == {"enabled": False} and "torch_autocast" not in got
    # a ds_config JSON may repeat the section the stage picks, not the other one
    assert ds_config_clashes({"torch_autocast": {"enabled": True}}, bf16=True, zero_stage=0) == []
    assert ds_config_clashes({"bf16": {"enabled": True}}, bf16=True, zero_stage=2) == []
    [clash] = ds_config_clashes({"bf16": {"enabled": True}}, bf16=True, zero_stage=0)
    assert "bf16.enabled = True, but runtime.precision gives bf16" in clash
    [clash] = ds_config_clashes({"torch_autocast": {"enabled": True}}, bf16=True, zero_stage=2)
    assert "torch_autocast.enabled" in clash


def test_a_bf16_step_keeps_fp32_weights_and_the_clients_adamw(tiny_spec, tmp_path, copy_task):
    """The engine steps torch's AdamW itself (no DeepSpeed wrapper, so no per-step copies of
    master weights or gradients), the weights stay fp32, and the forward
    runs in bf16 (the logits differ from an fp32 forward's)."""
    specs = [parse_spec(s) for s in bf16(run_specs(tiny_spec, seeds=(0, 1)))]
    runtime.setup(specs[0].runtime)
    trainee = Fused(specs, [tmp_path / "a", tmp_path / "b"])
    try:
        engine = trainee.engine
        assert type(engine.optimizer) is torch.optim.AdamW
        assert engine.torch_autocast_enabled() and not engine.bfloat16_enabled()
        trainee.step(0)
        assert {p.dtype for p in trainee.fused.parameters()} == {torch.float32}
        [(inputs, _)] = trainee.batches.get(1)
        with torch.no_grad():
            mixed = engine(inputs["input_ids"], inputs["position_ids"])
            exact = trainee.fused(inputs["input_ids"], inputs["position_ids"])
        mixed, exact = (x[0] if isinstance(x, tuple) else x for x in (mixed, exact))
        assert not torch.equal(mixed.float(), exact)
        torch.testing.assert_close(mixed.float(), exact, atol=0.1, rtol=0.05)
    finally:
        trainee.close()


def test_a_bf16_group_trains_each_run_as_alone(tiny_spec, tmp_path, copy_task):
    """Alone and fused, bf16 autocast, 60 steps at lr 1e-2: the same stopping step, fp32
    weights, and the group's gap to each run alone (batched and single matmuls round in another
    order) a tenth of bf16's own effect at most, the gap between the run in bf16 and in fp32 (the
    attention's key bias aside: its true gradient is 0, tests/test_group.py)."""
    specs = bf16(run_specs(tiny_spec, seeds=(0, 1)))
    alone = [weights(train(s, tmp_path / f"alone{r}")) for r, s in enumerate(specs)]
    outs = [tmp_path / f"group{r}" for r in range(len(specs))]
    fused = [weights(p) for p in train_group(specs, outs)]
    exact = run_specs(tiny_spec, seeds=(0,))[0]
    fp32 = weights(train(exact, tmp_path / "fp32"))["state_dict"]

    def gap(a: dict, b: dict) -> float:
        return max((a[k] - b[k]).abs().max().item() for k in a if not k.endswith("key_value.bias"))

    for a, f in zip(alone, fused, strict=True):
        assert f["steps_run"] == a["steps_run"] == 60 and f["stop_reason"] == a["stop_reason"]
        assert {v.dtype for v in f["state_dict"].values()} == {torch.float32}
    precision = gap(alone[0]["state_dict"], fp32)
    fusion = max(gap(f["state_dict"], a["state_dict"]) for a, f in zip(alone, fused, strict=True))
    print(f"bf16 vs fp32 {precision:.2e}, fused vs alone {fusion:.2e}")
    assert 0 < fusion < 1e-2 and fusion < precision / 10  # measured: 3.7e-3 and 0.16


def test_a_stopped_member_stays_put_in_bf16(tiny_spec, tmp_path, copy_task):
    """Issue 63, item 2: a member frozen by its early stop keeps its weights bit for bit while
    the others train on in bf16 (its weights are put back after each step; torch_autocast keeps
    no second, fp32 master copy that could drift under weight decay)."""
    with member_0_stopped(bf16(run_specs(tiny_spec, seeds=(0, 1))), tmp_path) as trainee:
        before = {k: v.clone() for k, v in trainee.model(0).state_dict().items()}
        other = {k: v.clone() for k, v in trainee.model(1).state_dict().items()}
        for step in range(3, 8):
            trainee.step(step)
        after, moved = trainee.model(0).state_dict(), trainee.model(1).state_dict()
        for name, value in before.items():
            assert torch.equal(after[name], value), name
        assert any(not torch.equal(moved[k], v) for k, v in other.items())
