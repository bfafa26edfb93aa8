"""The trainer's fused step, timed and profiled (issue 63, item 5 b and c): a tier's fused group
as the workflow trains it (lengen.train.group.Fused: the DeepSpeed engine at the tier's
precision, each run's loss and clipping, torch's fused AdamW, the group's batches made ahead in
a worker), not the bare loop benchmarks/fused.py times.

    python benchmarks/group_step.py --config config/gpu.yaml --device cuda --runs 8 16 \
        --compile none default --profile 3 --json OUT.json
    python benchmarks/group_step.py --config config/smoke.yaml --runs 2 --steps 2   # CPU

Per (variant, R, compile mode) it builds the variant's first fused group of the tier
(lengen.config.plan.group, with runtime.fuse_runs set to R: its runs' own specs, seeds and
settings), times `--steps` optimizer steps from the middle of training (past the curricula)
after `--warmup` untimed ones, and prints the median ms per step, the real tokens per second
(padding not counted), the padding's share of the tokens fed, the achieved TFLOP/s on real
tokens (each run's 6N + attention per token, as step_time.py counts it) and its fraction of
the dense bf16 peak (`--peak`, 989 TFLOP/s for an H100 or H200 SXM) and of the matmul ceiling
measured in the same run. With `--profile N` it then profiles N eager steps and splits the
GPU's time as fused_profile.py does (matmuls, attention, optimizer, copies, ...), with the
share of the step the GPU was busy. Compiled, a step whose batch shape is new recompiles and
is not timed.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from fused_profile import profile  # this folder's
from throughput import matmul_ceiling, sync

from lengen.config import plan
from lengen.config.config import load
from lengen.tasks import parse_spec
from lengen.train import runtime
from lengen.train.group import Fused

PEAK_TFLOPS = 989.0  # H100 / H200 SXM dense bf16


def group_specs(cfg: dict, name: str, runs: int, compile_mode: str) -> list:
    """The first fused group of `name` (experiment/variant) with fuse_runs = runs."""
    cfg = copy.deepcopy(cfg)
    cfg["runtime"]["fuse_runs"] = runs
    experiment, variant = name.split("/")
    specs = []
    for run in plan.group(cfg, experiment, variant, 0):
        spec = run.spec(cfg)
        spec["runtime"]["compile"] = compile_mode
        specs.append(parse_spec(spec))
    return specs


def measure(
    cfg: dict,
    name: str,
    runs: int,
    compile_mode: str,
    steps: int,
    warmup: int,
    profile_steps: int,
    ceiling: float,
    peak: float,
    device: str,
) -> dict:
    specs = group_specs(cfg, name, runs, compile_mode)
    runtime.setup(specs[0].runtime)
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / str(i) for i in range(len(specs))]
        trainee = Fused(specs, outs)
        member = trainee.fused.member(0)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        first = specs[0].train.steps // 2  # the step index picks the batch (curricula)
        times, real, fed, seen = [], [], [], set()
        for i in range(warmup + steps):
            sync(device)
            t = time.perf_counter()
            _, tokens = trainee.step(first + i)
            sync(device)
            padded = trainee.fed  # R x B x T, the padding included
            if i >= warmup and (compile_mode == "none" or padded in seen):
                times.append(time.perf_counter() - t)
                real.append(sum(tokens))
                fed.append(padded)
            seen.add(padded)
        s = statistics.median(times) if times else float("nan")
        real_per_step = sum(real) / max(len(real), 1)
        seq_len = real_per_step / (len(specs) * specs[0].train.batch_size)
        tflops = real_per_step * member.flops_per_token(max(1, round(seq_len))) / s / 1e12
        row = {
            "group": name,
            "runs": len(specs),
            "compile": compile_mode,
            "params_per_run": member.num_params(),
            "batch": specs[0].train.batch_size,
            "timed_steps": len(times),
            "ms_per_step": 1e3 * s,
            "ms_per_run_step": 1e3 * s / len(specs),
            "real_tokens_per_step": real_per_step,
            "padding_share": 1 - sum(real) / max(sum(fed), 1),
            "real_tokens_per_s": real_per_step / s,
            "tflops_real": tflops,
            "mfu_peak": tflops / peak,
            "of_ceiling": tflops / (ceiling / 1e3),
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None,
        }
        if profile_steps and compile_mode == "none":
            counter = iter(range(first + warmup + steps, first + 10**6))
            step = trainee.step
            row["profile"] = profile(lambda: step(next(counter)), profile_steps, 1, device, 12)
        trainee.close()
        del trainee, member
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/gpu.yaml")
    parser.add_argument(
        "--device", choices=["cpu", "cuda"], default=None, help="default: cuda where there is one"
    )
    parser.add_argument(
        "--groups", nargs="+", default=["parity_scratchpad/ppc", "sparse_parity/neox"]
    )
    parser.add_argument("--runs", type=int, nargs="+", default=[8])
    parser.add_argument(
        "--compile",
        nargs="+",
        default=["none"],
        help="runtime.compile modes: none, default, reduce-overhead, ...",
    )
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, help="profiled eager steps (0: none)")
    parser.add_argument("--peak", type=float, default=PEAK_TFLOPS, help="dense bf16 TFLOP/s")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cfg = load(args.config)
    cfg["runtime"]["device"] = device
    if device == "cpu":
        cfg["runtime"]["precision"] = "fp32"
    ceiling = matmul_ceiling(device)  # GFLOP/s
    print(f"matmul ceiling: {ceiling / 1e3:.0f} TFLOP/s; peak {args.peak:.0f}", flush=True)
    rows = []
    for name in args.groups:
        for runs in args.runs:
            for mode in args.compile:
                t0 = time.perf_counter()
                row = measure(
                    cfg,
                    name,
                    runs,
                    mode,
                    args.steps,
                    args.warmup,
                    args.profile,
                    ceiling,
                    args.peak,
                    device,
                )
                row["wall_s"] = time.perf_counter() - t0
                rows.append(row)
                print(
                    f"{name} R={row['runs']} compile={mode}: {row['ms_per_step']:.1f} ms/step "
                    f"({row['ms_per_run_step']:.2f} per run), "
                    f"{row['real_tokens_per_s']:.0f} real tok/s, padding "
                    f"{row['padding_share']:.1%}, {row['tflops_real']:.1f} TFLOP/s = "
                    f"{row['mfu_peak']:.1%} of peak, {row['of_ceiling']:.1%} of ceiling, "
                    f"{row['wall_s']:.0f} s",
                    flush=True,
                )
                if "profile" in row:
                    p = row["profile"]
                    split = ", ".join(f"{g} {1e3 * s:.1f}" for g, s in p["groups_s"].items())
                    print(
                        f"  profile: wall {1e3 * p['wall_s']:.1f} ms, GPU busy "
                        f"{p['busy_share'] or 0:.0%}: {split} ms",
                        flush=True,
                    )
                if args.json:  # written after each row: a step cut off keeps the ones before
                    args.json.write_text(
                        json.dumps(
                            {
                                "device": torch.cuda.get_device_name()
                                if device == "cuda"
                                else "cpu",
                                "ceiling_tflops": ceiling / 1e3,
                                "peak_tflops": args.peak,
                                "rows": rows,
                            },
                            indent=1,
                        )
                    )
    return rows


if __name__ == "__main__":
    main()
