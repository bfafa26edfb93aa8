"""Fixed test sets and the length-sweep evaluator."""

from __future__ import annotations

import numpy as np
import torch

from lengen.evaluate import final_token_accuracy, read_testset, write_testset
from lengen.model import GPTNeoX, ModelConfig
from lengen.tasks import sparse_parity as sp

EVAL = {"lengths": [8, 20], "k_test": [1, 3, 6], "n_examples": 10, "batch_size": 4}


def test_testset_is_fixed_by_the_seed_and_covers_the_grid(tmp_path):
    write_testset(EVAL, 20, 5, tmp_path / "a.npz")
    write_testset(EVAL, 20, 5, tmp_path / "b.npz")
    write_testset(EVAL, 20, 6, tmp_path / "c.npz")
    a, b, c = (read_testset(tmp_path / f"{x}.npz") for x in "abc")
    assert sorted(a) == [(8, 1), (8, 3), (20, 1), (20, 3), (20, 6)]  # k < l only
    for key in a:
        assert a[key].shape == (10, key[0] + 3)
        np.testing.assert_array_equal(a[key], b[key])
        flagged = ((a[key][:, 1:-2:2] - 3) <= 10).sum(axis=1)
        assert (flagged == key[1]).all()
    assert any((a[key] != c[key]).any() for key in a)


def test_final_token_accuracy_matches_a_direct_computation():
    torch.manual_seed(0)
    model = GPTNeoX(ModelConfig(vocab_size=24, n_layer=1, n_head=2, d_model=16)).eval()
    tokens = sp.sample(np.random.default_rng(0), 13, 10, 2, 20).tokens
    acc = final_token_accuracy(model, tokens, batch_size=4)  # batches of 4, 4, 4, 1
    inputs = sp.test_example(sp.Batch(tokens, tokens * 0, None, None)).model_inputs()
    with torch.no_grad():
        pred = model(inputs["input_ids"], inputs["position_ids"])[:, -1].argmax(-1).numpy()
    assert acc == (pred == tokens[:, -1]).mean()
