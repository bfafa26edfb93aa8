"""Position schemes, each a named piece: RoPE (Sec. 2.2 / App. E), PoSE position IDs (Sec. 2.2),
learned absolute embeddings with a random training shift (Sec. 5.2), ALiBi and NoPE.

True position IDs are 1-based: a test-time sequence of T tokens has IDs 1..T (Sec. 2.2). Coupled
IDs (Sec. 5.2, App. E.2-E.3) are the task's own and give <BOS> and the separator ID 0.

One vocabulary, two levels. A *scheme* (SCHEME_TABLE, what a config's variant names) says which
IDs a task feeds in training and at test and what the model needs; the model needs one of
MODEL_POSITIONS (how it reads IDs: a learned table, RoPE, an ALiBi bias, or nothing):

| scheme      | training IDs          | test IDs | model needs           | paper          |
| ----------- | --------------------- | -------- | --------------------- | -------------- |
| `ppc`       | coupled, random shift | coupled  | `learned` + PPC head  | Sec. 5.2       |
| `absolute`  | true, random shift    | true     | `learned`             | Figs. 8a, 3b   |
| `rope_pose` | PoSE (c = 2)          | true     | `rope`                | Figs. 8b, 3c-d |
| `nope`      | true (unread)         | true     | `nope` (causal mask)  | not in paper   |
| `alibi`     | true                  | true     | `alibi` (linear bias) | not in paper   |

NoPE: Kazemnejad et al. 2023; ALiBi: Press et al. 2022.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODEL_POSITIONS = ("rope", "learned", "nope", "alibi")  # how the model reads IDs (ModelConfig)
# what older code wrote into model files for today's name: such files are refused (retrain)
RENAMED_MODEL_POSITIONS = {"absolute": "learned"}


@dataclass(frozen=True)
class Scheme:
    """A position scheme: the IDs a task feeds (coupled or true; shifted, PoSE or as they are in
    training) and what the model needs (`model`, one of MODEL_POSITIONS, and the PPC head)."""

    name: str
    coupled: bool  # feeds the task's coupled IDs (else true IDs 1..T)
    train: str  # how training moves the IDs: "shift" (uniform offset), "pose", or "none"
    model: str
    predicts_positions: bool = False
    label: str = ""  # how figures name it (its name when empty)


# Adding a scheme that only changes IDs is one line here: the config schema's scheme enums, the
# CLI's --scheme choices, the evaluation's position check and the figures' labels all read this
# table when they run (tests/test_positions.py adds a toy scheme and checks each).
SCHEME_TABLE = {
    s.name: s
    for s in (
        Scheme(
            "ppc",
            coupled=True,
            train="shift",
            model="learned",
            predicts_positions=True,
            label="Predictive Position Coupling",
        ),
        Scheme(
            "absolute",
            coupled=False,
            train="shift",
            model="learned",
            label="absolute PE, random shift (no coupling)",
        ),
        Scheme("rope_pose", coupled=False, train="pose", model="rope", label="RoPE + PoSE"),
        Scheme("nope", coupled=False, train="none", model="nope", label="NoPE (causal mask only)"),
        Scheme("alibi", coupled=False, train="none", model="alibi", label="ALiBi"),
    )
}


def scheme_names(keep=lambda scheme: True) -> tuple[str, ...]:
    """The names in SCHEME_TABLE (as it is now) of the schemes `keep` accepts."""
    return tuple(name for name, scheme in SCHEME_TABLE.items() if keep(scheme))


def scheme_label(name: str) -> str:
    """A scheme's label for figures (its name for one the table does not have)."""
    scheme = SCHEME_TABLE.get(name)
    return (scheme.label or scheme.name) if scheme else name


def true_position_ids(batch: int, length: int) -> np.ndarray:
    """Test-time IDs 1..length for every row (Sec. 2.2)."""
    return np.tile(np.arange(1, length + 1, dtype=np.int64), (batch, 1))


POSE_SKIPS = ("paper", "reference")  # how PoSE draws its chunks' starts (pose_position_ids)


def pose_position_ids(
    rng: np.random.Generator, batch: int, length: int, l_max: int, skip: str = "paper"
) -> np.ndarray:
    """PoSE IDs with c = 2 chunks, one draw per row (Sec. 2.2).

    Split at a uniform point (both chunks non-empty). `skip="paper"` (Sec. 2.2's formula):
    J0, J1 ~ Unif([l_max - length]); chunk 1 starts at min(J0, J1), chunk 2 at max(J0, J1) + l1.
    `skip="reference"` (as dwzhu-pku/PoSE's training code draws them; a probe, not the paper):
    chunk 1 starts at 1 and chunk 2 right after it plus a skip u ~ Unif{0..l_max - 1 - length},
    uniform over the whole free range, so relative distances near l_max come up more often. All
    IDs lie in [1, l_max - 1].
    """
    if length < 2:
        raise ValueError(f"PoSE needs at least 2 tokens, got length={length}")
    if l_max <= length:
        raise ValueError(f"PoSE needs l_max > length, got l_max={l_max}, length={length}")
    if skip not in POSE_SKIPS:
        raise ValueError(f"PoSE skip must be one of {POSE_SKIPS}, got {skip!r}")
    l1 = rng.integers(1, length, size=batch)  # chunk-1 length in [1, length-1]
    if skip == "paper":
        j = rng.integers(1, l_max - length + 1, size=(batch, 2))  # Unif([l_max - length])
        start1, start2 = j.min(axis=1), j.max(axis=1) + l1
    else:
        start1 = np.ones(batch, dtype=np.int64)
        start2 = 1 + l1 + rng.integers(0, l_max - length, size=batch)
    idx = np.arange(length)[None, :]
    return np.where(idx < l1[:, None], start1[:, None] + idx, start2[:, None] + idx - l1[:, None])


def pose_fed_position_ids(
    rng: np.random.Generator, batch: int, length: int, l_max: int, skip: str = "paper"
) -> np.ndarray:
    """PoSE IDs for next-token training rows of `length` tokens, of which the first length - 1
    are fed to the model (the last is only a label): PoSE (c = 2) is drawn over the fed tokens,
    so the fed IDs lie in [1, l_max - 1] and reach l_max - 1, the longest test sequence's last
    fed ID (as PoSE's reference code draws IDs for the model's inputs). The label token's ID
    continues its chunk and is never read."""
    fed = pose_position_ids(rng, batch, length - 1, l_max, skip)
    return np.concatenate([fed, fed[:, -1:] + 1], axis=1)


def shift_position_ids(
    rng: np.random.Generator, position_ids: np.ndarray, l_max: int
) -> np.ndarray:
    """Shift each row by a uniform offset in {0..l_max - max(row)} (coupled IDs, Sec. 5.2)."""
    top = position_ids.max(axis=1)
    if (top > l_max).any():
        raise ValueError(f"position IDs up to {top.max()} exceed l_max={l_max}")
    offset = rng.integers(0, l_max - top + 1)
    return position_ids + offset[:, None]


def get_scheme(name: str) -> Scheme:
    """The scheme of a name; ValueError naming the known ones otherwise."""
    if name not in SCHEME_TABLE:
        raise ValueError(f"scheme must be one of {scheme_names()}, got {name!r}")
    return SCHEME_TABLE[name]


def scheme_train_ids(
    scheme: str, rng: np.random.Generator, coupled: np.ndarray, l_max: int
) -> np.ndarray:
    """Training IDs of a batch under a scheme, given its coupled IDs (B, T)."""
    s = get_scheme(scheme)
    batch, length = coupled.shape
    ids = coupled if s.coupled else true_position_ids(batch, length)
    if s.train == "shift":
        return shift_position_ids(rng, ids, l_max)
    if s.train == "pose":
        return pose_position_ids(rng, batch, length, l_max)
    return ids


def scheme_test_ids(scheme: str, coupled: np.ndarray) -> np.ndarray:
    """Test-time IDs under a scheme: the coupled IDs (ppc), else true IDs 1..T."""
    return coupled.copy() if get_scheme(scheme).coupled else true_position_ids(*coupled.shape)


def model_position(scheme: str) -> dict:
    """Model options of a scheme: how IDs enter, and whether a head predicts the next ID."""
    s = get_scheme(scheme)
    return {"position": s.model, "predict_positions": s.predicts_positions}
