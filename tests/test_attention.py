"""Sparse-parity attention diagnostic: token categories on a hand-made sequence; attention rows
equal transformers' own (eager) attention probabilities; accuracy by number of flagged ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lengen.analysis import attention
from lengen.model.hf import to_transformers
from lengen.model.model import GPTNeoX, ModelConfig
from lengen.tasks import sparse_parity as sp


def test_categories_of_a_hand_made_sequence():
    # <BOS> 3 t1 15 t0 10 t1 <SEP> t0   (N = 20: 3 and 10 flagged, 15 not; b* = 1 xor 1 = 0)
    toks = [sp.BOS, 3 + 3, sp.T1, 15 + 3, sp.T0, 10 + 3, sp.T1, sp.SEP, sp.T0]
    cat = attention.token_categories(np.array([toks]), 20)[0]
    names = [attention.CATEGORIES[c] for c in cat]
    assert names == [
        "bos",
        "flagged_j",
        "flagged_bit",
        "unflagged",
        "unflagged",
        "flagged_j",
        "flagged_bit",
        "sep",
    ]
    by_ones = attention.accuracy_by_ones(np.array([toks]), np.array([sp.T1]), 20)
    assert by_ones.to_dict("records") == [{"ones": 2, "accuracy": 0.0, "n": 1}]


def test_attention_rows_equal_transformers_eager_attentions():
    torch.manual_seed(0)
    model = GPTNeoX(ModelConfig(vocab_size=24, n_layer=2, n_head=4, d_model=32)).eval()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    batch = sp.sample(np.random.default_rng(0), 3, 12, 4, 20)
    ours = attention.last_query_attention(model, batch.tokens)  # (L, B, H, T)
    inputs = sp.test_example(batch).model_inputs()
    hf = to_transformers(model, attn_implementation="eager")
    with torch.no_grad():
        out = hf(
            input_ids=inputs["input_ids"],
            position_ids=inputs["position_ids"],
            output_attentions=True,
        )
    theirs = torch.stack([a[:, :, -1] for a in out.attentions])
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-4)
    mass = attention.attention_mass(model, batch.tokens, 20)
    totals = mass.groupby(["layer", "head"])["mass"].sum()
    np.testing.assert_allclose(totals.to_numpy(), 1.0, atol=1e-5)  # categories partition keys


def test_selectivity_is_zero_for_uniform_attention_and_log_ratio_otherwise():
    """Uniform attention over the 2l + 2 keys gives log ratio 0; weighting each flagged token
    e times an unflagged one gives log ratio 1."""
    import math

    import pandas as pd

    k, length = 3, 20  # l = 10: 2k = 6 flagged, 2(l - k) = 14 unflagged, plus <BOS> and <SEP>
    rows = []
    for weight, name in ((1.0, "uniform"), (math.e, "sharper")):
        z = 6 * weight + 14 + 2
        for cat, mass in (
            ("flagged_j", 3 * weight / z),
            ("flagged_bit", 3 * weight / z),
            ("unflagged", 14 / z),
            ("bos", 1 / z),
            ("sep", 1 / z),
        ):
            rows.append({"head": name, "length": length, "category": cat, "mass": mass})
    sel = attention.selectivity(pd.DataFrame(rows), k).set_index("head")["log_ratio"]
    np.testing.assert_allclose([sel["uniform"], sel["sharper"]], [0.0, 1.0], atol=1e-12)


@pytest.mark.parametrize("attn_scale", ["none", "log_length"])
def test_attention_rows_reproduce_each_layers_output(attn_scale):
    """probs @ values equals what each layer's attention actually computed for the last token
    (the input of its output projection), with and without log-length scaling."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=24, n_layer=2, n_head=4, d_model=32, attn_scale=attn_scale)
    model = GPTNeoX(cfg).eval()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    batch = sp.sample(np.random.default_rng(1), 3, 12, 4, 20)
    probs = attention.last_query_attention(model, batch.tokens)  # (L, B, H, T)
    seen, values = [], []
    for layer in model.layers:
        layer.attention.dense.register_forward_hook(lambda m, i, o: seen.append(i[0][:, -1]))
        layer.attention.query_key_value.register_forward_hook(
            lambda m, i, o: values.append(o.view(*o.shape[:2], 4, 24)[..., 16:].transpose(1, 2))
        )
    inputs = sp.test_example(batch).model_inputs()
    with torch.no_grad():
        model(inputs["input_ids"], inputs["position_ids"])
    for layer_probs, v, y in zip(probs, values, seen, strict=True):
        mixed = (layer_probs[..., None] * v).sum(-2)  # (B, H, D)
        torch.testing.assert_close(mixed.reshape(len(y), -1), y, atol=1e-5, rtol=1e-4)
