"""Where evaluation runs (training's device is the spec's runtime, lengen.train.runtime)."""

from __future__ import annotations


def eval_device() -> str:
    """cuda when a GPU is visible (paper-size models), else one CPU thread per job."""
    import torch  # here: the ground floor imports no torch at import time

    if torch.cuda.is_available():
        return "cuda"
    torch.set_num_threads(1)
    return "cpu"


def free_bytes(device: str) -> int | None:
    """Memory a job can still take on `device`: the GPU's free memory, or the host's available
    memory (Linux's MemAvailable); None where it cannot be read."""
    if str(device).startswith("cuda"):
        import torch

        return torch.cuda.mem_get_info(torch.device(device))[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
