"""The batch format shared by every task: what the model is fed, token for token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

IGNORE = -100  # label of positions that are not scored


@dataclass
class Example:
    """A batch of same-length sequences: tokens, position IDs and the scored-token mask (B, T)."""

    tokens: np.ndarray
    position_ids: np.ndarray
    target_mask: np.ndarray

    def model_inputs(self, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """Next-token inputs: ids/positions of tokens[:-1], labels tokens[1:] where scored."""
        labels = np.where(self.target_mask[:, 1:] == 1, self.tokens[:, 1:], IGNORE)
        return {
            "input_ids": torch.as_tensor(self.tokens[:, :-1], device=device),
            "position_ids": torch.as_tensor(self.position_ids[:, :-1], device=device),
            "labels": torch.as_tensor(labels, device=device),
        }


def step_rng(seed: int, step: int, rank: int = 0) -> np.random.Generator:
    """Generator of one training step; batches depend only on (seed, step, rank): exact resume."""
    return np.random.default_rng([seed, step, rank])
