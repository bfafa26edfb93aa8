"""Where evaluation runs (training's device is the spec's runtime, lengen.train.runtime), and the
one check that a job given GPUs can use them."""

from __future__ import annotations

import os
import re
import subprocess

from lengen.core.cli import KnownError

JOB_GPUS = "LENGEN_JOB_GPUS"  # the GPUs lengen.core.gpus gave this job (set by it, read here)

# The oldest Linux driver each CUDA major release runs on (NVIDIA's CUDA Toolkit release notes,
# Table 2, "minor version compatibility"): a torch built for CUDA 13 needs r580 or later
MIN_DRIVER = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580, 65, 6)}
STACK_DOC = "docs/gpu-and-cluster.md, 'The GPU stack'"


class NoUsableGpu(KnownError):
    """A job that must run on CUDA finds no GPU that its torch can use."""


def driver_version() -> str | None:
    """The NVIDIA driver's version (nvidia-smi, else /proc/driver/nvidia/version), or None."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        if out.stdout.strip():
            return out.stdout.split()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/driver/nvidia/version") as f:
            found = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", f.read())
        return found[1] if found else None
    except OSError:
        return None


def unusable_reason(cuda: str | None, driver: str | None, version: str, visible: str | None) -> str:
    """Why a torch (`version`, built for CUDA `cuda`) sees no GPU, and the fix, as one line."""
    if cuda is None:
        return (
            f"the installed torch {version} is built without CUDA: install its CUDA build "
            f"({STACK_DOC}), or run a CPU tier (config/config.yaml)"
        )
    if driver is None:
        return (
            f"torch {version} (CUDA {cuda}) finds no NVIDIA driver on this machine (no "
            "nvidia-smi, no /proc/driver/nvidia): run the tier where the GPUs are, or a CPU "
            "tier (config/config.yaml)"
        )
    need = MIN_DRIVER.get(int(cuda.split(".")[0]))
    have = tuple(int(x) for x in driver.split(".") if x.isdigit())
    if need and have < need:
        return (
            f"torch {version} is built for CUDA {cuda}, which needs driver "
            f"{'.'.join(map(str, need))} or later; this machine's driver is {driver}: install "
            f"the torch build for the CUDA your driver supports (`nvidia-smi` names it; "
            f"{STACK_DOC}), or update the driver"
        )
    return (
        f"torch {version} (CUDA {cuda}, driver {driver}) sees no GPU among "
        f"CUDA_VISIBLE_DEVICES={visible!r}: check that the devices exist (`nvidia-smi -L`) "
        "and that LENGEN_GPUS names them"
    )


def require_cuda(key: str) -> None:
    """Nothing where torch can use a GPU; else NoUsableGpu in one line naming `key` (what asked
    for CUDA), the installed torch's CUDA, the driver and the fix. A CUDA tier on a machine
    whose torch sees no GPU would end in an NCCL traceback, or shrink to a CPU run silently."""
    import torch

    if torch.cuda.is_available():
        return
    reason = unusable_reason(
        torch.version.cuda,
        driver_version(),
        torch.__version__,
        os.environ.get("CUDA_VISIBLE_DEVICES"),
    )
    raise NoUsableGpu(f"{key} asks for CUDA, but {reason}")


def eval_device() -> str:
    """cuda when a GPU is visible (paper-size models), else one CPU thread per job; a job that
    lengen.core.gpus gave GPUs (a GPU tier's) must have one (require_cuda)."""
    import torch  # here: the ground floor imports no torch at import time

    if os.environ.get(JOB_GPUS, "0") not in ("", "0"):
        require_cuda(f"this job (given {os.environ[JOB_GPUS]} GPU(s) by lengen.core.gpus)")
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
