"""PoSE IDs (Sec. 2.2) and coupled-ID shifts (Sec. 5.2)."""

from __future__ import annotations

import numpy as np
import pytest

from lengen.positions import pose_position_ids, shift_position_ids, true_position_ids


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
    with pytest.raises(ValueError):
        pose_position_ids(np.random.default_rng(0), 1, 10, 10)


def test_true_ids():
    assert true_position_ids(2, 3).tolist() == [[1, 2, 3], [1, 2, 3]]


def test_shift_stays_within_lmax_and_keeps_differences():
    base = np.tile(np.array([0, 1, 2, 3, 0, 1, 2, 3]), (1000, 1))
    shifted = shift_position_ids(np.random.default_rng(0), base, 10)
    assert shifted.max() <= 10 and shifted.min() >= 0
    assert (np.diff(shifted, axis=1) == np.diff(base, axis=1)).all()
    assert set(shifted[:, 0]) == set(range(0, 8))
