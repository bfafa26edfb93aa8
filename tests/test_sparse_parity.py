"""Sparse parity data (App. E.1.1): exactly k flagged, label = XOR, lengths in range, CLI output."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lengen import cli
from lengen.tasks import parse_spec
from lengen.tasks import sparse_parity as sp
from tests.helpers import edited, make_spec, sample_options


@pytest.mark.parametrize("k,half", [(1, 10), (4, 10), (12, 25), (16, 250)])
def test_exactly_k_flagged_and_label_is_xor(k, half):
    n = 20
    b = sp.sample(np.random.default_rng(k), 200, half, k, n)
    j = b.tokens[:, 1:-2:2] - 3  # integer i has token ID 3 + i
    bits = b.tokens[:, 2:-2:2] - sp.T0
    assert ((j >= 1) & (j <= n)).all()
    assert set(np.unique(bits)) <= {0, 1}
    flagged = j <= n // 2
    assert (flagged.sum(axis=1) == k).all()
    assert (b.label == (bits * flagged).sum(axis=1) % 2).all()
    assert (b.tokens[:, -1] == sp.T0 + b.label).all()
    assert (b.tokens[:, 0] == sp.BOS).all() and (b.tokens[:, -2] == sp.SEP).all()
    assert b.tokens.shape == (200, 2 * half + 3)
    assert b.target_mask.sum() == 200 and (b.target_mask[:, -1] == 1).all()


def test_labels_are_balanced_and_flags_uniform():
    b = sp.sample(np.random.default_rng(0), 4000, 20, 3, 20)
    assert abs(b.label.mean() - 0.5) < 0.03
    flagged = (b.tokens[:, 1:-2:2] - 3) <= 10
    per_position = flagged.mean(axis=0)
    assert np.allclose(per_position, 3 / 20, atol=0.03)


@pytest.mark.parametrize("n", [4, 20])
def test_j_values_are_uniform_on_each_side_of_n_over_2(n):
    """Eq. (20): flagged J ~ Unif{1..N/2}, the others ~ Unif{N/2+1..N}; both ends included (a
    planted draw from [1, N/2) never flagged J = N/2 and passed every other test)."""
    b = sp.sample(np.random.default_rng(1), 4000, 10, 3, n)
    j = b.tokens[:, 1:-2:2] - 3
    bits = b.tokens[:, 2:-2:2] - sp.T0
    flagged = j <= n // 2
    assert (flagged.sum(axis=1) == 3).all()
    for values, side in (
        (j[flagged], range(1, n // 2 + 1)),
        (j[~flagged], range(n // 2 + 1, n + 1)),
    ):
        freq = np.bincount(values, minlength=n + 1)[list(side)] / len(values)
        assert np.allclose(freq, 1 / len(side), atol=0.02), freq
    assert set(np.unique(j)) == set(range(1, n + 1))
    assert (b.label == (bits * flagged).sum(axis=1) % 2).all()


def test_k_must_be_below_l():
    with pytest.raises(ValueError, match="k < l"):
        sp.sample(np.random.default_rng(0), 2, 4, 4, 20)


def test_train_batches_lengths_and_k_in_range(tiny_spec):
    task = {
        **tiny_spec["task"],
        "k_train": 12,
        "train_min_len": 20,
        "train_max_len": 50,
        "l_max": 510,
    }
    spec = parse_spec(
        {**tiny_spec, "task": task, "train": {**tiny_spec["train"], "batch_size": 64}}
    )
    lengths, ks = set(), set()
    for step in range(200):
        ex = sp.train_batch(spec, np.random.default_rng([0, step]), step)
        length = ex.tokens.shape[1] - 3
        assert 20 <= length <= 50 and length % 2 == 0
        flagged = ((ex.tokens[:, 1:-2:2] - 3) <= 10).sum(axis=1)
        assert (flagged >= 1).all() and (flagged <= min(12, length // 2 - 1)).all()
        lengths.add(length)
        ks.update(flagged.tolist())
        assert ex.position_ids[:, :-1].max() < spec.task.l_max  # fed IDs (last: label)
    assert lengths == set(range(20, 51, 2))
    assert ks == set(range(1, 13))


def test_alphabet_size_must_be_even_and_positive():
    assert sp.sample(np.random.default_rng(0), 3, 4, 1, 2).tokens.max() <= 3 + 2  # N = 2 is valid
    for n in (0, 3, -2):
        with pytest.raises(ValueError, match=f"N must be a positive even integer, got {n}"):
            sp.sample(np.random.default_rng(0), 3, 4, 1, n)


def test_training_k_is_uniform_per_row_capped_below_l_and_follows_the_curriculum():
    task = {"k_train": 12, "n": 20, "train_min_len": 20, "train_max_len": 20, "l_max": 40}
    spec = make_spec("sparse_parity", task=task, train={"batch_size": 600})
    b = sp.train_batch(spec, np.random.default_rng(0), 0)
    k = ((b.tokens[:, 1:-2:2] - 3) <= 10).sum(axis=1)
    assert set(k.tolist()) == set(range(1, 10))  # K_train 12 capped at l - 1 = 9, per row
    assert b.position_ids[:, :-1].max() == 39  # PoSE over the fed tokens reaches l_max - 1
    spec = make_spec(
        "sparse_parity", task=task, train={"batch_size": 600, "k_curriculum_steps": 100}
    )
    for step, top in ((0, 1), (99, 1), (250, 3)):
        b = sp.train_batch(spec, np.random.default_rng(step), step)
        k = ((b.tokens[:, 1:-2:2] - 3) <= 10).sum(axis=1)
        assert set(k.tolist()) == set(range(1, top + 1))
    lengths = {
        sp.draw_train(np.random.default_rng(s), 2, 8, 12, 3, 20).tokens.shape[1] - 3
        for s in range(40)
    }
    assert lengths == {8, 10, 12}


def test_curriculum():
    assert sp.curriculum_k(8, 0, 0) == 8
    assert [sp.curriculum_k(4, s, 100) for s in (0, 99, 100, 250, 10_000)] == [1, 1, 2, 3, 4]
    assert [sp.curriculum_k(4, s, 1) for s in (0, 1, 2, 5)] == [1, 2, 3, 4]  # every step


def test_test_grid_skips_k_not_below_l():
    grid = sp.test_grid({"lengths": [20, 500], "k_test": [4, 10, 12]})
    assert grid == [(20, 4), (500, 4), (500, 10), (500, 12)]


def test_sample_cli_prints_what_the_model_is_fed(capsys):
    cli.main(["sample", "sparse_parity", "--k", "3", "--length", "12", "--n", "4", "--seed", "7"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 4
    batch = sp.sample(np.random.default_rng(7), 4, 6, 3, 20)
    ex = sp.test_example(batch)
    vocab = sp.vocabulary(20)
    for i, row in enumerate(rows):
        assert set(row) >= {"tokens", "position_ids", "target_mask", "label"}
        assert row["tokens"] == [vocab[t] for t in ex.tokens[i]]
        assert row["tokens"][0] == "<BOS>" and row["tokens"][-2] == "<SEP>"
        assert row["tokens"][-1] == f"t{row['label']}"
        assert set(row["tokens"][2:-2:2]) <= {"t0", "t1"}
        assert all(1 <= int(t) <= 20 for t in row["tokens"][1:-2:2])
        assert row["position_ids"] == list(range(1, 16))
        assert row["target_mask"] == [0] * 14 + [1]
    inputs = ex.model_inputs()
    assert inputs["input_ids"].shape == (4, 14)
    assert (inputs["labels"][:, :-1] == -100).all()
    assert (inputs["labels"][:, -1].numpy() == ex.tokens[:, -1]).all()


def test_sample_cli_piped_into_head_ends_quietly():
    """`lengen sample ... | head -1` (issue 66): exit 0 and no BrokenPipeError traceback once the
    reader closes the pipe."""
    import subprocess
    import sys

    code = (
        "from lengen import cli; cli.main(['sample', 'sparse_parity', '--k', '2', '--length', "
        "'12', '--n', '5000'])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # as head does after one line
    err = proc.stderr.read().decode()
    assert json.loads(first)["tokens"][0] == "<BOS>"
    assert proc.wait() == 0 and "Traceback" not in err, err


@pytest.mark.parametrize(
    "argv, message",
    [
        ("sparse_parity --k 1 --length 7", "--length must be even"),
        ("sparse_parity --k 5 --length 8", "--k must be below l"),
        ("sparse_parity --k 1 --length 8 --vocab-n 7", "--vocab-n must be even"),
        ("sparse_parity --k 0 --length 8", "argument --k: must be a positive integer, got 0"),
        ("parity_scratchpad --jump 0 --length 10", "argument --jump: must be a positive integer"),
        ("parity_scratchpad --jump -1 --length 10", "argument --jump: must be a positive integer"),
        ("parity_scratchpad --length 10 --n -2", "argument --n: must be a positive integer"),
        ("parity_scratchpad --length 10 --seed -1", "argument --seed: must be >= 0"),
        ("parity_scratchpad --length 10 --n x", "argument --n: invalid positive_int value"),
        ("parity_scratchpad --jump 8 --length 10", "too short for jump 8"),
        ("variable_assignment --depth 5 --length 10", "too short for one chain of depth 5"),
        ("variable_assignment --depth 2 --length 60 --n-vars 5", "need more than 5 variables"),
    ],
)
def test_sample_cli_rejects_bad_input(argv, message, capsys):
    """Every bad argument or relation: argparse's usage and a message naming it, exit 2, no
    traceback and no output."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["sample", *argv.split()])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and message in err and out == ""
    assert err.startswith("usage: lengen sample") and "Traceback" not in err


def test_extra_schemes_nope_and_alibi_read_true_ids_and_are_checked(smoke_config):
    """sparse_parity.schemes (the extra figure, not in the paper): NoPE / ALiBi models at one
    K_train, fed true IDs in training (RoPE keeps PoSE), each with its own train overrides; the
    config names bad keys."""
    import copy

    from lengen import tasks
    from lengen.config.config import ConfigError, validate

    cfg = validate(copy.deepcopy(smoke_config))
    task = tasks.get("sparse_parity")
    for variant, position in (("nope", "nope"), ("alibi", "alibi"), ("neox", "rope")):
        spec = sp.train_spec(cfg, 2, variant)
        assert spec["model"]["position"] == position and spec["variant"] == variant
        ids = task.train_batch(parse_spec(spec), np.random.default_rng(0), 0).position_ids
        true = (ids == np.arange(1, ids.shape[1] + 1)).all()
        assert true == (position != "rope")  # PoSE draws gaps for RoPE
    # a scheme's train keys override the section's for that scheme only (the default tier's
    # plateau stop for NoPE / ALiBi); the paper's variants keep the section's
    over = copy.deepcopy(smoke_config)
    stop = {"every": 1, "target_accuracy": 0.99, "patience": 1, "plateau_steps": 7}
    over["sparse_parity"]["schemes"]["variants"]["nope"]["train"] = {"early_stop": stop, "lr": 0.5}
    over = validate(over)
    nope, neox = sp.train_spec(over, 2, "nope")["train"], sp.train_spec(over, 2, "neox")["train"]
    assert nope["early_stop"]["plateau_steps"] == 7 and nope["lr"] == 0.5
    assert neox == over["sparse_parity"]["train"] and nope["steps"] == neox["steps"]
    bad = copy.deepcopy(smoke_config)
    bad["sparse_parity"]["schemes"]["k_train"] = 7
    bad["sparse_parity"]["schemes"]["variants"]["neox"] = {"label": "x", "position": "nope"}
    with pytest.raises(ConfigError) as err:
        validate(bad)
    assert "sparse_parity.schemes.k_train" in str(err.value)
    assert "sparse_parity.schemes.variants" in str(err.value)
    typo = copy.deepcopy(smoke_config)
    typo["sparse_parity"]["schemes"]["variants"]["alibi"]["train"] = {"stpes": 1}
    with pytest.raises(ConfigError, match=r"sparse_parity\.schemes\.variants\.alibi\.train\.stpes"):
        validate(typo)


def test_sample_streams_in_chunks_and_keeps_its_first_draws(capsys, monkeypatch):
    """`lengen sample` prints as it draws, CHUNK examples at a time (constant memory for any
    --n, issue 47): up to CHUNK, the seed's draw as always; beyond, the first CHUNK are the
    seed's draw of CHUNK examples and the rest the seed's next streams, each line whole."""
    from lengen import cli

    argv = ["sample", "sparse_parity", "--length", "8", "--k", "2", "--seed", "3"]
    cli.main([*argv, "--n", "2"])
    first = capsys.readouterr().out.splitlines()
    monkeypatch.setattr(cli, "CHUNK", 2)
    cli.main([*argv, "--n", "5"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[:2] == first and len(set(lines)) == 5
    assert all(json.loads(line)["length"] == 8 for line in lines)
    gen = cli._stream(cli.argparse.Namespace(n=10**9, seed=0, fn=lambda a: [a.n] * a.n))
    assert [next(gen) for _ in range(3)] == [2, 2, 2]  # drawn lazily: 10^9 is never built


def test_the_integer_columns_and_order_of_each_tasks_eval_table():
    from lengen import tasks

    assert tasks.table_keys("sparse_parity") == sp.TABLE_KEYS
    assert tasks.table_keys("parity_scratchpad") == ("jump", "seed", "length", "n")
    assert tasks.table_order("variable_assignment") == ("variant", "depth", "seed", "length")
    assert tasks.table_keys("natural_language") == () == tasks.table_order("natural_language")


def test_a_sparse_parity_run_spec_takes_its_seed_variant_and_scheme_keys():
    """train_spec: run r of a model has seed = the config's + r (run 0 by default), the first
    variant by default; a variant's model keys override the section's; an extra scheme of the
    schemes figure is found too."""
    from lengen.config.config import load
    from tests.conftest import ROOT

    cfg = load(ROOT / "config" / "smoke.yaml")
    first = next(iter(cfg["sparse_parity"]["variants"]))
    base_spec = sp.train_spec(cfg, 4)
    assert base_spec["seed"] == cfg["seed"] and base_spec["run_name"].startswith(f"{first}/K4/")
    assert sp.train_spec(cfg, 4, first, run=2)["seed"] == cfg["seed"] + 2
    assert sp.train_spec(cfg, 4, "loglen")["model"]["attn_scale"] == "log_length"
    assert "attn_scale" not in sp.train_spec(cfg, 4, "neox")["model"]
    for scheme in ("nope", "alibi"):  # the smoke tier's schemes figure
        assert sp.train_spec(cfg, 8, scheme)["run_name"].startswith(f"{scheme}/K8/")
    assert sp.vocab_size(make_spec("sparse_parity", task={"n": 16})) == len(sp.SPECIALS) + 16


def test_sample_refuses_k_at_l_and_says_the_limit():
    import argparse

    args = argparse.Namespace(length=8, k=4, vocab_n=16, seed=0, n=1)
    with pytest.raises(ValueError, match=r"--k must be below l = --length / 2 = 4 \(App"):
        sp.sample_records(args)
    assert len(sp.sample_records(argparse.Namespace(length=8, k=3, vocab_n=16, seed=0, n=1))) == 1


def test_config_checks_each_constraint_alone(smoke_config):
    """App. E.1.1's constraints on the section, each broken alone on the smoke tier's, give
    exactly its error (key and message), at the boundary; the smoke section itself passes."""

    def errors(**edits):
        return sp.config_checks("sp", edited(smoke_config["sparse_parity"], **edits))

    assert errors() == []
    assert errors(train_min_len=12) == []  # a single training length
    assert errors(train_min_len=13) == [("sp.train_min_len", "must be <= train_max_len")]
    # the longest input: max(eval 24, train 12) + 2 = 26 tokens, below l_max
    assert errors(l_max=27) == []
    assert errors(l_max=26) == [("sp.l_max", "must exceed the longest input (26 tokens)")]
    assert errors(train_max_len=30, l_max=32) == [
        ("sp.l_max", "must exceed the longest input (32 tokens)")
    ]
    assert errors(figures__fig1=[2, 5, 4]) == [("sp.figures.fig1", "K_train [4, 5] not in k_train")]
    large = "not below l = train_max_len / 2 = 6: no training length could show them"
    assert errors(k_train=[1, 2, 3, 5]) == []
    assert errors(k_train=[1, 2, 3, 6, 7]) == [("sp.k_train", f"[6, 7] {large}")]
    assert errors(schemes__k_train=4) == [("sp.schemes.k_train", "not in k_train (its comparison)")]
    clash = {"neox": {"label": "x", "position": "nope"}}
    clashes = [("sp.schemes.variants", "['neox'] are also variants")]
    assert errors(schemes__variants=clash) == clashes
    no_schemes = {k: v for k, v in smoke_config["sparse_parity"].items() if k != "schemes"}
    assert sp.config_checks("sp", no_schemes) == []
    unseen = "not below l = 12 of the longest eval length: no test example could have them"
    assert errors(eval__k_test=[1, 11]) == []
    assert errors(eval__k_test=[1, 12, 13]) == [("sp.eval.k_test", f"[12, 13] {unseen}")]
    attention = ("sp.figures.attention.k_train", "not in k_train")
    assert errors(figures__attention={"k_train": 4}) == [attention]


def test_sample_options_say_what_they_mean():
    """`lengen sample sparse_parity`: --k and --length are required, --vocab-n defaults to the
    paper's N = 20, each says what it is in --help."""
    parser, text = sample_options(sp)
    assert parser.parse_args(["--k", "2", "--length", "10"]).vocab_n == 20
    for missing in (["--k", "2"], ["--length", "10"]):
        with pytest.raises(SystemExit):
            parser.parse_args(missing)
    for phrase in (
        "number of flagged positions",
        "2l, the length of the J/bit part",
        "N, the integer alphabet size",
    ):
        assert phrase in text
