"""GPT-NeoX model: equal to transformers' GPTNeoXForCausalLM, RoPE relative, causal."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lengen.model.hf import to_transformers
from lengen.model.model import GPTNeoX, ModelConfig


def _random_pair(rotary_pct: float, device: str):
    """Our GPTNeoX with non-trivial weights (biases and norms too) and transformers' copy of it,
    both on `device`, and a batch of tokens with arbitrary (PoSE-like) position IDs."""
    torch.manual_seed(0)
    model = GPTNeoX(
        ModelConfig(vocab_size=30, n_layer=2, n_head=4, d_model=32, rotary_pct=rotary_pct)
    )
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    model.eval()
    hf = to_transformers(model).to(device)
    ids = torch.randint(0, 30, (3, 17))
    pos = torch.sort(torch.randint(1, 400, (3, 17)), dim=1).values
    return model.to(device), hf, ids.to(device), pos.to(device)


@pytest.mark.parametrize("rotary_pct", [0.25, 1.0])
def test_same_outputs_as_transformers_gpt_neox(rotary_pct, device):
    model, hf, ids, pos = _random_pair(rotary_pct, device)
    with torch.no_grad():
        ours = model(ids, pos)
        theirs = hf(input_ids=ids, position_ids=pos).logits
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-4)


def test_bf16_autocast_stays_within_bf16_tolerance_of_fp32_and_of_transformers(device):
    """The GPU tiers train and time under bf16 autocast (runtime.precision, the throughput
    benchmark): there our model must stay within bf16 rounding of its own fp32 logits and of
    transformers' under the same autocast. The bound, 0.02 of the logits' range, is ~6x the
    largest error measured on CPU (0.0035 of the range)."""
    model, hf, ids, pos = _random_pair(1.0, device)
    with torch.no_grad():
        exact = model(ids, pos)
        with torch.autocast(device, dtype=torch.bfloat16):
            ours = model(ids, pos).float()
            theirs = hf(input_ids=ids, position_ids=pos).logits.float()
    bound = 0.02 * (exact.max() - exact.min()).item()
    assert (ours - exact).abs().max().item() <= bound
    assert (ours - theirs).abs().max().item() <= bound
    assert not torch.equal(ours, exact)  # autocast really ran in bf16


def _model(position="rope"):
    torch.manual_seed(1)
    return GPTNeoX(
        ModelConfig(vocab_size=24, n_layer=2, n_head=4, d_model=32, position=position, l_max=64)
    ).eval()


def test_rope_is_relative_shifting_all_ids_leaves_logits_unchanged():
    model = _model()
    ids = torch.randint(0, 24, (2, 20))
    pos = torch.arange(1, 21).repeat(2, 1)
    with torch.no_grad():
        a = model(ids, pos)
        b = model(ids, pos + 137)
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_absolute_positions_are_not_shift_invariant_and_checked():
    """IDs beyond the learned table are an error where IDs are made, on the host (the batch's
    model_inputs, the decoder), never in the forward (a host sync per call)."""
    from lengen.analysis.decode import greedy_decode
    from lengen.core.batch import Example

    model = _model("learned")
    assert model.cfg.id_limit == model.cfg.l_max and _model("rope").cfg.id_limit is None
    ids = torch.randint(0, 24, (2, 20))
    pos = torch.arange(1, 21).repeat(2, 1)
    with torch.no_grad():
        assert not torch.allclose(model(ids, pos), model(ids, pos + 5))
    limit = model.cfg.l_max
    ok = Example(ids.numpy(), pos.numpy() + limit - 20, np.ones((2, 20), int))
    ok.model_inputs(id_limit=limit)
    bad = Example(ids.numpy(), pos.numpy() + limit - 19, np.ones((2, 20), int))
    with pytest.raises(ValueError, match=rf"position IDs must lie in \[0, {limit}\].*{limit + 1}"):
        bad.model_inputs(id_limit=limit)
    bad.model_inputs()  # no limit given: not checked (RoPE, ALiBi, NoPE)
    prompt, prompt_ids = ids[:, :5].numpy(), pos[:, :5].numpy() + limit - 10
    greedy_decode(model, prompt, prompt_ids, 5)  # last ID + 5 = l_max: fits
    with pytest.raises(ValueError, match="position IDs"):
        greedy_decode(model, prompt, prompt_ids, 6)


@pytest.mark.parametrize("position", ["rope", "learned"])
def test_causal_later_tokens_do_not_change_earlier_logits(position):
    model = _model(position)
    ids = torch.randint(0, 24, (2, 20))
    pos = torch.arange(1, 21).repeat(2, 1)
    changed = ids.clone()
    changed[:, 12:] = (changed[:, 12:] + 7) % 24
    with torch.no_grad():
        a, b = model(ids, pos), model(changed, pos)
    torch.testing.assert_close(a[:, :12], b[:, :12])
    assert not torch.allclose(a[:, 12:], b[:, 12:])


def test_log_length_scaling_is_an_exact_logit_multiplier_and_cache_consistent():
    """attn_scale='log_length' (a labelled departure): query at index t has its logits multiplied
    by max(1, log(t + 1)); step-by-step decoding with the KV cache gives the same logits."""
    from lengen.model.model import KVCache, log_length_scale

    scale = log_length_scale(0, 30).squeeze(1)
    assert scale[0] == 1.0 and scale[1] == 1.0  # log 1, log 2 < 1: no change for tiny contexts
    torch.testing.assert_close(scale[29], torch.log(torch.tensor(30.0)))
    torch.manual_seed(0)
    cfg = dict(vocab_size=24, n_layer=2, n_head=4, d_model=32)
    plain, scaled = (
        GPTNeoX(ModelConfig(**cfg)).eval(),
        GPTNeoX(ModelConfig(**cfg, attn_scale="log_length")).eval(),
    )
    scaled.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 24, (2, 30))
    pos = torch.arange(1, 31).repeat(2, 1)
    with torch.no_grad():
        a, b = plain(ids, pos), scaled(ids, pos)
        torch.testing.assert_close(a[:, :2], b[:, :2])  # log 1, log 2 < 1: scale 1
        assert not torch.allclose(a[:, 10:], b[:, 10:])
        cache = KVCache(2)
        steps = [scaled(ids[:, :7], pos[:, :7], cache=cache)]
        steps += [scaled(ids[:, t : t + 1], pos[:, t : t + 1], cache=cache) for t in range(7, 30)]
    torch.testing.assert_close(torch.cat(steps, 1), b, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="attn_scale"):
        ModelConfig(vocab_size=5, attn_scale="log")


def test_learned_positions_cover_ids_0_to_l_max_and_name_a_bad_id():
    from lengen.model.positions import LearnedAbsolutePositions

    pos = LearnedAbsolutePositions(l_max=10, d_model=4)
    assert pos.embed.num_embeddings == 11  # IDs 0..l_max, one row each
    out = pos(torch.tensor([[0, 5, 10]]))
    assert torch.equal(out[0], pos.embed.weight[[0, 5, 10]])
    from lengen.core.batch import check_position_ids  # the check, on the host side

    check_position_ids(np.array([[0, 5, 10]]), 10)
    with pytest.raises(ValueError, match=r"must lie in \[0, 10\].*got \[0, 11\]"):
        check_position_ids(np.array([[0, 11]]), 10)
    with pytest.raises(ValueError, match=r"must lie in \[0, 10\].*got \[-1, 3\]"):
        check_position_ids(np.array([[-1, 3]]), 10)


def test_alibi_slopes_are_the_papers_and_match_bloom():
    """Press et al. (2022), Sec. 3: 8 heads 1/2 ... 1/256, 4 heads 1/4 ... 1/256; the same
    slopes as transformers' BLOOM ALiBi, power of 2 or not."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    from lengen.model.positions import alibi_slopes

    assert alibi_slopes(8).tolist() == [2.0**-i for i in range(1, 9)]
    assert alibi_slopes(4).tolist() == [2.0**-i for i in (2, 4, 6, 8)]
    for n in (2, 4, 6, 8, 12, 16):
        bloom = build_alibi_tensor(torch.ones(1, 3, dtype=torch.long), n, torch.float32)
        torch.testing.assert_close(alibi_slopes(n), bloom[:, 0, 1])  # slope x key index 1


@pytest.mark.parametrize("position", ["nope", "alibi"])
def test_nope_and_alibi_models_decode_with_the_cache_and_read_positions_as_documented(position):
    """NoPE: the output does not depend on the position IDs at all. ALiBi: only on their
    differences (shifting every ID changes nothing) and it does depend on them; both decode step
    by step with the KV cache to the same logits as one causal pass."""
    from lengen.model.model import KVCache

    torch.manual_seed(0)
    model = GPTNeoX(
        ModelConfig(vocab_size=24, n_layer=2, n_head=4, d_model=32, position=position)
    ).eval()
    ids = torch.randint(0, 24, (2, 16))
    pos = torch.arange(1, 17).repeat(2, 1)
    spread = torch.cat([pos[:, :8], pos[:, 8:] + 40], dim=1)  # a PoSE-like gap
    with torch.no_grad():
        out = model(ids, pos)
        torch.testing.assert_close(model(ids, pos + 100), out)  # shift-invariant
        if position == "nope":
            torch.testing.assert_close(model(ids, torch.randint(0, 500, (2, 16))), out)
            assert len(list(model.state_dict())) == len(list(model.parameters()))  # no tables
        else:
            assert not torch.allclose(model(ids, spread)[:, 8:], out[:, 8:])
        cache = KVCache(2)
        steps = [model(ids[:, :5], spread[:, :5], cache=cache)]
        steps += [model(ids[:, t : t + 1], spread[:, t : t + 1], cache=cache) for t in range(5, 16)]
        torch.testing.assert_close(torch.cat(steps, 1), model(ids, spread), atol=1e-5, rtol=1e-4)
        # a custom mask (leave-one-out) still applies under ALiBi's bias
        from lengen.analysis.influence import attention_mask

        keep = torch.ones(1, 16, dtype=torch.bool)
        keep[0, 3] = False
        masked = model.hidden(ids[:1], pos[:1], attention_mask(keep))
        changed = ids[:1].clone()
        changed[0, 3] = (changed[0, 3] + 5) % 24
        torch.testing.assert_close(
            model.hidden(changed, pos[:1], attention_mask(keep))[:, 4:], masked[:, 4:]
        )


def test_alibi_bias_is_minus_slope_times_distance():
    from lengen.model.positions import alibi_bias, alibi_slopes

    slopes = alibi_slopes(2)  # 1/16, 1/256
    q = torch.tensor([[5, 9]])
    k = torch.tensor([[1, 5, 9]])
    bias = alibi_bias(slopes, q, k)
    assert bias.shape == (1, 2, 2, 3)
    torch.testing.assert_close(bias[0, 0], -torch.tensor([[4.0, 0.0, -4.0], [8.0, 4.0, 0.0]]) / 16)
    torch.testing.assert_close(bias[0, 1], -torch.tensor([[4.0, 0.0, -4.0], [8.0, 4.0, 0.0]]) / 256)


def test_one_scheme_vocabulary_and_model_files_of_older_code_are_refused():
    """Every scheme says what the model needs in MODEL_POSITIONS; a model file written before the
    rename (position "absolute") is refused in one line that says to retrain, not read."""
    from lengen.core.positions import MODEL_POSITIONS, SCHEME_TABLE

    assert {s.model for s in SCHEME_TABLE.values()} == set(MODEL_POSITIONS)
    assert [n for n, s in SCHEME_TABLE.items() if s.predicts_positions] == ["ppc"]
    with pytest.raises(ValueError, match="'absolute' is what code older.*now 'learned'.*rerun"):
        ModelConfig(vocab_size=4, position="absolute", predict_positions=True, l_max=8)
    with pytest.raises(ValueError, match="MODEL_POSITIONS|one of"):
        ModelConfig(vocab_size=4, position="rope_pose")


@pytest.mark.parametrize(
    ("position", "attn_scale"),
    [("rope", "log_length"), ("learned", "none"), ("alibi", "none"), ("nope", "none")],
)
def test_attention_probs_are_the_attention_forward_applies(position, attn_scale):
    """attention_probs (the analyses' one view of attention) gives, layer by layer, the weights
    forward's fused kernel applies: probs @ v through the output projection equals each layer's
    attention output, under every scheme (ALiBi's bias, log-length scaling included); rows sum
    to 1, future keys get 0, and asking for some queries returns those rows of the full map."""
    torch.manual_seed(2)
    cfg = ModelConfig(
        vocab_size=24,
        n_layer=2,
        n_head=4,
        d_model=32,
        position=position,
        l_max=64,
        attn_scale=attn_scale,
    )
    model = GPTNeoX(cfg).eval()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3)  # sharp, unequal attention
    ids = torch.randint(0, 24, (2, 12))
    pos = torch.cat([torch.arange(1, 7), torch.arange(20, 26)]).repeat(2, 1)  # a PoSE-like gap
    probs = model.attention_probs(ids, pos)  # (L, B, H, T, T)
    assert probs.shape == (2, 2, 4, 12, 12)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 2, 4, 12))
    assert (probs.triu(1) == 0).all()
    with torch.no_grad():
        x, cos_sin = model.embed(ids, pos)
        bias = model.alibi_mask(pos)
        for layer, p in zip(model.layers, probs, strict=True):
            h = layer.input_layernorm(x)
            _, _, v = layer.attention.project(h, model.rope, cos_sin)
            ours = layer.attention.dense((p @ v).transpose(1, 2).reshape(2, 12, 32))
            torch.testing.assert_close(ours, layer.attention(h, model.rope, cos_sin, bias=bias))
            x = layer(x, model.rope, cos_sin, bias=bias)
    some = model.attention_probs(ids, pos, queries=[3, -1])
    torch.testing.assert_close(some, probs[:, :, :, [3, 11]])


@pytest.mark.parametrize("rotary_pct", [0.25, 1.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_queries_and_keys_rotated_in_one_pass_are_each_rotated_alone(rotary_pct, dtype):
    """RotaryEmbedding.split_rotated (one pass over the queries and keys, a view of qkv) gives
    bitwise what `rotate` gives each, and the values untouched."""
    from lengen.model.positions import RotaryEmbedding

    head_dim = 16
    rope = RotaryEmbedding(int(head_dim * rotary_pct))
    gen = torch.Generator().manual_seed(0)
    qkv = torch.randn(3, 2, 5, 3 * head_dim, generator=gen).to(dtype)  # (B, H, T, 3D)
    cos, sin = rope.cos_sin(torch.randint(0, 50, (3, 5), generator=gen))
    q, k, v = rope.split_rotated(qkv, head_dim, cos, sin)
    want_q, want_k, want_v = qkv.split(head_dim, dim=-1)
    torch.testing.assert_close(q, rope.rotate(want_q, cos, sin), rtol=0, atol=0)
    torch.testing.assert_close(k, rope.rotate(want_k, cos, sin), rtol=0, atol=0)
    assert torch.equal(v, want_v)
