"""The hot loop a GPU wants (issue 37): no host sync inside the training step or a decoding step,
checked on the CPU by tracing each with torch.compile(fullgraph=True), which refuses a graph break
(a read of a tensor's value into Python: `.item()`, `if tensor...:`); the preallocated KV cache
decodes token for token what the growing cache and the uncached decoder decode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lengen.analysis.decode import greedy_decode
from lengen.core.batch import Example
from lengen.model.model import GPTNeoX, KVCache, ModelConfig
from lengen.train.loss import training_loss

SCHEMES = [  # (position, predict_positions, attn_scale): every way the model reads IDs
    ("rope", False, "none"),
    ("rope", False, "log_length"),
    ("learned", True, "none"),
    ("learned", False, "none"),
    ("alibi", False, "none"),
    ("nope", False, "none"),
]


def _model(position: str, ppc: bool, attn_scale: str = "none") -> GPTNeoX:
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=16,
        n_layer=2,
        n_head=2,
        d_model=16,
        position=position,
        predict_positions=ppc,
        attn_scale=attn_scale,
        l_max=40,
    )
    return GPTNeoX(cfg).eval()


def _example(rng: np.random.Generator, rows: int = 4, length: int = 12) -> Example:
    tokens = rng.integers(0, 16, (rows, length))
    ids = np.tile(np.arange(1, length + 1), (rows, 1))
    mask = np.zeros((rows, length), int)
    mask[:, length // 2 :] = 1
    return Example(tokens, ids, mask)


@pytest.mark.parametrize(("position", "ppc", "attn_scale"), SCHEMES)
def test_the_training_step_traces_as_one_graph(position, ppc, attn_scale):
    torch._dynamo.reset()
    model = _model(position, ppc, attn_scale).train()
    inputs = _example(np.random.default_rng(0)).model_inputs(id_limit=model.cfg.id_limit)

    def step(inputs):
        return training_loss(model(inputs["input_ids"], inputs["position_ids"]), inputs)

    eager = step(inputs)
    traced = torch.compile(step, fullgraph=True, backend="eager")(inputs)  # a break raises
    traced.backward()
    torch.testing.assert_close(traced, eager)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize(("position", "ppc", "attn_scale"), SCHEMES)
def test_a_decoding_step_with_the_preallocated_cache_traces_as_one_graph(position, ppc, attn_scale):
    torch._dynamo.reset()
    model = _model(position, ppc, attn_scale)
    prompt = torch.as_tensor(np.random.default_rng(1).integers(0, 16, (3, 6)))
    ids = torch.arange(1, 7).repeat(3, 1)
    cache = KVCache(model.cfg.n_layer, capacity=10)
    with torch.no_grad():
        model(prompt, ids, cache=cache)  # the prompt, eager
        step = torch.compile(lambda t, i: model(t, i, cache=cache), fullgraph=True, backend="eager")
        for n in range(4):  # one new token at a time, each at the next ID
            step(prompt[:, n : n + 1], ids[:, -1:] + n + 1)
    assert cache.length == 10


@pytest.mark.parametrize(("position", "ppc", "attn_scale"), SCHEMES)
def test_the_preallocated_cache_decodes_what_the_growing_cache_and_no_cache_decode(
    position, ppc, attn_scale
):
    model = _model(position, ppc, attn_scale)
    example = _example(np.random.default_rng(2), rows=5, length=8)
    prompt, prompt_ids = example.tokens, example.position_ids
    static = greedy_decode(model, prompt, prompt_ids, 20)
    growing = greedy_decode(model, prompt, prompt_ids, 20, static_cache=False)
    uncached = greedy_decode(model, prompt, prompt_ids, 20, use_cache=False)
    for other in (growing, uncached):
        assert (static.tokens == other.tokens).all()
        assert (static.position_ids == other.position_ids).all()
    assert len(np.unique(static.tokens)) > 1  # not a degenerate constant


def test_the_cache_refuses_more_tokens_than_its_capacity():
    cache = KVCache(1, capacity=4)
    k = torch.zeros(1, 2, 3, 8)
    cache.extend(0, k, k)
    with pytest.raises(ValueError, match="capacity 4 asked for 6"):
        cache.extend(0, k, k)


def test_padding_to_a_length_bucket_leaves_the_loss_and_gradients_unchanged():
    example = _example(np.random.default_rng(3), rows=4, length=11)
    padded = example.padded((8, 16, 32))
    assert padded.tokens.shape == (4, 16) and example.padded((4, 8)) is example  # too long: as is
    assert (padded.target_mask[:, 11:] == 0).all()
    assert (padded.tokens[:, :11] == example.tokens).all()
    for position, ppc, attn_scale in SCHEMES:
        model = _model(position, ppc, attn_scale).train()
        grads = []
        for ex in (example, padded):
            model.zero_grad()
            inputs = ex.model_inputs(id_limit=model.cfg.id_limit)
            loss = training_loss(model(inputs["input_ids"], inputs["position_ids"]), inputs)
            loss.backward()
            grads.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
        (loss_a, grad_a), (loss_b, grad_b) = grads
        torch.testing.assert_close(loss_a, loss_b)
        for a, b in zip(grad_a, grad_b, strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_length_buckets_bound_the_graphs_a_compiled_step_builds():
    """Training batches of 12 drawn lengths: one graph per length unpadded, one per bucket edge
    padded (dynamic shapes off, as CUDA graphs need). Unpadded, 11 lengths pass torch's default
    limit of 8 recompiles per function: raised here to count them."""
    from torch._dynamo.utils import counters

    model = _model("learned", True).train()
    rng = np.random.default_rng(4)
    lengths = [10, 13, 17, 21, 24, 27, 30, 11, 19, 25, 29, 15]

    @torch._dynamo.config.patch(recompile_limit=64)
    def graphs(buckets: tuple[int, ...]) -> int:
        torch._dynamo.reset()
        counters.clear()

        @torch.compile(fullgraph=True, backend="eager", dynamic=False)
        def step(input_ids, position_ids):
            return model(input_ids, position_ids)

        for n in lengths:
            inputs = _example(rng, rows=2, length=n).padded(buckets).model_inputs()
            step(inputs["input_ids"], inputs["position_ids"])
        return counters["stats"]["unique_graphs"]

    assert graphs(()) == len(set(lengths))
    assert graphs((16, 24, 32)) == 3


def test_runtime_compile_reaches_the_engine_and_cuda_graphs_need_cuda():
    import copy

    from lengen.config.config import ConfigError, load, validate
    from lengen.core.specs import RuntimeSpec
    from lengen.train.runtime import compile_engine

    class Engine:
        def __init__(self):
            self.calls = []

        def compile(self, **kwargs):
            self.calls.append(kwargs)

    base = {"device": "cpu", "precision": "fp32", "zero_stage": 0}
    got = {}
    for mode in ("none", "default", "reduce-overhead"):
        engine = Engine()
        compile_engine(engine, RuntimeSpec(**base, compile=mode))
        got[mode] = engine.calls
    assert got == {
        "none": [],
        "default": [{"compile_kwargs": {}}],
        "reduce-overhead": [{"compile_kwargs": {"mode": "reduce-overhead"}}],
    }
    cfg = load("config/smoke.yaml")
    ok = copy.deepcopy(cfg)
    ok["runtime"]["compile"] = "default"
    validate(ok)
    bad = copy.deepcopy(cfg)
    bad["runtime"]["compile"] = "reduce-overhead"
    with pytest.raises(ConfigError, match="runtime.compile"):
        validate(bad)


def test_the_loss_window_keeps_what_a_checkpoint_checked_for_the_next_log():
    """Losses stay on the device until read; a read before a checkpoint checks them without
    dropping them from the logged mean; a non-finite one names its step."""
    from lengen.core.specs import TrainSpec
    from lengen.train.train import LossWindow, NonFiniteLoss

    train = TrainSpec(
        steps=8, batch_size=2, lr=1e-3, weight_decay=0.0, warmup_steps=0, schedule="constant"
    )
    spec = type("S", (), {"run_name": "toy", "train": train})()
    window = LossWindow()
    for step in (1, 2, 3, 4):
        window.add(step, torch.tensor([float(step), float(step) + 0.5]))
        if step == 2:
            window.check(spec, "out")  # a checkpoint between two logs
    assert window.take(spec, "out") == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5]
    assert window.take(spec, "out") == []
    window.add(5, torch.tensor([1.0, 1.0]))
    window.add(6, torch.tensor([1.0, float("nan")]))
    with pytest.raises(NonFiniteLoss, match="at step 6"):
        window.check(spec, "out")


def _engine(spec):
    from lengen.train import runtime
    from lengen.train.train import build_model, make_engine

    runtime.setup(spec.runtime)
    return make_engine(spec, build_model(spec))


def test_batches_made_ahead_in_a_worker_train_bitwise_as_batches_made_in_the_step():
    """Prefetch (CUDA's default) changes when a step's batches are made, not what they are: the
    same losses and weights, bitwise; and the tokens counted exclude bucket padding."""
    from lengen import tasks
    from lengen.train.train import Batches, train_step
    from tests.helpers import make_spec

    spec = make_spec("sparse_parity", train={"length_buckets": [64]})
    runs = {}
    for prefetch in (False, True):
        engine = _engine(spec)
        batches = Batches(tasks.get(spec.experiment), spec, engine, prefetch=prefetch)
        losses, tokens = [], []
        for step in range(4):
            loss, fed = train_step(engine, batches, step)
            losses.append(loss)
            tokens.append(fed)
        assert (batches.pool is not None) == prefetch and (4 in batches.ahead) == prefetch
        batches.close()
        assert batches.ahead == {}
        weights = [p.detach().clone() for p in engine.module.parameters()]
        runs[prefetch] = (torch.cat(losses), tokens, weights)
    (loss_a, tok_a, w_a), (loss_b, tok_b, w_b) = runs[False], runs[True]
    torch.testing.assert_close(loss_a, loss_b, rtol=0, atol=0)
    for a, b in zip(w_a, w_b, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert tok_a == tok_b
    rank_spec = Batches(tasks.get(spec.experiment), spec, _engine(spec), prefetch=False).rank_spec
    drawn = tasks.get(spec.experiment).train_batch(rank_spec, np.random.default_rng([0, 0, 0]), 0)
    assert drawn.tokens.shape[1] < 65 and tok_a[0] == drawn.tokens[:, :-1].size  # not 4 x 64


def test_one_process_trains_without_deepspeeds_all_reduce_bitwise_as_with_it():
    """runtime.deepspeed_engine on one process without ZeRO turns DeepSpeed's gradient
    all-reduce off (it flattens every gradient, divides it by 1, reduces it alone and copies it
    back, each step): the same losses and weights, bitwise, as with it on."""
    from lengen import tasks
    from lengen.train.train import Batches, train_step
    from tests.helpers import make_spec

    spec = make_spec("sparse_parity")
    runs = {}
    for allreduce in (False, True):
        engine = _engine(spec)
        assert engine.enable_backward_allreduce is False
        engine.enable_backward_allreduce = allreduce
        calls, reduce = [], engine.allreduce_gradients
        engine.allreduce_gradients = lambda *a, r=reduce, c=calls, **k: c.append(1) or r(*a, **k)
        batches = Batches(tasks.get(spec.experiment), spec, engine, prefetch=False)
        losses = [train_step(engine, batches, step)[0] for step in range(4)]
        batches.close()
        assert len(calls) == (4 if allreduce else 0)
        runs[allreduce] = (torch.cat(losses), [p.detach().clone() for p in engine.parameters()])
    (loss_a, w_a), (loss_b, w_b) = runs[False], runs[True]
    torch.testing.assert_close(loss_a, loss_b, rtol=0, atol=0)
    for a, b in zip(w_a, w_b, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("ppc", [False, True])
def test_the_chunked_loss_equals_the_loss_in_one_piece(ppc):
    """runtime.loss_chunk_tokens: the same loss and gradients (up to the order of fp32 sums),
    also where a whole chunk is unscored; with a chunk at least the batch's tokens, bitwise."""
    model = _model("learned", ppc).train()
    example = _example(np.random.default_rng(1), rows=4, length=12)
    example.target_mask[:2] = 0  # the first 22 tokens unscored: chunks of 5 with nothing scored
    inputs = example.model_inputs()

    def loss_and_grads(chunk):
        model.zero_grad()
        output = model(inputs["input_ids"], inputs["position_ids"])
        outputs = output if isinstance(output, tuple) else (output,)
        kept = [o.detach().clone() for o in outputs]
        loss = training_loss(output, inputs, chunk)
        loss.backward()
        for before, after in zip(kept, outputs, strict=True):  # the logits are left as they were
            torch.testing.assert_close(after.detach(), before, rtol=0, atol=0)
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    whole, grads = loss_and_grads(0)
    for chunk in (5, 16, 44):
        loss, chunk_grads = loss_and_grads(chunk)
        exact = {"rtol": 0, "atol": 0} if chunk >= 44 else {"rtol": 1e-5, "atol": 1e-6}
        torch.testing.assert_close(loss, whole, **exact)
        for a, b in zip(chunk_grads, grads, strict=True):
            torch.testing.assert_close(a, b, **exact)


def test_the_optimizer_is_fused_on_cuda_only(monkeypatch):
    from lengen.train import runtime, train
    from tests.helpers import make_spec

    seen = {}
    monkeypatch.setattr(runtime, "deepspeed_engine", lambda spec, model, opt, sched: opt)
    for device in ("cpu", "cuda"):
        spec = make_spec(
            "sparse_parity", runtime={"device": device, "precision": "fp32", "zero_stage": 0}
        )
        seen[device] = train.make_engine(spec, train.build_model(spec)).defaults["fused"]
    assert seen == {"cpu": None, "cuda": True}


@pytest.mark.parametrize("chunk", [0, 7])
def test_a_training_step_on_cuda_never_waits_for_the_device(device, chunk):
    """The GPU half of the no-sync check: forward, loss (in one piece and chunked), backward and
    the fused AdamW step under torch.cuda.set_sync_debug_mode("error"), which raises on any
    host-device synchronisation. On the CPU the same step is traced with fullgraph=True above."""
    if device != "cuda":
        pytest.skip("CUDA only (pytest --device cuda -m device); the CPU check is the trace above")
    model = _model("learned", True).train().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    inputs = _example(np.random.default_rng(0)).model_inputs(id_limit=model.cfg.id_limit)
    inputs = {k: v.pin_memory().to(device, non_blocking=True) for k, v in inputs.items()}
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            loss = training_loss(model(inputs["input_ids"], inputs["position_ids"]), inputs, chunk)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(loss).item()
