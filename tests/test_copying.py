"""The copying diagnostic (lengen.analysis.copying): repeated spans, copy gain, head scores."""

import numpy as np
import pytest
import torch

from lengen.analysis.copying import head_scores, repeat_copy_gain, repeated_random
from lengen.core.positions import true_position_ids
from lengen.model.model import GPTNeoX, ModelConfig


def test_repeated_random_writes_each_span_twice_without_end_of_text():
    w = repeated_random(vocab_size=50, half=6, n=5, seed=3)
    assert w.shape == (5, 13)
    assert (w[:, :6] == w[:, 6:12]).all() and (w[:, 12] == w[:, 0]).all()
    assert w.min() >= 1 and w.max() < 50
    assert (w == repeated_random(50, 6, 5, 3)).all()  # seeded


@pytest.mark.parametrize("position", ["rope", "alibi", "nope"])
def test_head_scores_are_attention_masses_per_layer_and_head(position):
    torch.manual_seed(0)
    model = GPTNeoX(ModelConfig(vocab_size=40, n_layer=2, n_head=3, d_model=24, position=position))
    scores = head_scores(model.eval(), 40, half=8, n=4, seed=0)
    assert list(scores[["layer", "head"]].itertuples(index=False, name=None)) == [
        (layer, head) for layer in range(2) for head in range(3)
    ]
    assert ((scores.prev_token >= 0) & (scores.prev_token + scores.induction <= 1 + 1e-6)).all()
    if position == "nope":  # an untrained NoPE head attends ~uniformly: 1 / (number of keys)
        assert scores.prev_token.iloc[0] == pytest.approx(np.mean(1 / np.arange(10, 17)), rel=0.2)


def test_a_model_trained_to_copy_scores_high_and_an_untrained_one_zero():
    """A model trained on repeated random spans copies (here from step ~100; with one fixed span
    length a head can do it by relative position alone): its second copy is far cheaper than its
    first, and a layer-1 head attends to the token after the earlier occurrence."""
    torch.manual_seed(0)
    model = GPTNeoX(ModelConfig(vocab_size=16, n_layer=2, n_head=2, d_model=32))
    assert abs(repeat_copy_gain(model.eval(), 16, 8, 32, 0)) < 0.1
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(150):
        w = torch.as_tensor(repeated_random(16, 8, 32, seed=100 + step))
        ids = torch.as_tensor(true_position_ids(len(w), w.shape[1] - 1))
        loss = torch.nn.functional.cross_entropy(model(w[:, :-1], ids).transpose(1, 2), w[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    assert repeat_copy_gain(model, 16, 8, 64, 0) > 1.0  # nats; the first copy costs ~log 16
    assert head_scores(model, 16, 8, 64, 0).query("layer == 1").induction.max() > 0.3
