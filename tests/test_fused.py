"""Fused runs (lengen.model.fused, issue 45): R models of one shape as one computation give
each model's own outputs, gradients and training trajectory."""

from __future__ import annotations

import json

import pytest
import torch

from lengen.model.fused import FusedGPTNeoX
from lengen.model.model import GPTNeoX, ModelConfig

SCHEMES = {  # every position scheme the trainer runs (lengen.core.positions)
    "rope (RoPE + PoSE)": dict(position="rope", rotary_pct=0.5),
    "rope, log-length scaling": dict(position="rope", attn_scale="log_length"),
    "absolute (+ shift)": dict(position="learned"),
    "PPC": dict(position="learned", predict_positions=True),
    "NoPE": dict(position="nope"),
    "ALiBi": dict(position="alibi"),
}
R, B, T, V = 3, 4, 9, 17
TOL = dict(atol=1e-6, rtol=1e-5)  # batched vs single matmuls: fp32 sums in another order


def members(scheme: dict) -> list[GPTNeoX]:
    """R models of one config, each drawn from its own seed (as runs are)."""
    cfg = ModelConfig(vocab_size=V, n_layer=2, n_head=2, d_model=16, l_max=40, **scheme)
    out = []
    for seed in range(R):
        torch.manual_seed(seed)
        out.append(GPTNeoX(cfg))
    return out


def batches(seed: int = 0):
    """One batch per run: its own tokens and position IDs (R, B, T)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (R, B, T), generator=g)
    pos = torch.randint(0, 30, (R, B, 1), generator=g) + torch.arange(T)  # shifted IDs, as PoSE
    return ids, pos


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name", SCHEMES)
def test_fused_outputs_and_gradients_equal_each_model(name):
    models = members(SCHEMES[name])
    fused = FusedGPTNeoX(models)
    ids, pos = batches()
    outs = as_tuple(fused(ids, pos))
    for r, model in enumerate(models):
        for got, want in zip(outs, as_tuple(model(ids[r], pos[r])), strict=True):
            torch.testing.assert_close(got[r], want, **TOL)
    # gradients: the sum of the runs' losses gives each run its own loss's gradient
    sum(o.square().mean(dim=(1, 2, 3)).sum() for o in outs).backward()
    for r, model in enumerate(models):
        sum(o.square().mean() for o in as_tuple(model(ids[r], pos[r]))).backward()
        for pname, p in model.named_parameters():
            torch.testing.assert_close(fused.member_weight(pname, r, grad=True), p.grad, **TOL)
    # linear weights are stored as the batched matmul reads them, [R, in, out], contiguous
    out_proj = fused.w("embed_out.weight")
    assert out_proj.shape == (len(models), *models[0].embed_out.weight.T.shape)
    assert out_proj.is_contiguous() and out_proj.grad.is_contiguous()
    # a member is its model again
    for r, model in enumerate(models):
        back = fused.member(r)
        for (n1, a), (n2, b) in zip(back.named_parameters(), model.named_parameters(), strict=True):
            assert n1 == n2 and torch.equal(a, b)


@pytest.mark.parametrize("name", SCHEMES)
def test_fused_greedy_decoding_equals_each_model(name):
    """Greedy decoding of a fused group (one pass for R runs, each its own prompts: (R, B, P))
    generates each member's own tokens and position IDs, with the static KV cache and without
    (every scheme: RoPE's and ALiBi's keys cached with their IDs, PPC's predicted IDs fed back)."""
    from lengen.analysis.decode import greedy_decode

    models = [m.eval() for m in members(SCHEMES[name])]
    fused = FusedGPTNeoX(models).eval()
    ids, pos = batches(seed=1)
    prompt, prompt_ids = ids[:, :, :5].numpy(), (pos[:, :, :5] % 20).numpy()
    for use_cache in (True, False):
        together = greedy_decode(fused, prompt, prompt_ids, 8, use_cache=use_cache)
        assert together.tokens.shape == (R, B, 8)
        for r, model in enumerate(models):
            alone = greedy_decode(model, prompt[r], prompt_ids[r], 8, use_cache=use_cache)
            assert (together.tokens[r] == alone.tokens).all(), (r, use_cache)
            assert (together.position_ids[r] == alone.position_ids).all(), (r, use_cache)


def test_a_group_needs_one_shape():
    a = members(SCHEMES["NoPE"])[0]
    b = GPTNeoX(ModelConfig(vocab_size=V, n_layer=1, n_head=2, d_model=16, position="nope"))
    with pytest.raises(ValueError, match="one ModelConfig"):
        FusedGPTNeoX([a, b])


def test_per_run_clipping_is_each_runs_own():
    """Each run's gradient is clipped by its own norm (torch's clip_grad_norm_ on that model
    alone), not by the group's."""
    models = members(SCHEMES["PPC"])
    fused = FusedGPTNeoX(models)
    ids, pos = batches()
    scale = torch.tensor([1.0, 100.0, 0.01])  # three very different gradient norms
    outs = as_tuple(fused(ids, pos))
    sum((o.mean(dim=(1, 2, 3)) * scale).sum() for o in outs).backward()
    norms = fused.clip_run_grads_(0.5)
    for r, model in enumerate(models):
        sum(o.mean() * scale[r] for o in as_tuple(model(ids[r], pos[r]))).backward()
        want = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        torch.testing.assert_close(norms[r], want, **TOL)
        for pname, p in model.named_parameters():
            torch.testing.assert_close(fused.member_weight(pname, r, grad=True), p.grad, **TOL)


def test_training_fused_equals_training_each_run_alone():
    """AdamW steps with per-run clipping on the fused group follow each run trained alone (its
    own batches, its own clipping) to the stated tolerance, and a run that stops early stops
    changing while the others go on."""
    models = members(SCHEMES["ALiBi"])
    alone = [GPTNeoX(m.cfg) for m in models]
    for a, m in zip(alone, models, strict=True):
        a.load_state_dict(m.state_dict())
    fused = FusedGPTNeoX(models)
    opt = torch.optim.AdamW(fused.parameters(), lr=3e-3, weight_decay=0.1)
    opts = [torch.optim.AdamW(a.parameters(), lr=3e-3, weight_decay=0.1) for a in alone]
    stop_at = {1: 3}  # run 1 stops after step 3
    active = torch.ones(R, dtype=torch.bool)
    for step in range(6):
        ids, pos = batches(step)
        labels = torch.roll(ids, -1, dims=-1)
        logits = fused(ids, pos)
        losses = torch.nn.functional.cross_entropy(
            logits.flatten(1, 2).transpose(1, 2), labels.flatten(1), reduction="none"
        ).mean(1)
        opt.zero_grad()
        (losses * active).sum().backward()
        fused.clip_run_grads_(1.0)
        frozen = {n: p.detach()[~active].clone() for n, p in fused.weights.items()}
        opt.step()
        with torch.no_grad():  # a stopped run does not change (AdamW's decay and momentum too)
            for n, p in fused.weights.items():
                p[~active] = frozen[n]
        for r, (a, o) in enumerate(zip(alone, opts, strict=True)):
            if not active[r]:
                continue
            loss = torch.nn.functional.cross_entropy(a(ids[r], pos[r]).transpose(1, 2), labels[r])
            torch.testing.assert_close(losses[r], loss, **TOL)
            o.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(a.parameters(), 1.0)
            o.step()
        for r, s in stop_at.items():
            if step + 1 == s:
                active[r] = False
    for r, a in enumerate(alone):
        for pname, p in a.named_parameters():
            # the key bias's gradient is 0 in exact arithmetic (softmax is shift-invariant per
            # query), so AdamW normalizes rounding noise into its steps: its ~1e-5 entries differ
            # by up to 1.07e-5 between kernels' summation orders (AMD EPYC, 2026-11-27); 1% of lr
            atol = 3e-5 if pname.endswith("query_key_value.bias") else 1e-5
            torch.testing.assert_close(fused.member_weight(pname, r), p, atol=atol, rtol=1e-4)


# the fused benchmarks' options for a tiny group, one step and no warm-up (on the CPU)
TINY_GROUP = ["--layers", "1", "--width", "16", "--heads", "2", "--batch", "2", "--length", "5"]
TINY_GROUP += ["--steps", "1", "--warmup", "0"]


def test_the_fused_benchmark_runs_and_reports_its_ratio(tmp_path):
    from .conftest import ROOT
    from .helpers import load_script

    bench = load_script(ROOT / "benchmarks" / "fused.py")
    out = tmp_path / "fused.json"
    rows = bench.main([*TINY_GROUP, "--runs", "1", "2", "--json", str(out)])
    assert [r["runs"] for r in rows] == [1, 2] and all(r["ratio"] > 0 for r in rows)
    assert out.exists()


def test_the_fused_profile_groups_the_step_and_names_its_top_operators(tmp_path):
    """benchmarks/fused_profile.py (the next GPU lease's look at the fused step's time): on the
    CPU it profiles a tiny group's step, groups the operators (matmuls among them) and writes
    them."""

    from .conftest import ROOT
    from .helpers import load_script

    bench = load_script(ROOT / "benchmarks" / "fused_profile.py")
    out = tmp_path / "profile.json"
    found = bench.main([*TINY_GROUP, "--runs", "2", "--json", str(out)])
    assert found["wall_s"] > 0 and "matmul" in found["groups_s"] and found["top"]
    assert abs(sum(found["groups_s"].values()) - found["device_busy_s"]) < 1e-9
    assert json.loads(out.read_text())["setup"]["runs"] == 2


def test_the_fused_profile_counts_kernels_once_and_not_cupti_overhead():
    """The first H200 profile (2026-11-26) summed CUPTI's "Command Buffer Full" records as device
    time (915 ms in a 106 ms step) and grouped them as matmuls ("mm" in "Command"), besides the
    host operators' kernel time on top of the kernels'; the third (lease 3) counted the GPU span
    of torch's "Optimizer.step#AdamW.step" on top of AdamW's kernels. On CUDA the tally counts the
    device's own events once and the full launch queue apart."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from .conftest import ROOT
    from .helpers import load_script

    bench = load_script(ROOT / "benchmarks" / "fused_profile.py")

    def event(name, us, device=DeviceType.CUDA, annotation=False):
        return SimpleNamespace(
            name=name,
            device_type=device,
            self_cpu_time_total=us,
            is_user_annotation=annotation,
            time_range=SimpleNamespace(elapsed_us=lambda: us),
        )

    events = [
        event("aten::bmm", 900, DeviceType.CPU),  # the host side of the kernels below
        event("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", 300),
        event("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", 300),
        event("void at::native::bfloat16_copy_kernel_cuda", 200),
        event("void at::native::reduce_kernel<512, 1>", 100),
        event("Command Buffer Full", 50_000),
        event("Command Buffer Full", 50_000),
        event("Optimizer.step#AdamW.step", 400, annotation=True),
    ]  # spans kernels
    found = bench.tally(events, "cuda", steps=2, top=2)
    assert found["device_busy_s"] == pytest.approx(900e-6 / 2)
    assert found["groups_s"] == pytest.approx(
        {"matmul": 300e-6, "copy/cast": 100e-6, "reduction": 50e-6}
    )
    assert found["queue_full_per_step"] == 1
    assert found["top"][0] == {"op": events[1].name, "s_per_step": 300e-6, "calls": 1}
    assert bench.group_of("Command Buffer Full") == "other"
