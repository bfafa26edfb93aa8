"""Training throughput of the default model: tokens/s, fraction of the fp32 matmul ceiling
measured in the same run, and the ratio against transformers' GPTNeoXForCausalLM (same sizes).

    python benchmarks/throughput.py [--config config/config.yaml] [--steps 30] [--d-model 128]
    python benchmarks/throughput.py --config config/paper.yaml --device cuda   # GPU: bf16, MFU
    python benchmarks/throughput.py --config config/paper.yaml --device cuda --compile

Both backbones run the same training step (forward, loss on the scored token, backward, AdamW)
on the same sparse-parity batches at the config's thread count. On CUDA the step runs under bf16
autocast and the ceiling is the measured bf16 matmul rate, so the fraction is the MFU; the peak
GPU memory is printed too. `--compile` also times our model under torch.compile (on CUDA mode
"reduce-overhead": CUDA graphs, for the small-batch model whose step is kernel-launch bound) and
prints its ratio to the eager step; a step whose batch shape is new is compiled, not timed.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch

from lengen.config.config import load
from lengen.core.batch import step_rng
from lengen.core.specs import Spec
from lengen.model.hf import to_transformers
from lengen.tasks import parse_spec
from lengen.tasks import sparse_parity as sp
from lengen.train.loss import scored_loss
from lengen.train.train import build_model


def sync(device: str) -> None:
    """Wait for queued GPU work (timings on CUDA are asynchronous)."""
    if device == "cuda":
        torch.cuda.synchronize()


def matmul_ceiling(device: str = "cpu", reps: int = 20) -> float:
    """Best GFLOP/s of a square matmul: fp32 n=1024 on CPU, bf16 n=8192 on CUDA."""
    n, dtype = (8192, torch.bfloat16) if device == "cuda" else (1024, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(reps):
        sync(device)
        t = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def time_steps(
    forward, params, spec: Spec, steps: int, device: str = "cpu", compiled: bool = False
) -> float:
    """Tokens/s of `steps` training steps on sparse-parity batches after 5 warm-up steps; for a
    compiled forward a step whose batch shape is new (it compiles then) is not timed either."""
    opt = torch.optim.AdamW(params, lr=1e-4)
    autocast = (
        (lambda: torch.autocast("cuda", dtype=torch.bfloat16))
        if device == "cuda"
        else contextlib.nullcontext
    )
    tokens, elapsed, shapes = 0, 0.0, set()
    for step in range(steps + 5):
        inputs = sp.train_batch(spec, step_rng(0, step), step).model_inputs(device)
        shape = tuple(inputs["input_ids"].shape)
        sync(device)
        t = time.perf_counter()
        with autocast():
            logits = forward(inputs["input_ids"], inputs["position_ids"])
        loss = scored_loss(logits.float(), inputs["labels"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sync(device)
        if step >= 5 and (not compiled or shape in shapes):
            elapsed += time.perf_counter() - t
            tokens += inputs["input_ids"].numel()
        shapes.add(shape)
    if not tokens:
        raise ValueError(f"no step was timed: raise --steps above {steps} (every shape was new)")
    return tokens / elapsed


def main(argv: list[str] | None = None) -> None:
    """Print throughput, fraction of the matmul ceiling, and the ratio against transformers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--d-model", type=int, help="override the config's width (n_head kept)")
    parser.add_argument("--n-layer", type=int, help="override the config's depth")
    parser.add_argument("--batch-size", type=int, help="override the config's batch size")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--compile", action="store_true", help="also time ours compiled")
    args = parser.parse_args(argv)
    dev = args.device
    cfg = load(args.config)
    sp_cfg = cfg["sparse_parity"]
    if args.d_model:
        sp_cfg["model"]["d_model"] = args.d_model
    if args.n_layer:
        sp_cfg["model"]["n_layer"] = args.n_layer
    if args.batch_size:
        sp_cfg["train"]["batch_size"] = args.batch_size
    torch.set_num_threads(cfg["runtime"]["threads_per_job"])
    spec = parse_spec(sp.train_spec(cfg, max(cfg["sparse_parity"]["k_train"])))
    ours = build_model(spec).to(dev)
    theirs = to_transformers(ours).to(dev).train()
    mean_len = (spec.task.train_min_len + spec.task.train_max_len) / 2 + 2
    ceiling = matmul_ceiling(dev)
    ours_tps = time_steps(ours, ours.parameters(), spec, args.steps, dev)
    theirs_tps = time_steps(
        lambda i, p: theirs(input_ids=i, position_ids=p).logits,
        theirs.parameters(),
        spec,
        args.steps,
        dev,
    )
    compiled_tps = None
    if args.compile:
        mode = "reduce-overhead" if dev == "cuda" else "default"
        compiled_tps = time_steps(
            torch.compile(ours, mode=mode), ours.parameters(), spec, args.steps, dev, compiled=True
        )
    ceiling = max(ceiling, matmul_ceiling(dev))  # measured before and after, best of both
    achieved = ours_tps * ours.flops_per_token(int(mean_len)) / 1e9
    where = torch.cuda.get_device_name() if dev == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"device                       {where}")
    size = f"{ours.cfg.n_layer}x{ours.cfg.d_model}, {ours.num_params():,} params"
    print(f"model                        {size}")
    kind = "bf16" if dev == "cuda" else "fp32"
    print(f"{kind} matmul ceiling          {ceiling:8.1f} GFLOP/s")
    print(
        f"lengen GPTNeoX               {ours_tps:8.0f} tokens/s  {achieved:6.1f} GFLOP/s"
        f"  = {achieved / ceiling:5.1%} of ceiling"
    )
    print(f"transformers GPTNeoX         {theirs_tps:8.0f} tokens/s")
    print(f"ratio lengen / transformers  {ours_tps / theirs_tps:8.2f}x")
    if compiled_tps is not None:
        fraction = compiled_tps * ours.flops_per_token(int(mean_len)) / 1e9 / ceiling
        label = f"lengen compiled ({mode})"
        print(f"{label:28s} {compiled_tps:8.0f} tokens/s  = {fraction:5.1%} of ceiling")
        print(f"ratio compiled / eager      {compiled_tps / ours_tps:8.2f}x")
    if dev == "cuda":
        print(f"peak GPU memory              {torch.cuda.max_memory_allocated() / 2**30:8.2f} GiB")


if __name__ == "__main__":
    main()
