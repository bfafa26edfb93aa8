"""PoSE IDs (Sec. 2.2) and coupled-ID shifts (Sec. 5.2)."""

from __future__ import annotations

import numpy as np
import pytest

from lengen.core.positions import (
    pose_fed_position_ids,
    pose_position_ids,
    shift_position_ids,
    true_position_ids,
)
from tests.conftest import ROOT


@pytest.mark.parametrize("length,l_max", [(23, 510), (53, 510), (5, 8), (2, 3)])
def test_pose_two_increasing_chunks_within_lmax(length, l_max):
    ids = pose_position_ids(np.random.default_rng(0), 500, length, l_max)
    assert ids.shape == (500, length)
    assert ids.min() >= 1 and ids.max() <= l_max - 1
    steps = np.diff(ids, axis=1)
    assert (steps >= 1).all()  # strictly increasing
    jumps = (steps > 1).sum(axis=1)
    assert (jumps <= 1).all()  # at most one gap: two contiguous chunks
    # chunk 2 starts after chunk 1 ends; the two starts coincide only when J0 == J1
    assert (jumps == 1).any() or l_max - length == 1


def test_pose_chunk_starts_follow_the_paper():
    """Chunk 1 starts at min(J0, J1) and chunk 2 at max(J0, J1) + l1 (Sec. 2.2)."""
    rng = np.random.default_rng(3)
    length, l_max = 10, 30
    ids = pose_position_ids(rng, 2000, length, l_max)
    starts = ids[:, 0]
    assert starts.min() == 1 and starts.max() <= l_max - length
    # gap size = max(J) - min(J) >= 0, and covers the full range of IDs
    assert set(np.unique(ids)) == set(range(1, l_max))


def test_pose_rejects_bad_lengths():
    with pytest.raises(ValueError, match="needs l_max > length, got l_max=10, length=10"):
        pose_position_ids(np.random.default_rng(0), 1, 10, 10)  # l_max == length: no room
    with pytest.raises(ValueError, match="at least 2 tokens, got length=1"):
        pose_position_ids(np.random.default_rng(0), 1, 1, 10)
    assert pose_position_ids(np.random.default_rng(0), 1, 10, 11).tolist() == [list(range(1, 11))]


def test_pose_draw_distributions():
    """J0, J1 ~ Unif([l_max - length]) per row, chunk 1 non-empty: at length 2 a row is one
    contiguous run only when J0 == J1 (1 in l_max - 2); chunk 1 starts at the smaller of two
    uniform draws (mean (M + 2) / 3 for M values), each row its own."""
    rng = np.random.default_rng(4)
    two = pose_position_ids(rng, 2000, 2, 100)
    assert (np.diff(two, axis=1)[:, 0] == 1).mean() < 0.05  # l1 = 0 would make half contiguous
    length, l_max = 4, 1004
    ids = pose_position_ids(rng, 6000, length, l_max)
    m = l_max - length
    assert abs(ids[:, 0].mean() - (m + 2) / 3) < 15  # min of 2 draws (min of 3: ~ m / 4)
    assert abs(ids[:, -1].mean() - (2 * m + 1) / 3 - (length - 1)) < 15  # max of 2, + 3
    assert len(np.unique(ids[:, -1])) > 500


@pytest.mark.parametrize("length,l_max", [(65, 129), (23, 510), (3, 4)])
def test_pose_is_drawn_over_the_fed_tokens(length, l_max):
    """Next-token rows feed their first length - 1 tokens: those IDs are the PoSE draw, lie in
    [1, l_max - 1] and reach l_max - 1 (h_short's fed IDs reach Lbar = 128, the last fed ID at
    test); the label token's ID (never fed) continues the last chunk."""
    ids = pose_fed_position_ids(np.random.default_rng(0), 4000, length, l_max)
    fed = ids[:, :-1]
    assert ids.shape == (4000, length)
    assert fed.min() == 1 and fed.max() == l_max - 1
    assert (ids[:, -1] == fed[:, -1] + 1).all()
    assert (fed == pose_position_ids(np.random.default_rng(0), 4000, length - 1, l_max)).all()


def test_true_ids():
    assert true_position_ids(2, 3).tolist() == [[1, 2, 3], [1, 2, 3]]


def test_shift_stays_within_lmax_and_keeps_differences():
    base = np.tile(np.array([0, 1, 2, 3, 0, 1, 2, 3]), (1000, 1))
    shifted = shift_position_ids(np.random.default_rng(0), base, 10)
    assert shifted.max() <= 10 and shifted.min() >= 0
    assert (np.diff(shifted, axis=1) == np.diff(base, axis=1)).all()
    assert set(shifted[:, 0]) == set(range(0, 8))


def test_reference_pose_skip_is_uniform_over_the_free_range():
    """pose_skip reference (dwzhu-pku/PoSE's draw, a probe): chunk 1 at 1, chunk 2 after it plus a
    skip uniform on {0..l_max - 1 - length}; IDs in [1, l_max - 1]; the paper's draw is the
    default and reaches the longest distances less often."""
    from lengen.core.positions import pose_position_ids

    rng = np.random.default_rng(0)
    length, l_max, n = 10, 60, 20000
    ref = pose_position_ids(rng, n, length, l_max, skip="reference")
    assert (ref[:, 0] == 1).all() and ref.min() >= 1 and ref.max() <= l_max - 1
    jumps = np.diff(ref, axis=1)
    assert ((jumps == 1).sum(axis=1) >= length - 2).all()  # one skip, within-chunk steps of 1
    skip = ref[:, -1] - length  # last ID = length + u
    assert skip.min() == 0 and skip.max() == l_max - 1 - length
    counts = np.bincount(skip, minlength=l_max - length)
    assert counts.min() > 0.8 * n / (l_max - length)  # about uniform
    paper = pose_position_ids(np.random.default_rng(0), n, length, l_max)
    span = lambda ids: ids[:, -1] - ids[:, 0]  # noqa: E731  (the longest relative distance)
    assert (span(ref) >= l_max - 1 - 5).mean() > 2 * (span(paper) >= l_max - 1 - 5).mean()
    with pytest.raises(ValueError, match="PoSE skip must be one of"):
        pose_position_ids(rng, 1, length, l_max, skip="other")


def test_pose_skip_is_in_a_spec_only_when_the_config_sets_it():
    from lengen.config.config import load
    from lengen.tasks import parse_spec, sparse_parity

    cfg = load(ROOT / "config" / "config.yaml")
    assert "pose_skip" not in sparse_parity.train_spec(cfg, 8)["task"]
    cfg["sparse_parity"]["pose_skip"] = "reference"
    spec = parse_spec(sparse_parity.train_spec(cfg, 8))
    assert spec.task.pose_skip == "reference"
    # and the training batches use it: the same draw, other IDs; the final token scored
    paper = parse_spec(sparse_parity.train_spec(load(ROOT / "config" / "config.yaml"), 8))
    ref, drawn = (
        sparse_parity.train_batch(s, np.random.default_rng(0), 10**6) for s in (spec, paper)
    )
    assert (ref.tokens == drawn.tokens).all() and (ref.position_ids != drawn.position_ids).any()
    assert ref.target_mask.sum() == len(ref.tokens) and ref.target_mask[:, -1].all()


def test_a_new_scheme_that_only_changes_ids_is_one_entry_in_the_scheme_table(
    monkeypatch, smoke_config, capsys
):
    """docs/extending.md: such a scheme is one line of lengen.core.positions.SCHEME_TABLE. A toy
    one (true IDs into a learned table, no training shift), added there and nowhere else, is
    accepted by the config schema (a generation task's variant, the language models), fed in
    training and at test, offered by `lengen sample`, built into a model spec, scored without a
    position check, and labelled in figures; taken out again, the schema refuses it."""
    import copy

    from lengen import cli, tasks
    from lengen.config.config import ConfigError, validate
    from lengen.core import positions
    from lengen.report.figures import panel_label

    toy = positions.Scheme(
        "unshifted", coupled=False, train="none", model="learned", label="absolute PE, no shift"
    )
    monkeypatch.setitem(positions.SCHEME_TABLE, toy.name, toy)
    cfg = copy.deepcopy(smoke_config)
    cfg["parity_scratchpad"]["variants"]["rope_pose"]["scheme"] = toy.name
    cfg["natural_language"]["scheme"] = toy.name
    validate(cfg)
    spec = tasks.generation_spec(cfg, "parity_scratchpad", "rope_pose", 1, 0)
    assert spec["model"]["position"] == "learned" and not spec["model"]["predict_positions"]
    coupled = np.array([[0, 1, 2, 3, 0, 4, 5]])
    rng = np.random.default_rng(0)
    assert (positions.scheme_train_ids(toy.name, rng, coupled, 40) == np.arange(1, 8)).all()
    assert (positions.scheme_test_ids(toy.name, coupled) == np.arange(1, 8)).all()
    cli.main(["sample", "majority", "--length", "5", "--n", "1", "--scheme", toy.name])
    assert '"position_ids": [1, 2, 3, 4, 5, 6, 7, 8]' in capsys.readouterr().out
    assert not positions.get_scheme(toy.name).predicts_positions  # evaluate: no ID check
    assert panel_label(toy.name) == "absolute PE, no shift"
    monkeypatch.delitem(positions.SCHEME_TABLE, toy.name)
    with pytest.raises(ConfigError, match="parity_scratchpad.variants.rope_pose.scheme"):
        validate(cfg)


def test_shift_accepts_ids_up_to_l_max_and_names_ids_beyond():
    """IDs whose maximum is l_max itself fit (offset 0 only); one beyond is a ValueError naming
    both numbers; a scheme's label is its figure label, an unknown name stays as it is."""
    from lengen.core.positions import scheme_label

    at_top = np.array([[0, 5, 10], [0, 1, 2]])
    shifted = shift_position_ids(np.random.default_rng(0), at_top, 10)
    assert (shifted[0] == at_top[0]).all()
    with pytest.raises(ValueError, match=r"^position IDs up to 11 exceed l_max=10$"):
        shift_position_ids(np.random.default_rng(0), at_top + 1, 10)
    assert scheme_label("ppc") == "Predictive Position Coupling"
    assert scheme_label("no_such_scheme") == "no_such_scheme"
