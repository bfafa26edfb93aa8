"""Where a fused group's training step spends its time (issue 45: the fused step saturates at
~14% MFU on an H200, benchmarks/measured/2026-11-26-h200): torch.profiler over a few steps of R
models of one shape as one FusedGPTNeoX (forward, backward, per-run clipping, AdamW), the same
step benchmarks/fused.py times.

    python benchmarks/fused_profile.py                            # CPU, a 3 x 128 model
    python benchmarks/fused_profile.py --device cuda --layers 12 --width 1024 --heads 16 \
        --batch 64 --runs 8 --bf16 --json OUT.json       # the paper's synthetic model, 8 runs

Prints the step's wall time, the device's busy time within it (on CUDA: the kernels' summed
time, CUPTI's overhead records left out; below the wall time: the GPU waits on the host; also
how often the host found the launch queue full, i.e. waited on the GPU), and the kernels or
operators that take the most time, grouped as matmuls, attention, optimizer (AdamW, the per-run
clipping), copies and casts, reductions, other elementwise work and the rest, each with its
share; --json writes them.
"""

from __future__ import annotations

import argparse
import json
import time

import fused  # this folder's (python benchmarks/fused_profile.py)
import torch
from throughput import sync

from lengen.model.model import ModelConfig

GROUPS = {  # operator or kernel name fragments -> group (the first match wins)
    "matmul": (
        "aten::mm",
        "aten::bmm",
        "aten::addmm",
        "aten::baddbmm",
        "aten::matmul",
        "aten::linear",
        "gemm",
        "nvjet",
        "cutlass",
        "xmma",
        "cublas",
    ),
    "attention": ("attention", "softmax", "flash", "fmha", "sdpa"),
    "optimizer": ("adam", "foreach", "multi_tensor_apply", "clip"),
    "copy/cast": ("copy", "to_copy", "cast"),
    "layer norm": ("layer_norm", "layernorm"),
    "reduction": ("reduce", "aten::sum", "norm"),
    "elementwise": (
        "elementwise",
        "aten::add",
        "aten::mul",
        "aten::div",
        "aten::gelu",
        "aten::where",
    ),
}
# CUPTI's overhead records (torch/profiler/_cupti_monitor.py): not kernels, so not device time.
# "Command Buffer Full": the host's launch queue was full, i.e. it waited on the GPU (the step is
# bound by the GPU's work, not by kernel launches). Counted, not summed into the busy time: the
# first H200 profile (2026-11-26) summed them as device time, 915 ms in a 106 ms step, and its
# "mm" fragment put them among the matmuls.
CUPTI_OVERHEAD = (
    "Command Buffer Full",
    "Buffer Flush",
    "Instrumentation",
    "Resource",
    "Driver Compiler",
    "Runtime Triggered Module Loading",
    "Lazy Function Loading",
    "Activity Buffer Request",
    "UVM Activity Init",
)


def group_of(name: str) -> str:
    lowered = name.lower()
    return next((g for g, keys in GROUPS.items() if any(k in lowered for k in keys)), "other")


def fused_step(cfg: ModelConfig, runs: int, batch: int, length: int, device: str, bf16: bool):
    """The step benchmarks/fused.py times for `runs` models, fused (its own code: the trainer's
    fused AdamW on CUDA; the first H200 profile, 2026-11-26, predates it and ran the foreach one,
    its multi_tensor_apply kernels)."""
    step = fused.fused_step(*fused.runs_and_batch(cfg, runs, batch, length, device), device)
    return fused.autocast_step(step, device, bf16)


def profile(step, steps: int, warmup: int, device: str, top: int) -> dict:
    """Wall time per step, the time the device spent in kernels (on CUDA: the kernels, copies and
    memsets themselves, each counted once; on the CPU: the operators' own CPU time), grouped, and
    the top kernels or operators; on CUDA also how often per step the host found the launch
    queue full."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    for _ in range(warmup):
        step()
    sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch_profile(activities=activities) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync(device)
        wall = (time.perf_counter() - t0) / steps
    found = tally(prof.events(), device, steps, top)
    busy = found["device_busy_s"]
    return {"wall_s": wall, "busy_share": busy / wall if device == "cuda" else None, **found}


def tally(events, device: str, steps: int, top: int) -> dict:
    """The profiled events per step: busy time, groups, top names; on CUDA the device's own
    events only (kernels, copies, memsets), CUPTI's overhead records counted apart."""
    from torch.autograd import DeviceType

    by_name: dict[str, list[float]] = {}  # name -> [seconds, calls] over the profiled steps
    queue_full = 0
    for e in events:
        if device == "cuda":
            if e.device_type == DeviceType.CPU:
                continue  # a host operator: its kernels are counted as themselves
            if getattr(e, "is_user_annotation", False):
                # a span over kernels on the GPU's timeline (torch's "Optimizer.step#AdamW.step",
                # a record_function): its kernels are counted as themselves (the H200 profile of
                # 2026-11-26, lease 3, counted AdamW's 9.7 ms twice: "108% of the step")
                continue
            if e.name in CUPTI_OVERHEAD:
                queue_full += e.name == "Command Buffer Full"
                continue
            seconds = e.time_range.elapsed_us() / 1e6
        else:
            seconds = e.self_cpu_time_total / 1e6
        if seconds > 0:
            row = by_name.setdefault(e.name, [0.0, 0])
            row[0] += seconds
            row[1] += 1
    groups: dict[str, float] = {}
    for name, (s, _) in by_name.items():
        groups[group_of(name)] = groups.get(group_of(name), 0.0) + s / steps
    ops = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]
    return {
        "device_busy_s": sum(s for s, _ in by_name.values()) / steps,
        "queue_full_per_step": queue_full / steps if device == "cuda" else None,
        "groups_s": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
        "top": [{"op": name, "s_per_step": s / steps, "calls": n // steps} for name, (s, n) in ops],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=25)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = ModelConfig(
        vocab_size=args.vocab,
        n_layer=args.layers,
        n_head=args.heads,
        d_model=args.width,
        position="learned",
        predict_positions=True,
        l_max=max(64, args.length),
    )  # the PPC model, as fused.py's
    step = fused_step(cfg, args.runs, args.batch, args.length, args.device, args.bf16)
    found = profile(step, args.steps, args.warmup, args.device, args.top)
    where = "GPU kernels" if args.device == "cuda" else "CPU operators"
    share = f" ({found['busy_share']:.0%} of the step)" if found["busy_share"] else ""
    if found["queue_full_per_step"]:
        share += f"; launch queue full {found['queue_full_per_step']:.0f} times per step"
    print(
        f"R = {args.runs}: {found['wall_s'] * 1e3:.1f} ms per step; {where} "
        f"{found['device_busy_s'] * 1e3:.1f} ms{share}"
    )
    for name, s in found["groups_s"].items():
        print(f"  {name:10s} {s * 1e3:8.2f} ms  {s / found['device_busy_s']:6.1%}")
    for op in found["top"]:
        print(f"    {op['s_per_step'] * 1e3:8.3f} ms  x{op['calls']:<4d} {op['op']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"setup": {k: v for k, v in vars(args).items() if k != "json"}, **found},
                f,
                indent=2,
            )
    return found


if __name__ == "__main__":
    main()
