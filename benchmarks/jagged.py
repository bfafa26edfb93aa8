"""A fused group's linear layers without the padding (issue 63, item 2): each run's own tokens
through its own weights as one grouped GEMM (`torch._grouped_mm`: the runs' tokens concatenated,
each run's rows multiplied by its weight), against the padded batched matmul the fused model runs
today (lengen.model.fused.FusedGPTNeoX.linear: every run padded to the group's longest batch).

    python benchmarks/jagged.py --config config/gpu.yaml --group parity_scratchpad/ppc \
        --device cuda --dtype bf16 --samples 20 --json OUT.json

For `--samples` training steps of the variant's first fused group (its runs' own batches, as
benchmarks/padding.py counts them) it runs one layer's four linears (query-key-value, attention
output, MLP up and down; the model's widths, bias included) forward and backward both ways and
reports the median milliseconds of each, their ratio, and the tokens fed both ways. The outputs
and gradients must agree on the real tokens (fp32: to rounding; compared every sample, the largest
relative difference reported). The grouped
GEMM needs 16-byte-aligned strides on a GPU (bf16: widths a multiple of 8). Attention stays per
run either way and is not timed here; whether a whole jagged step (attention on each run's own
length, no CUDA graph over a shape that changes every step) beats the padded one is the next
question, for a GPU."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from lengen import tasks
from lengen.config import plan
from lengen.config.config import load
from lengen.core.batch import step_rng
from lengen.tasks import parse_spec


def run_tokens(cfg: dict, group: str, samples: int) -> tuple[list[list[int]], dict]:
    """Each sampled step's tokens per run ([samples][R]) of the group's first fused group, spread
    over training, and its runs' model section."""
    experiment, variant = group.split("/")
    runs = plan.groups(cfg, experiment, variant)[0]
    specs = [parse_spec(r.spec(cfg)) for r in runs]
    task = tasks.get(experiment)
    steps = np.linspace(0, specs[0].train.steps - 1, samples).round().astype(int).tolist()
    counts = [
        [task.train_batch(s, step_rng(s.seed, step, 0), step).tokens[:, :-1].size for s in specs]
        for step in steps
    ]
    return counts, specs[0].model


def layer(model: dict, runs: int, device: str, dtype: torch.dtype, seed: int = 0) -> list:
    """One layer's four linears for R runs: (weight [R, in, out], bias [R, out]) each."""
    d = model["d_model"]
    h = model.get("d_mlp") or 4 * d  # the MLP's width, as ModelConfig.mlp_dim
    gen = torch.Generator().manual_seed(seed)
    shapes = [(d, 3 * d), (d, d), (d, h), (h, d)]
    made = [
        (
            torch.randn(runs, i, o, generator=gen).mul_(i**-0.5),
            torch.randn(runs, o, generator=gen).mul_(0.02),
        )
        for i, o in shapes
    ]
    return [tuple(t.to(device, dtype).requires_grad_() for t in pair) for pair in made]


def padded(x: torch.Tensor, weights: list) -> list[torch.Tensor]:
    """The fused model's way: x (R, longest, width), every run padded to the group's longest
    batch as the model receives it; one baddbmm per linear, on the first `in` features."""
    return [torch.baddbmm(b[:, None], x[..., : w.shape[1]], w) for w, b in weights]


def grouped(x: torch.Tensor, ends: torch.Tensor, run: torch.Tensor, weights: list) -> list:
    """Each run's own rows only: x (sum of the runs' tokens, width), the runs' rows one after
    another (`ends`: where each run's rows end); one grouped GEMM per linear, each row's run's
    bias added after it (`run`: the run of each row)."""
    return [torch._grouped_mm(x[:, : w.shape[1]], w, offs=ends) + b[run] for w, b in weights]


def timed(fn, device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t


def one_sample(sample: list[int], weights: list, gen, device: str, dtype) -> dict:
    """One step's tokens per run through the layer both ways, forward and backward (the loss on
    the real tokens only, as training scores them): seconds of each, and the largest relative
    difference of outputs and gradients."""
    runs, width = len(sample), max(w.shape[1] for w, _ in weights)
    xs = [torch.randn(n, width, generator=gen).to(device, dtype) for n in sample]
    x_pad = torch.zeros(runs, max(sample), width, device=device, dtype=dtype)
    for r, xr in enumerate(xs):
        x_pad[r, : len(xr)] = xr
    x_cat = torch.cat(xs)
    ends = torch.tensor(np.cumsum(sample), dtype=torch.int32, device=device)
    run = torch.repeat_interleave(
        torch.arange(runs, device=device), torch.tensor(sample, device=device)
    )

    # the padded rows are masked out of the loss, as training's target mask does
    lengths = torch.tensor(sample, device=device)
    mask = torch.arange(max(sample), device=device)[None] < lengths[:, None]
    ways = {
        "padded": (lambda: padded(x_pad, weights), mask[..., None].to(dtype)),
        "grouped": (lambda: grouped(x_cat, ends, run, weights), None),
    }
    out, kept = {}, {}
    for name, (fn, keep) in ways.items():

        def step(fn=fn, keep=keep):
            for w, b in weights:
                w.grad = b.grad = None
            outs = fn()
            scored = outs if keep is None else [o * keep for o in outs]
            sum(o.float().square().sum() for o in scored).backward()
            return outs

        out[name] = timed(step, device)
        outs = step()  # again, kept: the outputs and gradients compared on the real rows
        if keep is not None:
            outs = [torch.cat([o[r, :n] for r, n in enumerate(sample)]) for o in outs]
        kept[name] = [*outs, *[p.grad.clone() for pair in weights for p in pair]]
    out["worst"] = max(
        ((a.float() - b.float()).abs().max() / a.float().abs().max()).item()
        for a, b in zip(kept["padded"], kept["grouped"], strict=True)
    )
    return out


def measure(
    counts: list[list[int]], model: dict, device: str, dtype: torch.dtype, warmup: int = 2
) -> dict:
    """Median ms of the padded and the grouped layer over the samples (the first `warmup` not
    timed when there are more), the tokens fed each way, the largest relative difference."""
    weights = layer(model, len(counts[0]), device, dtype)
    gen = torch.Generator().manual_seed(1)
    done = [one_sample(sample, weights, gen, device, dtype) for sample in counts]
    timed_ = done[warmup:] if len(done) > warmup else done
    fed = sum(len(s) * max(s) for s in counts)
    own = sum(sum(s) for s in counts)
    return {
        "runs": len(counts[0]),
        "samples": len(counts),
        "ms_padded": 1e3 * statistics.median(d["padded"] for d in timed_),
        "ms_grouped": 1e3 * statistics.median(d["grouped"] for d in timed_),
        "tokens_fed_padded": fed,
        "tokens_own": own,
        "max_rel_difference": max(d["worst"] for d in done),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/gpu.yaml")
    parser.add_argument("--group", default="parity_scratchpad/ppc", help="experiment/variant")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--samples", type=int, default=10, help="training steps sampled")
    parser.add_argument("--d-model", type=int, help="override the model's width (a CPU check)")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load(args.config)
    counts, model = run_tokens(cfg, args.group, args.samples)
    if args.d_model:
        model = {**model, "d_model": args.d_model, "d_mlp": 4 * args.d_model}
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    row = measure(counts, model, args.device, dtype)
    where = torch.cuda.get_device_name() if args.device == "cuda" else "1 CPU thread"
    print(f"{args.group}, R = {row['runs']}, d_model {model['d_model']}, {args.dtype}, {where}")
    print(
        f"padded (today's fused linear)  {row['ms_padded']:8.1f} ms   tokens fed "
        f"{row['tokens_fed_padded'] / row['tokens_own']:.3f}x the runs' own"
    )
    print(
        f"grouped GEMM (each run's own)  {row['ms_grouped']:8.1f} ms   ratio "
        f"{row['ms_padded'] / row['ms_grouped']:.2f}x"
    )
    print(
        f"largest difference, outputs and gradients (relative to each's largest): "
        f"{row['max_rel_difference']:.2e}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "config": args.config,
                    "group": args.group,
                    "dtype": args.dtype,
                    "device": where,
                    "model": model,
                    **row,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
