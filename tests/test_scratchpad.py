"""Scratchpad tasks (App. E.2, E.3), position schemes and PPC decoding (Sec. 5.2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lengen import cli
from lengen.analysis.decode import exact_match, greedy_decode
from lengen.core.batch import IGNORE, Example
from lengen.core.positions import scheme_test_ids, scheme_train_ids
from lengen.model.model import GPTNeoX, ModelConfig
from lengen.tasks import parity_scratchpad as ps
from lengen.tasks import variable_assignment as va
from lengen.train.loss import training_loss
from tests.helpers import argparse_namespace, edited, make_spec, sample_options


def words(tokens, vocab):
    """Token strings of one row."""
    return [vocab[t] for t in tokens]


# --- parity with scratchpad (App. E.2.1) -------------------------------------------------------


def test_parity_jump1_matches_eq21_and_its_coupled_ids():
    b = ps.sample(np.random.default_rng(0), 64, 12, 1)
    bits = b.tokens[:, 1:7] - ps.ZERO
    assert (b.tokens[:, 0] == ps.BOS).all() and (b.tokens[:, 7] == ps.SEP).all()
    assert (b.tokens[:, 8:] - ps.ZERO == np.cumsum(bits, axis=1) % 2).all()  # b'_i = XOR b_1..b_i
    assert b.coupled_ids[0].tolist() == [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6]
    assert b.target_mask[0].tolist() == [0] * 8 + [1] * 6


def test_parity_with_jumps_hand_worked():
    # bits 1 1 1 0 0 0, jump 2: parities of the first 2, 4, 6 bits are 0, 1, 1
    tokens = ps.sample(np.random.default_rng(0), 1, 12, 2).tokens[0]
    expected = ["<BOS>", "1", "1", "1", "0", "0", "0", "<SEP>", "0", "1", "1"]
    assert words(tokens, ps.VOCAB) == expected
    # each input ID repeated k times, scratchpad IDs 1..m
    assert ps.coupled_ids(6, 2).tolist() == [0, 1, 1, 2, 2, 3, 3, 0, 1, 2, 3]
    assert ps.coupled_ids(6, 3).tolist() == [0, 1, 1, 1, 2, 2, 2, 0, 1, 2]


@pytest.mark.parametrize("jump", [1, 2, 3, 4])
def test_parity_scratchpad_bit_i_is_parity_of_first_k_i_bits(jump):
    b = ps.sample(np.random.default_rng(jump), 32, 40, jump)
    bits = b.tokens[:, 1 : 1 + b.n_bits] - ps.ZERO
    m = b.n_bits // jump
    for i in range(1, m + 1):
        assert (b.tokens[:, b.prompt_len + i - 1] - ps.ZERO == bits[:, : jump * i].sum(1) % 2).all()
    assert b.n_bits % jump == 0 and b.n_bits <= 20


# --- variable assignment (App. E.3.1) ----------------------------------------------------------


def test_variable_assignment_paper_example_w2_d2():
    # App. E.3.1: <BOS>, v11, <SEP1>, v21 <- v22, v11 <- v12, v12 <- v13, v22 <- v23, <SEP2>,
    # v11 <- v12, v12 <- v13; coupled IDs 0..l, 0, I1, I1+1, I1+2, I2, I2+1, I2+2.
    chains = np.array([[1, 2, 3], [4, 5, 6]])  # v11=v1, v12=v2, v13=v3; v21=v4, v22=v5, v23=v6
    tokens, ids = va.encode(chains, np.array([1, 0, 0, 1]))
    vocab = va.vocabulary(10)
    assert words(tokens, vocab) == [
        "<BOS>",
        "v1",
        "<SEP1>",
        "v4",
        "<-",
        "v5",
        "v1",
        "<-",
        "v2",
        "v2",
        "<-",
        "v3",
        "v5",
        "<-",
        "v6",
        "<SEP2>",
        "v1",
        "<-",
        "v2",
        "v2",
        "<-",
        "v3",
    ]
    # I1 = 6 (v11 on the left in the second triple), I2 = 9
    assert ids.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0, 6, 7, 8, 9, 10, 11]
    no_pad, no_pad_ids = va.encode(chains, np.array([1, 0, 0, 1]), scratchpad=False)
    assert words(no_pad, vocab)[-2:] == ["<SEP2>", "v3"] and len(no_pad_ids) == len(no_pad)
    assert no_pad_ids.tolist() == ids[:16].tolist() + [0]  # the answer, like <SEP2>: ID 0


@pytest.mark.parametrize("depth", [2, 3, 4, 5])
def test_variable_assignment_structure(depth):
    length = 60
    b = va.sample(np.random.default_rng(depth), 16, length, depth, 200)
    w = length // (3 * depth)
    assert b.n_chains == w and 3 * depth * w <= length < 3 * depth * (w + 1)  # w as large as fits
    p = b.prompt_len
    for tokens, ids in zip(b.tokens, b.coupled_ids, strict=True):
        body = tokens[3 : p - 1].reshape(-1, 3)
        assert (body[:, 1] == va.ARROW).all()
        assert len(set(body[:, 0])) == w * depth  # distinct left-hand sides
        # every scratchpad token is the input token at its coupled ID (position coupling)
        assert (tokens[p:] == tokens[ids[p:]]).all()
        # the scratchpad follows the chain from v_init to v_{1,d+1}
        chain = tokens[p:].reshape(depth, 3)
        assert chain[0, 0] == tokens[1] and (chain[1:, 0] == chain[:-1, 2]).all()
        assert (ids[: p - 1] == np.arange(p - 1)).all() and ids[p - 1] == 0


# --- position schemes (Sec. 5.2 and its ablations) -----------------------------------------------


def test_schemes_train_and_test_ids():
    b = ps.sample(np.random.default_rng(0), 256, 20, 1)
    rng = np.random.default_rng(1)
    shifted = scheme_train_ids("ppc", rng, b.coupled_ids, 50)
    offset = shifted - b.coupled_ids
    assert (offset == offset[:, :1]).all() and shifted.max() <= 50 and offset.min() >= 0
    assert offset.max() == 50 - 10  # the offset reaches l_max - l
    true = scheme_train_ids("absolute", rng, b.coupled_ids, 50)
    assert (np.diff(true, axis=1) == 1).all() and true.max() <= 50
    pose = scheme_train_ids("rope_pose", rng, b.coupled_ids, 50)
    assert (np.diff(pose, axis=1) >= 1).all()
    assert (scheme_test_ids("ppc", b.coupled_ids) == b.coupled_ids).all()
    assert scheme_test_ids("rope_pose", b.coupled_ids)[0].tolist() == list(range(1, 23))
    for scheme in ("nope", "alibi"):  # true IDs in training and at test
        ids = scheme_train_ids(scheme, rng, b.coupled_ids, 50)
        assert (ids == np.arange(1, 23)).all()  # no shift, no PoSE
        assert scheme_test_ids(scheme, b.coupled_ids)[0].tolist() == list(range(1, 23))
    with pytest.raises(ValueError, match="scheme"):
        scheme_test_ids("alibi_typo", b.coupled_ids)


def test_position_labels_are_the_next_coupled_ids_where_scored():
    b = ps.sample(np.random.default_rng(0), 2, 8, 1)
    inputs = Example(b.tokens, b.coupled_ids, b.target_mask).model_inputs()
    assert inputs["position_labels"][0].tolist() == [IGNORE] * 5 + [1, 2, 3, 4]
    cfg = ModelConfig(
        vocab_size=4,
        n_layer=1,
        n_head=2,
        d_model=16,
        position="learned",
        l_max=20,
        predict_positions=True,
    )
    out = GPTNeoX(cfg)(inputs["input_ids"], inputs["position_ids"])
    assert isinstance(out, tuple) and out[1].shape == (2, 9, 21)
    assert training_loss(out, inputs) > training_loss(out[0], inputs)  # both losses count


# --- PPC decoding ------------------------------------------------------------------------------


def random_ppc_model(seed: int = 0) -> GPTNeoX:
    """A random PPC model with large weights, so that its argmaxes vary."""
    torch.manual_seed(seed)
    vocab = va.vocab_size(make_spec("variable_assignment", task={"n_vars": 20}))
    cfg = ModelConfig(
        vocab_size=vocab,
        n_layer=2,
        n_head=2,
        d_model=32,
        position="learned",
        l_max=60,
        predict_positions=True,
        init_std=0.3,
    )
    return GPTNeoX(cfg).eval()


def test_kv_cache_decoding_equals_uncached_decoding(device):
    b = va.sample(np.random.default_rng(0), 8, 18, 2, 20)
    p = b.prompt_len
    for model in (random_ppc_model(0).to(device), random_ppc_model(1).to(device)):
        cached = greedy_decode(model, b.tokens[:, :p], b.coupled_ids[:, :p], 6)
        full = greedy_decode(model, b.tokens[:, :p], b.coupled_ids[:, :p], 6, use_cache=False)
        assert (cached.tokens == full.tokens).all()
        assert (cached.position_ids == full.position_ids).all()
        assert len(set(cached.position_ids.ravel())) > 2  # not a degenerate constant


class Spy(torch.nn.Module):
    """Wraps a model and records the position IDs it is fed."""

    def __init__(self, model):
        super().__init__()
        self.model, self.cfg, self.fed = model, model.cfg, []

    def forward(self, input_ids, position_ids, cache=None):
        self.fed.append(position_ids.clone())
        return self.model(input_ids, position_ids, cache=cache)


def test_decoder_feeds_its_own_predicted_ids_never_the_true_ones():
    model = Spy(random_ppc_model(2))
    b = va.sample(np.random.default_rng(3), 8, 18, 2, 20)
    p = b.prompt_len
    gen = greedy_decode(model, b.tokens[:, :p], b.coupled_ids[:, :p], 6)
    fed_after_prompt = torch.cat(model.fed[1:], dim=1).numpy()
    assert (fed_after_prompt == gen.position_ids[:, :-1]).all()
    assert not (gen.position_ids == b.coupled_ids[:, p:]).all()  # random model: ids differ


def test_corrupting_the_position_head_breaks_a_trained_ppc_model():
    # train a tiny PPC model on short coupled parity until it is exact, then permute its
    # position head's outputs: full-string accuracy must collapse (the IDs fed are predicted).
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=4,
        n_layer=2,
        n_head=2,
        d_model=32,
        position="learned",
        l_max=12,
        predict_positions=True,
    )
    model = GPTNeoX(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    spec = make_spec(
        "parity_scratchpad",
        task={"train_min_len": 4, "train_max_len": 8, "l_max": 12, "jump": 1},
        train={"batch_size": 64},
    )
    for step in range(400):
        inputs = ps.train_batch(spec, np.random.default_rng(step), step).model_inputs()
        loss = training_loss(model(inputs["input_ids"], inputs["position_ids"]), inputs)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    b = ps.sample(np.random.default_rng(99), 128, 8, 1)

    def accuracy() -> float:
        gen = greedy_decode(
            model,
            b.tokens[:, : b.prompt_len],
            b.coupled_ids[:, : b.prompt_len],
            b.tokens.shape[1] - b.prompt_len,
        )
        return exact_match(gen, b.tokens, b.coupled_ids, check_positions=True).mean()

    assert accuracy() >= 0.95
    with torch.no_grad():
        model.position_out.weight.copy_(model.position_out.weight.roll(1, dims=0))
    assert accuracy() <= 0.05


# --- the command line --------------------------------------------------------------------------


def test_cli_prints_what_the_model_is_fed(capsys):
    cli.main(
        [
            "sample",
            "variable_assignment",
            "--depth",
            "2",
            "--length",
            "12",
            "--n",
            "2",
            "--n-vars",
            "20",
            "--seed",
            "1",
        ]
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2
    row = rows[0]
    assert row["tokens"][0] == "<BOS>" and "<SEP2>" in row["tokens"]
    assert len(row["tokens"]) == len(row["position_ids"]) == len(row["target_mask"])
    assert row["answer"] == row["tokens"][-1] and row["v_init"] == row["tokens"][1]
    cli.main(["sample", "parity_scratchpad", "--jump", "2", "--length", "8", "--seed", "0"])
    row = json.loads(capsys.readouterr().out)
    assert row["tokens"][:1] == ["<BOS>"] and set(row["tokens"][1:5]) <= {"0", "1"}
    assert row["position_ids"] == [0, 1, 1, 2, 2, 0, 1, 2]


@pytest.mark.parametrize(
    "argv, expected",
    [
        # 4 bits 1 1 1 0, jump 2: scratchpad = parity of the first 2 bits (0), of all 4 (1); the
        # coupled IDs pair bit pair i with scratchpad bit i (App. E.2.1)
        (
            "parity_scratchpad --jump 2 --length 8 --seed 0",
            {
                "tokens": ["<BOS>", "1", "1", "1", "0", "<SEP>", "0", "1"],
                "position_ids": [0, 1, 1, 2, 2, 0, 1, 2],
                "target_mask": [0, 0, 0, 0, 0, 0, 1, 1],
                "jump": 2,
                "length": 8,
                "answer": "1",
                "scratchpad_len": 2,
            },
        ),
        # chain v2 <- v5 <- v6 among 2 chains; the scratchpad copies each step, coupled to the
        # IDs of the assignment it copies (App. E.3)
        (
            "variable_assignment --depth 2 --length 12 --n-vars 9 --seed 0",
            {
                "tokens": [
                    "<BOS>",
                    "v2",
                    "<SEP1>",
                    "v2",
                    "<-",
                    "v5",
                    "v3",
                    "<-",
                    "v1",
                    "v1",
                    "<-",
                    "v4",
                    "v5",
                    "<-",
                    "v6",
                    "<SEP2>",
                    "v2",
                    "<-",
                    "v5",
                    "v5",
                    "<-",
                    "v6",
                ],
                "position_ids": [
                    0,
                    1,
                    2,
                    3,
                    4,
                    5,
                    6,
                    7,
                    8,
                    9,
                    10,
                    11,
                    12,
                    13,
                    14,
                    0,
                    3,
                    4,
                    5,
                    12,
                    13,
                    14,
                ],
                "target_mask": [0] * 16 + [1] * 6,
                "depth": 2,
                "length": 12,
                "n_chains": 2,
                "v_init": "v2",
                "answer": "v6",
            },
        ),
        # J = 11 > N/2 not flagged, J = 1 flagged with bit 1: label 1 (Eq. (20))
        (
            "sparse_parity --k 1 --length 4 --seed 0",
            {
                "tokens": ["<BOS>", "11", "t0", "1", "t1", "<SEP>", "t1"],
                "position_ids": [1, 2, 3, 4, 5, 6, 7],
                "target_mask": [0, 0, 0, 0, 0, 0, 1],
                "label": 1,
                "k": 1,
                "length": 4,
            },
        ),
    ],
)
def test_sample_output_known_answers(argv, expected, capsys):
    cli.main(["sample", *argv.split()])
    assert capsys.readouterr().out == json.dumps(expected) + "\n"  # ints stay ints


def test_vocabularies_and_answers():
    from lengen.tasks import sparse_parity as sp

    assert sp.vocabulary(4) == ["<BOS>", "<SEP>", "t0", "t1", "1", "2", "3", "4"]
    assert va.vocabulary(3) == ["<BOS>", "<SEP1>", "<SEP2>", "<-", "v1", "v2", "v3"]
    assert ps.vocabulary() == list(ps.VOCAB)
    b = ps.sample(np.random.default_rng(5), 50, 12, 2)
    rows = ps.to_records(b.test_example("ppc"), b)
    assert [r["answer"] for r in rows] == [r["tokens"][-1] for r in rows]
    assert {r["scratchpad_len"] for r in rows} == {3} and len({r["tokens"][1] for r in rows}) == 2


def test_jump_curriculum_steps_and_the_held_out_jump():
    assert [ps.curriculum_jump(3, s, 1) for s in (0, 1, 2, 9)] == [1, 2, 3, 3]
    assert ps.curriculum_jump(3, 0, 0) == 3
    task = {"train_min_len": 12, "train_max_len": 12, "l_max": 40, "jump": 3}
    spec = make_spec("parity_scratchpad", task=task, train={"steps": 1000})
    assert ps.draw_train(spec, np.random.default_rng(0), 0).jump == 3  # no curriculum key: 0
    train = {"steps": 1000, "jump_curriculum_steps": 100}
    spec = make_spec("parity_scratchpad", task=task, train=train)
    assert ps.draw_train(spec, np.random.default_rng(0), 0).jump == 1
    held = ps.heldout_example(spec, np.random.default_rng(0))  # the final jump, not jump 1
    assert held.position_ids[0, 1:7].tolist() == [1, 1, 1, 2, 2, 2]


def test_jump_curriculum_ends_on_the_papers_format():
    """jump_curriculum_steps (a DEPARTURE): jump 1 first, then 2, ..., then the spec's jump for
    the rest of training; 0 = the paper's format from step 0."""
    assert [ps.curriculum_jump(3, s, 100) for s in (0, 99, 100, 250, 5000)] == [1, 1, 2, 3, 3]
    assert ps.curriculum_jump(3, 0, 0) == 3
    spec = make_spec(
        "parity_scratchpad",
        task={"jump": 2, "train_min_len": 10, "train_max_len": 10, "l_max": 50},
        train={"batch_size": 4, "jump_curriculum_steps": 100},
    )
    early = ps.train_batch(spec, np.random.default_rng(0), 0)
    late = ps.train_batch(spec, np.random.default_rng(0), 100)
    assert early.target_mask.sum(1).tolist() == [5] * 4  # jump 1: l = 5 scratchpad tokens
    assert late.target_mask.sum(1).tolist() == [2] * 4  # jump 2: l rounded to 4, 2 tokens


# --- scoring known answers (a planted `.all` -> `.any` in exact_match passed every test before) --


class Oracle(torch.nn.Module):
    """A 'model' that continues every test example exactly: its next token and next ID, found by
    the prompt it is given (so one oracle serves every length of a test set), except where told
    to be wrong: wrong_tokens / wrong_ids hold (prompt length, row, generated index) triples.
    Works with the KV-cache decoder: it counts the positions it has been fed since the prompt."""

    def __init__(
        self,
        examples: list[tuple[Example, int]],
        ppc: bool,
        wrong_tokens=(),
        wrong_ids=(),
        vocab: int = 64,
        l_max: int = 256,
    ):
        super().__init__()
        self.cfg = ModelConfig(vocab_size=vocab, n_layer=1, n_head=1, d_model=8, l_max=l_max)
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # so next(parameters()) has a device
        self.rows = {
            tuple(ex.tokens[r, :p]): (ex.tokens[r], ex.position_ids[r], p, r)
            for ex, p in examples
            for r in range(len(ex.tokens))
        }
        self.ppc, self.vocab, self.l_max = ppc, vocab, l_max
        self.wrong_tokens, self.wrong_ids = set(wrong_tokens), set(wrong_ids)

    def forward(self, input_ids, position_ids, cache=None):
        if input_ids.shape[1] > 1:  # a prompt: a new generation starts
            self.batch = [self.rows[tuple(row.tolist())] for row in input_ids]
            self.fed = 0
        self.fed += input_ids.shape[1]
        logits = torch.zeros(*input_ids.shape, self.vocab)
        position_logits = torch.zeros(*input_ids.shape, self.l_max)
        for i, (tokens, ids, p, r) in enumerate(self.batch):
            t = self.fed  # predicting position t (0-based) of the full sequence
            key = (p, r, t - p)
            logits[i, -1, int(tokens[t]) + (key in self.wrong_tokens)] = 1.0
            position_logits[i, -1, int(ids[t]) + (key in self.wrong_ids)] = 1.0
        return (logits, position_logits) if self.ppc else logits


@pytest.mark.parametrize("scheme", ["ppc", "absolute"])
def test_generation_accuracy_known_answers(scheme):
    from lengen.analysis.evaluate import generation_accuracy

    b = ps.sample(np.random.default_rng(0), 8, 12, 1)
    example = b.test_example(scheme)
    n_new = b.tokens.shape[1] - b.prompt_len
    assert n_new >= 3

    p = b.prompt_len

    def score(batch_size=8, **wrong) -> float:
        model = Oracle([(example, p)], ppc=scheme == "ppc", **wrong)
        return generation_accuracy(model, b, scheme, batch_size=batch_size)

    assert score() == score(batch_size=3) == 1.0  # a model that copies perfectly scores 1.0
    # one wrong token in one row (middle, last, first generated token): that row fails
    for g in (1, n_new - 1, 0):
        assert score(wrong_tokens=[(p, 3, g)]) == 7 / 8
    assert score(wrong_tokens=[(p, r, 0) for r in range(8)]) == 0.0
    assert score(wrong_tokens=[(p, 0, 1), (p, 0, 2), (p, 5, 2)], batch_size=3) == 6 / 8
    if scheme == "ppc":  # a wrong predicted ID fails the row
        assert score(wrong_ids=[(p, 2, 1)]) == 7 / 8
    else:  # without PPC the IDs are not predicted: the position head plays no part
        assert score(wrong_ids=[(p, 2, 1)]) == 1.0


def test_exact_match_known_answers():
    from lengen.analysis.decode import Generation

    tokens = np.array([[1, 2, 5, 6, 7], [1, 2, 5, 6, 7], [1, 2, 5, 6, 7], [1, 2, 5, 6, 7]])
    ids = np.array([[1, 2, 3, 4, 5]] * 4)
    gen = Generation(
        tokens=np.array([[5, 6, 7], [5, 0, 7], [0, 0, 0], [5, 6, 7]]),
        position_ids=np.array([[3, 4, 5], [3, 4, 5], [3, 4, 5], [3, 9, 5]]),
    )
    assert exact_match(gen, tokens, ids, check_positions=False).tolist() == [
        True,
        False,
        False,
        True,
    ]
    assert exact_match(gen, tokens, ids, check_positions=True).tolist() == [
        True,
        False,
        False,
        False,
    ]
    # a fused group's generation (R = 2 runs, B = 4 rows, n_new = 3) against the shared targets
    both = lambda a: np.stack([a, a[::-1]])  # noqa: E731
    fused = Generation(tokens=both(gen.tokens), position_ids=both(gen.position_ids))
    assert exact_match(fused, tokens, ids, check_positions=True).tolist() == [
        [True, False, False, False],
        [False, False, False, True],
    ]


def test_decoding_without_a_position_head_continues_the_last_id():
    """A model with no PPC head (true IDs) is fed last ID + 1 at each step, from the prompt's
    own last ID (here a shifted prompt, 5..9), cached or not."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=12, n_layer=1, n_head=2, d_model=16, position="learned", l_max=30)
    model = Spy(GPTNeoX(cfg).eval())
    prompt = np.random.default_rng(0).integers(0, 12, (3, 5))
    ids = np.tile(np.arange(5, 10), (3, 1))
    gen = greedy_decode(model, prompt, ids, 4)
    assert (gen.position_ids == np.arange(10, 14)).all()
    assert torch.cat(model.fed[1:], dim=1).tolist() == [[10, 11, 12]] * 3
    uncached = greedy_decode(model.model, prompt, ids, 4, use_cache=False)
    assert (uncached.tokens == gen.tokens).all()
    assert (uncached.position_ids == gen.position_ids).all()


# --- training and held-out draws ----------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["ppc", "absolute", "rope_pose"])
@pytest.mark.parametrize("task", ["parity_scratchpad", "variable_assignment"])
def test_training_draws_cover_the_length_range_and_heldout_uses_test_ids(task, scheme):
    module = ps if task == "parity_scratchpad" else va
    setting = {"jump": 2} if task == "parity_scratchpad" else {"depth": 2, "n_vars": 20}
    spec = make_spec(
        task,
        task={"train_min_len": 10, "train_max_len": 16, "l_max": 60, "scheme": scheme, **setting},
        train={"batch_size": 5},
    )
    seen = set()
    for step in range(60):
        rng = np.random.default_rng(step)
        ex = module.train_batch(spec, rng, step)
        b = (
            module.draw_train(spec, np.random.default_rng(step), step)
            if task == ("parity_scratchpad")
            else module.draw_train(spec, np.random.default_rng(step))
        )
        assert (ex.tokens == b.tokens).all()  # the same draw, then the scheme's IDs
        assert ex.tokens.shape[0] == 5 and ex.position_ids.max() <= 60
        seen.add(b.n_bits * 2 if task == "parity_scratchpad" else b.length)
        if scheme == "ppc":  # coupled IDs shifted by one offset per row
            offset = ex.position_ids - b.coupled_ids
            assert (offset == offset[:, :1]).all() and (offset >= 0).all()
        held = module.heldout_example(spec, np.random.default_rng(step))
        want = b.coupled_ids if scheme == "ppc" else np.arange(1, held.tokens.shape[1] + 1)
        assert (held.position_ids == want).all()  # test-time IDs, never shifted
    if task == "parity_scratchpad":  # l in 5..8 rounded down to the jump: 4, 6, 8 bits
        assert seen == {8, 12, 16}
    else:
        assert seen == set(range(10, 17))  # every l in [min, max], both ends


def test_positions_schemes_say_what_the_model_needs():
    from lengen.core.positions import model_position

    assert model_position("ppc") == {"position": "learned", "predict_positions": True}
    assert model_position("absolute") == {"position": "learned", "predict_positions": False}
    assert model_position("rope_pose") == {"position": "rope", "predict_positions": False}
    assert model_position("nope") == {"position": "nope", "predict_positions": False}
    assert model_position("alibi") == {"position": "alibi", "predict_positions": False}
    with pytest.raises(ValueError, match="scheme must be one of"):
        model_position("alibi_typo")


def test_step_rng_depends_only_on_seed_step_rank():
    from lengen.core.batch import step_rng

    draw = lambda *a: step_rng(*a).integers(0, 2**31, 4).tolist()  # noqa: E731
    assert draw(1, 5) == draw(1, 5, 0)
    assert len({tuple(draw(*a)) for a in ((1, 5), (2, 5), (1, 6), (1, 5, 1))}) == 4


@pytest.mark.parametrize("scheme", ["nope", "alibi"])
def test_nope_and_alibi_schemes_train_and_evaluate_end_to_end(scheme, tmp_path, smoke_config):
    """A scratchpad variant with scheme nope / alibi trains through the project's trainer (true
    IDs, the model built without learned positions or RoPE) and is scored by the evaluator."""
    import copy

    from lengen import tasks
    from lengen.analysis.evaluate import evaluate_scratchpad
    from lengen.config.config import validate
    from lengen.core import tracking
    from lengen.model.modelfile import read_model_file
    from lengen.train.train import train

    cfg = copy.deepcopy(smoke_config)
    cfg["results_dir"] = str(tmp_path / "results")
    cfg["parity_scratchpad"]["variants"][scheme] = {"scheme": scheme, "runs": 1}
    spec = tasks.generation_spec(validate(cfg), "parity_scratchpad", scheme, 1, 0)
    assert spec["model"]["position"] == scheme and not spec["model"]["predict_positions"]
    tracking.prepare_store(spec["tracking"]["uri"], [spec["tracking"]["experiment"]])
    path = train(spec, tmp_path / "model")
    state = read_model_file(path)["state_dict"]
    assert not any("abs_pos" in k or "rope" in k for k in state)
    table = evaluate_scratchpad(path, cfg["parity_scratchpad"]["eval"], 0, tmp_path / "eval.csv")
    assert sorted(table["length"]) == [8, 16] and table["accuracy"].between(0, 1).all()


def test_sample_options_of_parity_with_scratchpad():
    """`lengen sample parity_scratchpad`: --length is required, --jump defaults to 1, and both
    say what they mean in --help."""
    import argparse

    parser = argparse.ArgumentParser()
    ps.add_sample_arguments(parser)
    assert parser.parse_args(["--length", "16"]).jump == 1
    with pytest.raises(SystemExit):
        parser.parse_args([])
    text = " ".join(parser.format_help().split())
    assert "k: scratchpad bit i = parity of k*i bits" in text
    assert "2l; l is the number of input bits" in text
    assert "the position scheme whose test-time IDs are printed" in text
    odd = parser.parse_args(["--length", "15", "--scheme", "ppc"])
    with pytest.raises(ValueError, match=r"--length must be even \(it is 2l\), got 15"):
        ps.sample_records(odd)


def test_variable_assignment_spec_of_one_model():
    """A variable-assignment model's task section: its depth, the variant's scheme and
    scratchpad, and the section's lengths and number of variables (App. E.3.1)."""
    section = {"train_min_len": 6, "train_max_len": 18, "l_max": 60, "n_vars": 20, "depths": [2]}
    spec = va.task_spec(section, {"scheme": "rope_pose", "scratchpad": False, "runs": 3}, 3)
    assert spec == {
        "depth": 3,
        "scheme": "rope_pose",
        "train_min_len": 6,
        "train_max_len": 18,
        "l_max": 60,
        "n_vars": 20,
        "scratchpad": False,
    }


def test_a_variable_assignment_run_spec_is_its_variant_its_depth_and_its_run(smoke_config):
    """tasks.generation_spec for variable assignment: the task section of the variant at depth
    d (App. E.3.1), the variant's own model and train keys over the section's, seed + run."""
    from lengen import tasks

    section = smoke_config["variable_assignment"]
    for variant, scheme, scratchpad in (
        ("no_scratchpad", "rope_pose", False),
        ("ppc", "ppc", True),
    ):
        spec = tasks.generation_spec(smoke_config, "variable_assignment", variant, 2, 0)
        assert spec["task"] == {
            "depth": 2,
            "scheme": scheme,
            "train_min_len": 6,
            "train_max_len": 12,
            "l_max": 40,
            "n_vars": 20,
            "scratchpad": scratchpad,
        }
    assert va.train_lengths(section) == (6, 12)
    # a variant's own model and train keys override the section's; run r trains from seed + r
    cfg = edited(smoke_config, variable_assignment__variants__no_coupling__train={"lr": 0.5})
    spec = tasks.generation_spec(cfg, "variable_assignment", "no_coupling", 2, 3)
    assert spec["model"]["attn_scale"] == "log_length" and spec["model"]["n_layer"] == 1
    assert spec["train"]["lr"] == 0.5 and spec["train"]["steps"] == section["train"]["steps"]
    assert (spec["seed"], spec["variant"]) == (cfg["seed"] + 3, "no_coupling")
    assert spec["run_name"] == "no_coupling/d2/seed3"


def test_longest_inputs_and_the_variables_a_length_needs():
    """longest_tokens is the longest sequence a length gives (the position-ID range): parity
    at jump 1 (<BOS>, l bits, <SEP>, l scratchpad bits) and variable assignment with its
    scratchpad at the section's deepest depth; without the scratchpad (the spec's own flag,
    also in a training draw) it is shorter. A length needs w (d + 1) variables, no more; l = k
    bits is the shortest parity input at jump k."""
    rng = np.random.default_rng(0)
    assert ps.sample(rng, 2, 12, 1).tokens.shape[1] == ps.longest_tokens({}, 12) == 14
    assert ps.n_bits(4, 2) == 2 and ps.n_bits(9, 2) == 4
    with pytest.raises(ValueError, match=r"length 2l=3 is too short for jump 2"):
        ps.n_bits(3, 2)
    section = {"depths": [2, 3]}
    for length in (9, 18):
        full = va.sample(rng, 2, length, 3, 40).tokens.shape[1]
        assert full == va.longest_tokens(section, length) == length + 4 + 9
        assert va.sample(rng, 2, length, 3, 40, scratchpad=False).tokens.shape[1] < full
    task = {"depth": 2, "n_vars": 20, "train_min_len": 12, "train_max_len": 12, "scratchpad": False}
    spec = make_spec("variable_assignment", task=task)
    assert va.draw_train(spec, rng).tokens.shape[1] == 1 + 1 + 1 + 12 + 1 + 1
    w = va.n_chains(12, 3)  # 1 chain of 4 variables
    assert va.sample(rng, 1, 12, 3, w * 4).tokens.shape[1] > 0
    with pytest.raises(ValueError, match=rf"^{w} chains of depth 3 need more than {w * 4 - 1} "):
        va.sample(rng, 1, 12, 3, w * 4 - 1)


def test_sample_options_of_variable_assignment():
    """`lengen sample variable_assignment`: --depth and --length required, 200 variables and the
    ppc IDs by default, the scratchpad unless --no-scratchpad (Fig. 3c); --help says each."""
    parser, text = sample_options(va)
    args = parser.parse_args(["--depth", "2", "--length", "12"])
    assert (args.n_vars, args.no_scratchpad, args.scheme) == (200, False, "ppc")
    for missing in (["--depth", "2"], ["--length", "12"]):
        with pytest.raises(SystemExit):
            parser.parse_args(missing)
    ids = "the position scheme whose test-time IDs are printed"
    for phrase in (
        "d, assignments per chain",
        "l, bound on the assignment part",
        "number of variables",
        "answer token only (Fig. 3c)",
        ids,
    ):
        assert phrase in text
    args = parser.parse_args(["--depth", "2", "--length", "12", "--no-scratchpad"])
    rows = va.sample_records(argparse_namespace(args, n=2, seed=0))
    assert all(r["tokens"][-2] == "<SEP2>" for r in rows)  # the answer right after <SEP2>


def test_a_padded_batch_reaches_the_smallest_bucket_edge_and_scores_no_padding():
    """Example.padded: up to the smallest edge >= its length (edges in any order), padding
    tokens 0 at position ID 0 never scored; itself when it is at an edge or beyond them all."""
    from lengen.core.batch import Example

    ex = Example(
        np.array([[4, 5, 6], [7, 8, 9]]),
        np.array([[1, 2, 3], [3, 4, 5]]),
        np.array([[0, 0, 1], [0, 1, 1]]),
    )
    out = ex.padded((8, 4, 16))
    assert out.tokens.tolist() == [[4, 5, 6, 0], [7, 8, 9, 0]]
    assert out.position_ids.tolist() == [[1, 2, 3, 0], [3, 4, 5, 0]]
    assert out.target_mask.tolist() == [[0, 0, 1, 0], [0, 1, 1, 0]]
    assert ex.padded((3, 8)) is ex and ex.padded((2,)) is ex and ex.padded(()) is ex
    assert ex.padded((5,)).tokens.shape == (2, 5)
