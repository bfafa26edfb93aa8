"""Majority over bits: the plug-in task (lengen.tasks.majority) through the task interface."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from lengen import cli, tasks
from lengen.config.config import ConfigError, validate
from lengen.core import tracking
from lengen.tasks import majority as mj
from tests.helpers import edited, make_spec, sample_options


def test_labels_and_layout_known_answers():
    b = mj.sample(np.random.default_rng(0), 256, 7)
    bits = b.tokens[:, 1:8] - mj.ZERO
    assert (b.tokens[:, 0] == mj.BOS).all() and (b.tokens[:, 8] == mj.SEP).all()
    assert ((b.tokens[:, 9] - mj.ZERO) == (bits.sum(axis=1) >= 4)).all()  # 4 of 7 is a majority
    assert b.target_mask.sum() == 256 and (b.target_mask[:, -1] == 1).all()
    assert b.prompt_len == 9 and 0.3 < (b.tokens[:, 9] == mj.ONE).mean() < 0.7
    hand = mj.sample(np.random.default_rng(1), 1, 3)
    ones = int((hand.tokens[0, 1:4] == mj.ONE).sum())
    assert hand.tokens[0, -1] == (mj.ONE if ones >= 2 else mj.ZERO)
    with pytest.raises(ValueError, match="odd"):
        mj.sample(np.random.default_rng(0), 1, 4)


def test_training_draws_are_odd_lengths_in_range_and_test_ids_are_true_ids():
    spec = make_spec("majority", task={"train_min_len": 5, "train_max_len": 9, "l_max": 40})
    lengths = {mj.draw_train(spec, np.random.default_rng(s)).n_bits for s in range(200)}
    assert lengths == {5, 7, 9}
    b = mj.sample(np.random.default_rng(0), 2, 5)
    for scheme in ("absolute", "rope_pose", "nope", "alibi"):
        assert (b.test_example(scheme).position_ids == np.arange(1, 9)).all()
    shifted = mj.train_batch(spec, np.random.default_rng(0), 0).position_ids
    assert (np.diff(shifted, axis=1) == 1).all() and shifted.max() <= 40


def test_sample_cli_prints_what_the_model_is_fed(capsys):
    cli.main(["sample", "majority", "--length", "5", "--n", "2", "--seed", "3"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    b = mj.sample(np.random.default_rng(3), 2, 5)
    assert [r["tokens"] for r in rows] == [[mj.VOCAB[t] for t in row] for row in b.tokens]
    assert rows[0]["position_ids"] == list(range(1, 9)) and rows[0]["length"] == 5
    assert rows[0]["target_mask"] == [0] * 7 + [1]
    assert rows[0]["label"] in (0, 1) and str(rows[0]["label"]) == rows[0]["tokens"][-1]
    for argv, message in ((["--length", "4"], "odd"), (["--length", "5", "--scheme", "ppc"], "")):
        with pytest.raises(SystemExit):
            cli.main(["sample", "majority", *argv])
        assert message in capsys.readouterr().err


def test_config_checks_name_the_key(smoke_config):
    cfg = copy.deepcopy(smoke_config)
    cfg["majority"]["eval"]["lengths"] = [3, 8]
    cfg["majority"]["variants"]["ppc"] = {"scheme": "ppc", "runs": 1}
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert "majority.eval.lengths" in str(err.value) and "majority.variants.ppc.scheme" in str(
        err.value
    )


def test_it_is_a_generation_task_registered_once():
    assert tasks.get("majority") is mj and "majority" in tasks.generation_tasks()
    assert mj.SETTING.key == "train_max_len" and mj.longest_tokens({}, 11) == 14
    with pytest.raises(KeyError, match=r"unknown task 'majorty'; known: \['majority', "):
        tasks.get("majorty")


@pytest.mark.parametrize("scheme", ["absolute", "nope", "alibi", "rope_pose"])
def test_majority_trains_and_evaluates_end_to_end(scheme, tmp_path, smoke_config):
    """Every scheme trains through the project's trainer and is scored by the evaluator (the
    answer token by greedy generation), one row per test length."""
    from lengen.analysis.evaluate import evaluate_scratchpad
    from lengen.train.train import train

    cfg = copy.deepcopy(smoke_config)
    cfg["results_dir"] = str(tmp_path / "results")
    cfg["majority"]["variants"][scheme] = {"scheme": scheme, "runs": 1}
    spec = tasks.generation_spec(validate(cfg), "majority", scheme, 7, 0)
    assert spec["task"] == {"train_max_len": 7, "scheme": scheme, "train_min_len": 3, "l_max": 20}
    assert spec["run_name"] == f"{scheme}/n7/seed0"
    tracking.prepare_store(spec["tracking"]["uri"], [spec["tracking"]["experiment"]])
    path = train(spec, tmp_path / "model")
    table = evaluate_scratchpad(path, cfg["majority"]["eval"], 0, tmp_path / "eval.csv")
    assert sorted(table["length"]) == [3, 7, 11] and table["accuracy"].between(0, 1).all()
    assert set(table["train_max_len"]) == {7}


@pytest.mark.parametrize("scheme", ["absolute", "rope_pose"])
def test_majority_heldout_is_a_training_draw_at_test_time_ids(scheme):
    from tests.helpers import make_spec

    spec = make_spec("majority", task={"scheme": scheme})
    held = mj.heldout_example(spec, np.random.default_rng(3))
    train = mj.draw_train(spec, np.random.default_rng(3))
    assert (held.tokens == train.tokens).all()
    want = np.broadcast_to(np.arange(1, held.tokens.shape[1] + 1), held.tokens.shape)
    assert (held.position_ids == want).all()  # test-time IDs: no random shift


def test_config_checks_each_constraint_alone(smoke_config):
    """Each even length (training minimum, a model's maximum, a test length) and each coupled
    scheme is exactly one error naming its key; the smoke section passes; the task's lengths are
    the shortest and the longest training length, and its longest input is <BOS>, n, <SEP>, y."""

    def errors(**edits):
        return mj.config_checks("mj", edited(smoke_config["majority"], **edits))

    tie = "even: a majority of an even number of bits can tie"
    assert errors() == []
    assert errors(train_min_len=4) == [("mj.train_min_len", f"[4] {tie}")]
    assert errors(train_max_lens=[7, 8, 10]) == [("mj.train_max_lens", f"[8, 10] {tie}")]
    assert errors(eval__lengths=[3, 6]) == [("mj.eval.lengths", f"[6] {tie}")]
    variants = {"absolute": {"scheme": "absolute"}, "p": {"scheme": "ppc"}}
    coupled = ("mj.variants.p.scheme", "ppc feeds coupled IDs: majority has none")
    assert errors(variants=variants) == [coupled]
    assert mj.train_lengths(edited(smoke_config["majority"], train_max_lens=[9, 5])) == (3, 9)


def test_the_test_set_is_fixed_by_seed_and_length(capsys):
    """testset: one fixed draw per length from (seed, length): the same twice, another seed
    another draw; `lengen sample majority` takes any odd length (9 too)."""
    spec = make_spec("majority", task={"train_min_len": 3, "train_max_len": 7, "l_max": 20})
    eval_cfg = {"lengths": [9, 5], "n_examples": 16}
    a, b, c = (mj.testset(spec, eval_cfg, seed) for seed in (0, 0, 1))
    assert list(a) == [5, 9] and all((a[n].tokens == b[n].tokens).all() for n in a)
    assert not (a[9].tokens == c[9].tokens).all() and a[9].tokens.shape == (16, 12)
    cli.main(["sample", "majority", "--length", "9", "--n", "1"])
    assert json.loads(capsys.readouterr().out)["length"] == 9


def test_sample_options_of_majority():
    """`lengen sample majority`: --length (odd) required, absolute IDs by default, no coupled
    scheme offered; --help says what --length is."""
    parser, text = sample_options(mj)
    assert parser.parse_args(["--length", "5"]).scheme == "absolute"
    with pytest.raises(SystemExit):
        parser.parse_args([])
    with pytest.raises(SystemExit):
        parser.parse_args(["--length", "5", "--scheme", "ppc"])
    assert "n, odd: the bits" in text
