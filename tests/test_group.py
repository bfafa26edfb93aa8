"""A fused group of runs (lengen.train.group) gives each run what train.train gives it alone:
its weights, its stopping step and reason, its model.pt; a crash resumes to the same end."""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lengen import tasks
from lengen.tasks import parse_spec
from lengen.train.group import check_group, train_group
from lengen.train.train import train
from tests.test_train import _copy_task

# batched vs single matmuls sum in another order: every weight within 2e-6, except the
# attention's key bias, whose true gradient is 0 (softmax ignores a shift shared by all of a
# query's logits): its gradient is rounding noise, which AdamW's m / sqrt(v) turns into steps of
# up to lr whichever way the noise points (measured: up to 8e-4 after 60 steps at lr 1e-2)
TOL = dict(atol=2e-6, rtol=1e-5)
KEY_BIAS_TOL = dict(atol=2e-3, rtol=0)


def assert_same_weights(got: dict, want: dict) -> None:
    for name in want:
        tol = KEY_BIAS_TOL if name.endswith("query_key_value.bias") else TOL
        torch.testing.assert_close(got[name], want[name], **tol, msg=name)


def run_specs(tiny_spec, seeds=(0, 1, 2), **train_keys) -> list[dict]:
    """The copy task's spec at each seed (a group's runs differ in their seed only)."""
    out = []
    for seed in seeds:
        spec = copy.deepcopy(tiny_spec)
        spec["experiment"], spec["seed"], spec["run_name"] = "copy", seed, f"copy/seed{seed}"
        spec["train"].update(
            steps=60,
            batch_size=16,
            lr=1e-2,
            warmup_steps=5,
            log_every=10,
            checkpoint_every=20,
            **train_keys,
        )
        spec["model"].update(d_model=32, n_head=2)
        out.append(spec)
    return out


def weights(path):
    return torch.load(path, weights_only=True)


@pytest.fixture
def copy_task(monkeypatch):
    monkeypatch.setitem(tasks.REGISTRY, "copy", _copy_task())


def test_a_group_trains_each_run_as_it_trains_alone(tiny_spec, tmp_path, copy_task):
    """Three seeds with an early stop: the group stops each run where it stops alone (a stopped
    run stops changing while the others go on) and writes the same weights, to TOL."""
    specs = run_specs(tiny_spec, early_stop={"every": 10, "target_accuracy": 0.99, "patience": 2})
    alone = [weights(train(s, tmp_path / f"alone{r}")) for r, s in enumerate(specs)]
    fused = [weights(p) for p in train_group(specs, [tmp_path / f"group{r}" for r in range(3)])]
    assert len({a["steps_run"] for a in alone}) > 1  # the runs stop at different steps
    # each member has its own finished MLflow run, named as alone, with its loss curve and stop
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=specs[0]["tracking"]["uri"])
    for r, spec in enumerate(specs):
        run = client.get_run((tmp_path / f"group{r}" / "mlflow_run_id").read_text().strip())
        assert run.info.status == "FINISHED" and run.info.run_name == spec["run_name"]
        assert run.data.metrics["stopped_at"] == alone[r]["steps_run"]
        assert run.data.tags["early_stop"] == alone[r]["stop_reason"]
        assert "train_loss" in run.data.metrics and "heldout_exact_match" in run.data.metrics
        assert run.data.params["train.lr"] == str(spec["train"]["lr"])
    for a, f in zip(alone, fused, strict=True):
        assert (f["steps_run"], f["stop_reason"]) == (a["steps_run"], a["stop_reason"])
        assert f["spec"] == a["spec"] and f["model_config"] == a["model_config"]
        assert_same_weights(f["state_dict"], a["state_dict"])


def test_a_crashed_group_resumes_to_the_same_end(tiny_spec, tmp_path, copy_task):
    specs = run_specs(tiny_spec)
    outs = [tmp_path / f"straight{r}" for r in range(3)]
    straight = [weights(p) for p in train_group(specs, outs)]
    crashed = [tmp_path / f"crashed{r}" for r in range(3)]
    train_group(specs, crashed, stop_after=30)  # the last checkpoint is step 20
    assert not (crashed[0] / "model.pt").exists() and (crashed[0] / "group_ckpt").exists()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=specs[0]["tracking"]["uri"])
    run_id = (crashed[1] / "mlflow_run_id").read_text().strip()
    assert client.get_run(run_id).info.status == "KILLED"  # never left RUNNING
    resumed = [weights(p) for p in train_group(specs, crashed)]
    for a, b in zip(straight, resumed, strict=True):
        for name in a["state_dict"]:
            torch.testing.assert_close(b["state_dict"][name], a["state_dict"][name], atol=0, rtol=0)
    assert not (crashed[0] / "group_ckpt").exists()  # removed once every model.pt is written
    assert client.get_run(run_id).info.status == "FINISHED"  # the same run, resumed
    steps = [m.step for m in client.get_metric_history(run_id, "train_loss")]
    assert sorted(steps) == list(range(10, 61, 10))  # step 30, trained twice, logged once


def test_a_checkpoint_of_another_fused_layout_is_refused(
    tiny_spec, tmp_path, copy_task, monkeypatch
):
    """A group checkpoint records how the fused model lays out its linear weights
    (lengen.model.fused.LAYOUT); one written by code of another layout is refused with the
    checkpoint's path, not loaded transposed (a square weight would load without an error)."""
    import lengen.train.group as group_module

    specs = run_specs(tiny_spec, seeds=(0, 1))
    outs = [tmp_path / f"run{r}" for r in range(2)]
    with monkeypatch.context() as patched:  # code of the layout before: the checkpoint says so
        patched.setattr(group_module, "LAYOUT", "linear weights [R, out, in]")
        train_group(specs, outs, stop_after=30)  # the last checkpoint is step 20
    with pytest.raises(RuntimeError, match=r"group_ckpt.*another fused layout.*\[R, out, in\]"):
        train_group(specs, outs)


def test_a_spent_budget_ends_every_run_where_it_is(tiny_spec, tmp_path, copy_task):
    """budget_s (a probe on a lent GPU's minutes): once spent, every active run writes its
    model.pt at the step it reached, stop reason "budget", and the group's checkpoint goes."""
    specs = run_specs(tiny_spec, seeds=(0, 1))
    outs = [tmp_path / f"run{r}" for r in range(2)]
    ended = [weights(p) for p in train_group(specs, outs, budget_s=0)]
    assert [(w["steps_run"], w["stop_reason"]) for w in ended] == [(1, "budget")] * 2
    assert not (outs[0] / "group_ckpt").exists()
    one = [dict(s, train=dict(s["train"], steps=1)) for s in specs]  # the same first step
    straight = [weights(p) for p in train_group(one, [tmp_path / f"one{r}" for r in range(2)])]
    for a, b in zip(straight, ended, strict=True):
        assert_same_weights(b["state_dict"], a["state_dict"])


def test_a_group_shares_everything_but_the_seed(tiny_spec, copy_task):
    a, b = run_specs(tiny_spec, seeds=(0, 1))
    b["model"]["d_model"] = 64
    with pytest.raises(ValueError, match="differ in `model`"):
        check_group([parse_spec(a), parse_spec(b)])
    a, b = run_specs(tiny_spec, seeds=(0, 0))
    with pytest.raises(ValueError, match="distinct names"):
        check_group([parse_spec(a), parse_spec(b)])


def test_a_group_across_jumps_trains_each_as_alone(smoke_config, tmp_path):
    """Jumps of one PPC parity variant differ in data, not shape: one group trains jumps 1 and 2
    (their batches of different lengths padded, unscored) as train.train trains each."""
    from lengen.core import tracking

    cfg = dict(smoke_config, results_dir=str(tmp_path / "results"))
    specs = [tasks.generation_spec(cfg, "parity_scratchpad", "ppc", jump, 0) for jump in (1, 2)]
    tracking.prepare_store(specs[0]["tracking"]["uri"], [specs[0]["tracking"]["experiment"]])
    check_group([parse_spec(s) for s in specs])
    alone = [weights(train(s, tmp_path / f"alone{j}")) for j, s in enumerate(specs)]
    fused = [weights(p) for p in train_group(specs, [tmp_path / f"g{j}" for j in range(2)])]
    for a, f in zip(alone, fused, strict=True):
        assert f["spec"] == a["spec"]
        assert_same_weights(f["state_dict"], a["state_dict"])


@contextlib.contextmanager
def member_0_stopped(specs: list[dict], tmp_path):
    """A fused trainee of `specs` after 3 steps, its member 0 stopped (frozen) there, closed
    after use: the stopped-member tests' start (here and in test_precision.py)."""
    from lengen.train import runtime
    from lengen.train.group import Fused

    specs = [parse_spec(s) for s in specs]
    runtime.setup(specs[0].runtime)
    trainee = Fused(specs, [tmp_path / "a", tmp_path / "b"])
    try:
        for step in range(3):
            trainee.step(step)
        trainee.freeze(0)
        yield trainee
    finally:
        trainee.close()


def test_a_stopped_member_stops_changing_moments_included(tiny_spec, tmp_path, copy_task):
    """Issue 63: a stopped member's weights were put back after each step, but its AdamW moments
    went on decaying, so the group's checkpoint did not hold it as it stopped. Now both stay as
    they were; the members still training change."""
    with member_0_stopped(run_specs(tiny_spec, seeds=(0, 1)), tmp_path) as trainee:
        state = trainee.engine.optimizer.state

        def rows(r):
            return [
                t[r].clone()
                for p in trainee.fused.weights.values()
                for t in (p.data, state[p]["exp_avg"], state[p]["exp_avg_sq"])
            ]

        stopped, going = rows(0), rows(1)
        for step in range(3, 6):
            trainee.step(step)
        assert all(torch.equal(a, b) for a, b in zip(stopped, rows(0), strict=True))
        assert any(not torch.equal(a, b) for a, b in zip(going, rows(1), strict=True))


@pytest.mark.parametrize("ppc", [False, True])
def test_the_groups_losses_in_one_pass_are_each_runs_training_loss(ppc):
    """run_losses: one cross-entropy per head over every run's tokens gives each run's own
    training_loss (its scored tokens only; with PPC plus the position loss), to fp32 rounding,
    and the gradients too; a chunked loss goes run by run, as each run alone chunks it."""
    from lengen.core.batch import IGNORE
    from lengen.train.group import run_losses
    from lengen.train.loss import training_loss

    gen = torch.Generator().manual_seed(0)
    runs, rows, length, vocab = 3, 4, 6, 7
    heads = [torch.randn(runs, rows, length, vocab, generator=gen, requires_grad=True)]
    inputs = {"labels": torch.randint(0, vocab, (runs, rows, length), generator=gen)}
    inputs["labels"][:, :, :2] = IGNORE  # a prompt, unscored
    inputs["labels"][1, :, :5] = IGNORE  # run 1 scores far fewer tokens than the others
    if ppc:
        heads.append(torch.randn(runs, rows, length, 9, generator=gen, requires_grad=True))
        inputs["position_labels"] = torch.randint(0, 9, (runs, rows, length), generator=gen)
        inputs["position_labels"][:, :, :3] = IGNORE
    output = tuple(heads) if ppc else heads[0]

    def alone(chunk):
        return torch.stack(
            [
                training_loss(
                    tuple(h[r] for h in heads) if ppc else heads[0][r],
                    {k: v[r] for k, v in inputs.items()},
                    chunk,
                )
                for r in range(runs)
            ]
        )

    want = alone(0)
    want_grads = torch.autograd.grad(want.sum(), heads)
    got = run_losses(output, inputs, 0)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    for g, w in zip(torch.autograd.grad(got.sum(), heads), want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-7)
    chunked = run_losses(output, inputs, 5)  # rows x length = 24 tokens a run: chunked alone
    torch.testing.assert_close(chunked, alone(5), rtol=0, atol=0)


class HostTraffic(torch.overrides.TorchFunctionMode):
    """What a step does that on a GPU would stop the host: a read of a tensor's value (`.item()`,
    `.tolist()`, `bool(t)`, ...) or a copy to a device that is not non-blocking (from pageable
    memory it blocks). Seen at the Python API, on the CPU, where such calls still happen even
    though they cost nothing here."""

    READS = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "numpy", "cpu"}

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if name in self.READS:
            self.found.append(f"{name}()")
        elif name in ("__getitem__", "__setitem__") and any(
            isinstance(a, torch.Tensor) and a.dtype == torch.bool for a in args[1:2]
        ):  # on a GPU, a boolean mask's indexing reads its count back first (nonzero)
            self.found.append(f"{name}[bool mask]")
        elif name in ("to", "cuda", "copy_"):
            device = [a for a in args[1:] if isinstance(a, str | torch.device)]
            if (device or "device" in kwargs or name != "to") and not kwargs.get("non_blocking"):
                self.found.append(f"{name}{tuple(str(a) for a in args[1:])} blocking")
        return func(*args, **kwargs)


class Reads(TorchDispatchMode):
    """Every operator that reads a value back to the host (benchmarks/launches.py's SYNCS)."""

    SYNCS = {"_local_scalar_dense", "nonzero", "is_nonzero", "equal"}

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in self.SYNCS:
            self.found.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_a_fused_step_reads_nothing_back_and_copies_only_its_pinned_batch(
    tiny_spec, tmp_path, copy_task, monkeypatch
):
    """group.Fused.step, as the GPU runs it (its batches pinned and copied non-blocking), before
    and after a member stops: no read of a value to the host and no blocking copy to the device,
    whether at the Python API (HostTraffic) or as an operator (Reads). The stopped runs' mask
    and indices are made on the device when a run stops (freeze), not in the step."""
    from lengen.train import lifecycle

    monkeypatch.setattr(lifecycle.HostBatches, "pinned", lambda self, inputs: inputs)

    class FusedAdamW(torch.optim.AdamW):  # make_engine's AdamW on CUDA (the CPU's loops)
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs | {"fused": True})

    monkeypatch.setattr(torch.optim, "AdamW", FusedAdamW)
    with member_0_stopped(run_specs(tiny_spec, seeds=(0, 1)), tmp_path) as trainee:
        trainee.batches.pin = True  # the CUDA path's non-blocking copies (no pinning on a CPU)
        for label in ("one stopped", "after a second freeze"):
            api, ops = HostTraffic(), Reads()
            trainee.batches.get(10)  # the worker's batch, made ahead of the step
            with api, ops:
                trainee.step(11)
            assert api.found == [] and ops.found == [], (label, api.found, ops.found)
            trainee.freeze(1)


def test_the_host_traffic_check_sees_what_it_looks_for():
    """HostTraffic and Reads are not blind: a mask copied in the step, a value read, a boolean
    mask's indexing are each caught."""
    api, ops = HostTraffic(), Reads()
    mask, x = torch.ones(3, dtype=torch.bool), torch.arange(3.0)
    with api, ops:
        mask.to("cpu")
        x.sum().item()
        x[mask].sum()
        x.to("cpu", non_blocking=True)
    assert api.found == ["to('cpu',) blocking", "item()", "__getitem__[bool mask]"]
    assert "_local_scalar_dense" in ops.found


def test_a_groups_finished_models_are_restored_on_a_retry_not_retrained(
    tiny_spec, tmp_path, copy_task, capfd
):
    """A fused group cut after its models were written (its `done` marker removed, a member's
    model.pt lost): the rerun links each missing model.pt back from its finished/ and trains
    nothing; the members' files are the ones the group wrote."""
    specs = run_specs(tiny_spec)
    outs = [tmp_path / f"member{r}" for r in range(3)]
    paths = train_group(specs, outs)
    inodes = [p.stat().st_ino for p in paths]
    paths[1].unlink()
    capfd.readouterr()
    assert train_group(specs, outs) == paths
    err = capfd.readouterr().err
    assert err.count("restored from") == 3 and "group of" not in err, err
    assert [p.stat().st_ino for p in paths] == inodes
