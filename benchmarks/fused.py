"""Fused runs (lengen.model.fused) against the same runs one by one: seconds per training step
(forward, backward, per-run clipping, AdamW) of R models of one shape, and tokens per second.

    python benchmarks/fused.py                                   # CPU, one thread, 3 x 128 model
    python benchmarks/fused.py --device cuda --layers 12 --width 1024 --heads 16 --batch 64 \
        --runs 1 4 8 16 32 --bf16 [--compile]       # the paper's synthetic model (issue 45)

Each run trains its own random batch of the tier's shape (batch x length tokens; the work per
token does not depend on the data). "alone" steps the R models one after another, each with its
own AdamW, as R separate trainings on one device would; "fused" steps them as one FusedGPTNeoX
with one AdamW over the stacked weights. Prints, per R, both times and their ratio (alone /
fused: above 1 the fused group is faster), and the fused group's MFU: its model FLOPs per second
(GPTNeoX.flops_per_token: 6N + attention) over the matmul ceiling measured in the same run
(throughput.matmul_ceiling: bf16 on CUDA, fp32 on CPU); with --json, writes them. --bf16 runs
both under bf16 autocast (the GPU tiers' precision); --compile torch.compiles both steps.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from throughput import matmul_ceiling, sync  # this folder's (python benchmarks/fused.py)

from lengen.model.fused import FusedGPTNeoX
from lengen.model.model import GPTNeoX, ModelConfig


def timed(step, n: int, warmup: int, device: str) -> float:
    """Median seconds of `step()` over n calls after `warmup`."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(n):
        sync(device)
        t0 = time.perf_counter()
        step()
        sync(device)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def runs_and_batch(cfg: ModelConfig, runs: int, batch: int, length: int, device: str):
    """`runs` models of `cfg` (seeds 0..runs-1) and one batch for each: (models, ids, positions,
    labels), the tensors shaped (runs, batch, length)."""
    models = []
    for seed in range(runs):
        torch.manual_seed(seed)
        models.append(GPTNeoX(cfg).to(device))
    ids = torch.randint(0, cfg.vocab_size, (runs, batch, length), device=device)
    pos = torch.arange(length, device=device).expand(runs, batch, length).contiguous()
    labels = torch.roll(ids, -1, dims=-1)
    return models, ids, pos, labels


def adamw(params, device: str) -> torch.optim.AdamW:
    """The trainers' AdamW (lengen.train.lifecycle.make_engine, alone and fused): torch's fused
    one on CUDA (the 2026-11-26 H200 numbers predate this and used the foreach one, both sides
    alike)."""
    return torch.optim.AdamW(params, lr=1e-4, fused=True if device == "cuda" else None)


def autocast_step(step, device: str, bf16: bool, compile_: bool = False):
    """`step` under bf16 autocast (the GPU tiers'), compiled if asked."""

    def go():
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bf16):
            step()

    return torch.compile(go) if compile_ else go


def fused_step(models: list, ids, pos, labels, device: str):
    """One training step of the models fused (lengen.model.fused.FusedGPTNeoX): the runs' losses
    summed, each run's gradient clipped alone, one AdamW."""
    fused = FusedGPTNeoX(models).to(device)
    opt = adamw(fused.parameters(), device)

    def step():
        out = fused(ids, pos)
        out = out[0] if isinstance(out, tuple) else out
        losses = torch.nn.functional.cross_entropy(
            out.flatten(1, 2).transpose(1, 2), labels.flatten(1), reduction="none"
        ).mean(1)
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        fused.clip_run_grads_(1.0)
        opt.step()

    return step


def measure(
    cfg: ModelConfig,
    runs: int,
    batch: int,
    length: int,
    device: str,
    steps: int,
    warmup: int,
    bf16: bool = False,
    compile_: bool = False,
) -> dict:
    """Seconds per step alone and fused for `runs` models."""
    models, ids, pos, labels = runs_and_batch(cfg, runs, batch, length, device)
    opts = [adamw(m.parameters(), device) for m in models]

    def alone():
        for r, (m, o) in enumerate(zip(models, opts, strict=True)):
            out = m(ids[r], pos[r])
            out = out[0] if isinstance(out, tuple) else out
            loss = torch.nn.functional.cross_entropy(out.transpose(1, 2), labels[r])
            o.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            o.step()

    together = fused_step(models, ids, pos, labels, device)
    t_alone = timed(autocast_step(alone, device, bf16, compile_), steps, warmup, device)
    t_fused = timed(autocast_step(together, device, bf16, compile_), steps, warmup, device)
    tokens = runs * batch * length
    flops = models[0].flops_per_token(length) * tokens
    return {
        "runs": runs,
        "alone_s": t_alone,
        "fused_s": t_fused,
        "ratio": t_alone / t_fused,
        "alone_tok_s": tokens / t_alone,
        "fused_tok_s": tokens / t_fused,
        "fused_tflops": flops / t_fused / 1e12,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=25, help="tokens per sequence")
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (the GPU tiers')")
    parser.add_argument("--compile", action="store_true", help="torch.compile both steps")
    parser.add_argument("--json", help="write the rows here")
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
    )  # the PPC model
    ceiling = matmul_ceiling(args.device) / 1e3  # TFLOP/s
    rows = []
    for runs in args.runs:
        try:
            row = measure(
                cfg,
                runs,
                args.batch,
                args.length,
                args.device,
                args.steps,
                args.warmup,
                args.bf16,
                args.compile,
            )
        except torch.OutOfMemoryError:  # as far as memory allows (the larger R are larger)
            print(f"R = {runs:3d}: out of memory ({args.device}); larger R not tried", flush=True)
            rows.append({"runs": runs, "out_of_memory": True})
            break
        row["fused_mfu"] = row["fused_tflops"] / ceiling
        rows.append(row)
        _write(args, ceiling, rows)  # after each R: a later R's crash keeps the earlier rows
        print(
            f"R = {runs:3d}: alone {row['alone_s'] * 1e3:8.1f} ms/step, fused "
            f"{row['fused_s'] * 1e3:8.1f} ms/step, ratio {row['ratio']:.2f}x "
            f"({row['fused_tok_s']:.0f} tok/s, MFU {row['fused_mfu']:.1%} fused)",
            flush=True,
        )
    _write(args, ceiling, rows)
    return rows


def _write(args, ceiling: float, rows: list[dict]) -> None:
    """The rows so far to --json, if given."""
    if args.json:
        meta = {k: v for k, v in vars(args).items() if k != "json"}
        with open(args.json, "w") as f:
            json.dump({"setup": meta, "ceiling_tflops": ceiling, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
