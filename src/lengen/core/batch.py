"""The batch format shared by every task: what the model is fed, token for token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

IGNORE = -100  # label of positions that are not scored
TEST_STREAM = 7  # salts test-set seeds: they never collide with training's (seed, step, rank)
VALID_STREAM = 10**6  # rank-slot of the early-stop held-out draw: no training process uses it


@dataclass
class Example:
    """A batch of same-length sequences: tokens, position IDs and the scored-token mask (B, T)."""

    tokens: np.ndarray
    position_ids: np.ndarray
    target_mask: np.ndarray

    def padded(self, buckets: tuple[int, ...]) -> Example:
        """This batch padded at the end up to the smallest bucket edge >= its length (itself when
        no edge is long enough): padding tokens 0 at position ID 0, never scored. The model is
        causal, so no real token sees the padding: the loss and gradients are unchanged."""
        length = self.tokens.shape[1]
        edge = next((b for b in sorted(buckets) if b >= length), length)
        if edge == length:
            return self
        pad = ((0, 0), (0, edge - length))
        return Example(
            np.pad(self.tokens, pad), np.pad(self.position_ids, pad), np.pad(self.target_mask, pad)
        )

    def model_inputs(self, device="cpu", id_limit: int | None = None) -> dict:
        """Next-token inputs: ids/positions of tokens[:-1]; labels tokens[1:] and position labels
        position_ids[1:] (the PPC head's targets, Sec. 5.2) where scored, IGNORE elsewhere.
        With id_limit (a model's `cfg.id_limit`), IDs outside 0..id_limit are an error here, on
        the host, before anything reaches the device."""
        import torch  # here: the plan and the tasks read this module without torch

        if id_limit is not None:
            check_position_ids(self.position_ids, id_limit)
        scored = self.target_mask[:, 1:] == 1
        labels = np.where(scored, self.tokens[:, 1:], IGNORE)
        position_labels = np.where(scored, self.position_ids[:, 1:], IGNORE)
        return {
            "input_ids": torch.as_tensor(self.tokens[:, :-1], device=device),
            "position_ids": torch.as_tensor(self.position_ids[:, :-1], device=device),
            "labels": torch.as_tensor(labels, device=device),
            "position_labels": torch.as_tensor(position_labels, device=device),
        }


def check_position_ids(position_ids: np.ndarray, id_limit: int) -> None:
    """Raise ValueError when an ID lies outside 0..id_limit (a learned embedding's table)."""
    low, high = int(position_ids.min()), int(position_ids.max())
    if low < 0 or high > id_limit:
        raise ValueError(
            f"position IDs must lie in [0, {id_limit}] (the model's l_max), got [{low}, {high}]"
        )


def step_rng(seed: int, step: int, rank: int = 0) -> np.random.Generator:
    """Generator of one training step; batches depend only on (seed, step, rank): exact resume."""
    return np.random.default_rng([seed, step, rank])
