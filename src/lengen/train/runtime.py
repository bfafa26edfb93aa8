"""The runtime, apart from the model and the training loop: threads and accelerator choice,
the process group, and the DeepSpeed engine and its config (torchtitan keeps these apart too). The
model (lengen.model.model) knows nothing of it; lengen.train.train builds the optimizer and schedule
and hands them here to be wrapped."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from lengen.core.cli import say
from lengen.core.device import require_cuda
from lengen.core.specs import bf16_section, ds_config_clashes, ds_config_unknown, merge_dicts

if TYPE_CHECKING:
    from lengen.core.specs import RuntimeSpec, Spec


def _init_distributed(runtime: RuntimeSpec) -> None:
    """Process group for DeepSpeed: the launcher's env, or a single-process group (gloo on CPU)."""
    import deepspeed
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        deepspeed.init_distributed()
        return
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    backend = "nccl" if runtime.device == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)


def deepspeed_config(spec: Spec, world: int) -> dict:
    """DeepSpeed config dict from the spec's train and runtime sections."""
    train, runtime = spec.train, spec.runtime
    micro = train.micro_batch_size or train.batch_size // world
    accum = train.batch_size // (micro * world)
    if micro * world * accum != train.batch_size:
        raise ValueError(
            f"batch_size {train.batch_size} is not {world} processes x micro-batches of {micro}"
        )
    computed = {
        "train_batch_size": train.batch_size,
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accum,
        "gradient_clipping": train.grad_clip,
        **precision_section(runtime),
        "zero_optimization": {"stage": runtime.zero_stage},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    user = runtime.ds_config or {}  # the tier's ds_config JSON, merged over the above
    for key in (
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
    ):
        if key in user and user[key] != computed[key]:
            raise ValueError(
                f"ds_config sets {key} = {user[key]}, but the train section gives {computed[key]} "
                f"(batch_size {train.batch_size}, {world} processes): set it in the config"
            )
    bf16 = runtime.precision == "bf16"
    clashes = ds_config_clashes(user, train.grad_clip, bf16, runtime.zero_stage)
    for message in [*ds_config_unknown(user), *clashes]:
        raise ValueError(message)
    return merge_dicts(computed, user)


def precision_section(runtime: RuntimeSpec) -> dict:
    """runtime.precision as DeepSpeed config: fp32, no section enabled; bf16, the section
    lengen.core.specs.bf16_section picks for the ZeRO stage (without ZeRO: torch_autocast)."""
    if runtime.precision != "bf16":
        return {"bf16": {"enabled": False}}
    if bf16_section(runtime.zero_stage) == "torch_autocast":
        return {"torch_autocast": {"enabled": True, "dtype": "bfloat16"}}
    return {"bf16": {"enabled": True}}


def setup(runtime: RuntimeSpec) -> None:
    """Threads and accelerator selection; must run before deepspeed is imported."""
    if runtime.device == "cuda":
        require_cuda("runtime.device")
    if runtime.device == "cpu":
        os.environ["DS_ACCELERATOR"] = "cpu"
        torch.set_num_threads(runtime.threads_per_job)
    import deepspeed.ops

    # Single CPU process: skip the JIT-compiled shared-memory comm op (45-120 s, unused).
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def compile_engine(engine, runtime: RuntimeSpec) -> None:
    """`runtime.compile`: torch.compile the engine's model in place (DeepSpeed's engine.compile,
    which keeps its hooks), with Inductor's mode; nothing for "none"."""
    if runtime.compile == "none":
        return
    engine.compile(compile_kwargs={} if runtime.compile == "default" else {"mode": runtime.compile})


def deepspeed_engine(spec: Spec, model: torch.nn.Module, optimizer, scheduler):
    """DeepSpeed engine wrapping model, a client optimizer and lr scheduler (spec's runtime); on
    one process without ZeRO it does not all-reduce the gradients (a no-op there, bitwise)."""
    import deepspeed
    import torch.distributed as dist

    _init_distributed(spec.runtime)
    engine, _, _, _ = deepspeed.initialize(
        model=model,
        optimizer=optimizer,
        lr_scheduler=scheduler,
        config=deepspeed_config(spec, dist.get_world_size()),
    )
    if dist.get_world_size() == 1 and spec.runtime.zero_stage == 0:
        # one process, no ZeRO: nothing to reduce, yet DeepSpeed's backward would flatten every
        # gradient, divide it by 1, all-reduce it alone and copy it back, each step (150 copies
        # and passes over all the gradients per fused step: benchmarks/launches.py)
        engine.enable_backward_allreduce = False
    return engine


_STOPPED: list[int] = []  # the signal exit_on_signals' handler took, once it took one


def exit_on_signals(out: Path | list[Path]) -> None:
    """Snakemake and SLURM stop a job with SIGTERM (and a lost terminal with SIGHUP): exit
    through Python, so MLflow runs end KILLED and a fused group closes its members' runs, after
    one line naming the signal, when, and what a rerun does (Snakemake's own report is only "a
    non-zero exit code"). The handler's SystemExit can land where Python swallows it (a garbage
    collector's callback: "Exception ignored in ..."); the signal is recorded, and the training
    loop's `exit_if_stopped` exits at its next step."""
    outs = [out] if isinstance(out, Path) else out

    def stop(signum, frame):
        if not _STOPPED:
            name = signal.Signals(signum).name
            say(
                f"stopped by {name} (signal {signum}) at {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                f"{', '.join(map(str, outs))} keep their last checkpoints; rerun the job (or "
                "snakemake) to resume from them"
            )
            _STOPPED.append(signum)
        sys.exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


def exit_if_stopped() -> None:
    """Exit as the signal handler does, when it took a signal whose exit was swallowed."""
    if _STOPPED:
        sys.exit(128 + _STOPPED[0])
