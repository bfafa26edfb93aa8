"""Where evaluation runs (training's device is the spec's runtime, lengen.train.runtime)."""

from __future__ import annotations


def eval_device() -> str:
    """cuda when a GPU is visible (paper-size models), else one CPU thread per job."""
    import torch  # here: the ground floor imports no torch at import time

    if torch.cuda.is_available():
        return "cuda"
    torch.set_num_threads(1)
    return "cpu"
