"""Seconds per training step of each kind of training job in a tier, measured through the
trainer's own step (lengen.train.train.train_step: the DeepSpeed engine at the tier's precision
and micro-batch, the task's real batches), and from them the tier's training wall time on one
device and on one node of several.

    python benchmarks/step_time.py --config config/paper.yaml --device cuda --json F.json
    python benchmarks/step_time.py --config config/smoke.yaml --steps 3     # CPU, seconds

One job kind per (experiment, variant, setting), its spec built by the same functions the
workflow rules call: the scratchpad tasks' settings (jump, depth) change the sequence lengths, so
each is timed; sparse parity's K_train does not (one kind per variant, at the largest). Each kind
is timed on the batches of the middle of its training (steps from steps / 2 on: past the
curricula that start with shorter jumps or fewer flagged tokens). Per kind it prints seconds per
optimizer step (median after `--warmup` steps), tokens per second, achieved TFLOP/s (the
model's 6N + attention FLOPs per token) and its fraction of the matmul ceiling measured in the
same run (bf16 on CUDA: the MFU; fp32 on CPU), and the peak device memory (CUDA only).

The wall-time estimate multiplies each kind's time per step by the steps and the number of jobs
of that kind in the tier (the counts the workflow's DAG has; tests/test_workflow.py checks them
against a dry run): an upper bound where early stopping ends runs sooner, evaluation not counted.
On one device the jobs run one after another. On a node of `--node-gpus` devices, each
single-device job takes a free device (longest first), and a job that asks for several devices
(natural_language.gpus_per_job) is assumed to scale linearly from the one-device time measured
here (its all-reduce is not measured).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from schedule import Kind, job_kinds, job_table, training_hours  # this folder's
from throughput import matmul_ceiling, sync

from lengen import tasks
from lengen.config.config import load
from lengen.tasks import parse_spec
from lengen.train import runtime
from lengen.train.train import Batches, build_model, make_engine, train_step

LM_VOCAB = 32_000  # Llama-2's tokenizer (paper tier) and mistral v1's (gpu tier) alike


def write_lm_tokens(folder: Path, vocab: int, n: int = 2_000_000, seed: int = 0) -> Path:
    """A token file of n random tokens and its meta.json, as the tokens rule writes them."""
    from lengen.data.tokens import DTYPE

    path = folder / "train.bin"
    np.random.default_rng(seed).integers(0, vocab, n).astype(DTYPE).tofile(path)
    (folder / "meta.json").write_text(json.dumps({"vocab_size": vocab, "tokens": {"train": n}}))
    return path


@dataclass
class Measured:
    """One job kind's measured step."""

    kind: str
    params: int
    batch: int  # sequences per optimizer step
    accum: int  # micro-batches per step (this process)
    seq_len: float  # mean tokens per sequence
    s_per_step: float  # median over the timed steps
    tokens_per_s: float
    tflops: float  # achieved model TFLOP/s
    peak_gib: float | None  # peak device memory (CUDA)


def measure(
    kind: Kind, device: str, steps: int, warmup: int, compile_model: bool, prefetch=None
) -> Measured:
    """Median seconds per optimizer step of `kind`, through the trainer's train_step (its
    batches made ahead in a worker thread with `prefetch`; None: as the trainer, on CUDA)."""
    spec = parse_spec(kind.spec)
    model = build_model(spec)
    engine = make_engine(spec, model)
    if compile_model:
        engine.compile()
    batches = Batches(tasks.get(spec.experiment), spec, engine, prefetch)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, fed, seen = [], [], set()
    first = spec.train.steps // 2  # the step index only picks the batch (curricula)
    for i in range(warmup + steps):
        sync(device)
        t = time.perf_counter()
        _, tokens = train_step(engine, batches, first + i)
        sync(device)
        # compiled, a batch of a new shape (tokens fed: batch x length) recompiles: not timed
        if i >= warmup and (not compile_model or tokens in seen):
            times.append(time.perf_counter() - t)
            fed.append(tokens)
        seen.add(tokens)
    batches.close()
    if not times:
        raise ValueError(f"{kind.name}: no step timed (every batch shape new): raise --steps")
    s_per_step = statistics.median(times)
    tokens_per_step = sum(fed) / len(fed)
    seq_len = tokens_per_step / spec.train.batch_size
    flops = tokens_per_step * model.flops_per_token(round(seq_len)) / s_per_step
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
    result = Measured(
        kind.name,
        model.num_params(),
        spec.train.batch_size,
        engine.gradient_accumulation_steps(),
        seq_len,
        s_per_step,
        tokens_per_step / s_per_step,
        flops / 1e12,
        peak,
    )
    del engine, model
    gc.collect()  # the next kind's peak memory starts from this one's freed
    if device == "cuda":
        torch.cuda.empty_cache()
    return result


def wall_time(kinds: list[Kind], measured: dict[str, Measured], node_gpus: int) -> dict:
    """Hours of training for the tier on one device and on one node (schedule.node_hours)."""
    step = {name: m.s_per_step for name, m in measured.items()}
    return training_hours(job_table(kinds), step, node_gpus)


def main(argv: list[str] | None = None) -> None:
    """Measure every job kind of the tier, print a table and the wall-time estimate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default=None,
        help="default: the config's runtime.device",
    )
    parser.add_argument("--steps", type=int, default=10, help="timed optimizer steps per kind")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument(
        "--lm-steps",
        type=int,
        help="timed steps of the language models "
        "(default --steps; the paper's 1.3B step takes seconds)",
    )
    parser.add_argument("--only", nargs="*", help="measure these kinds only (prefix match)")
    parser.add_argument("--node-gpus", type=int, default=8)
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument(
        "--prefetch",
        choices=["on", "off"],
        help="make the next step's batches "
        "in a worker thread (default: as the trainer, on CUDA only)",
    )
    parser.add_argument(
        "--loss-chunk",
        type=int,
        help="natural_language.loss_chunk_tokens (default: the config's; 0: the loss in one piece)",
    )
    parser.add_argument("--json", type=Path, help="write the measurements and estimate here")
    args = parser.parse_args(argv)
    cfg = load(args.config)
    device = args.device or cfg["runtime"]["device"]
    cfg["runtime"]["device"] = device
    if args.loss_chunk is not None and "natural_language" in cfg:
        cfg["natural_language"]["loss_chunk_tokens"] = args.loss_chunk
    prefetch = None if args.prefetch is None else args.prefetch == "on"
    tok = cfg.get("natural_language", {}).get("tokenizer", {})
    with tempfile.TemporaryDirectory() as tmp:
        lm_tokens = write_lm_tokens(Path(tmp), tok.get("vocab_size") or LM_VOCAB)
        kinds = job_kinds(cfg, lm_tokens)
        runtime.setup(parse_spec(kinds[0].spec).runtime)  # threads, accelerator: before DeepSpeed
        chosen = [k for k in kinds if not args.only or k.name.startswith(tuple(args.only))]
        ceiling = matmul_ceiling(device) / 1e3  # TFLOP/s
        measured = {}
        for kind in chosen:
            lm = kind.name.startswith("natural_language/") and args.lm_steps
            steps, warmup = (args.lm_steps, 1) if lm else (args.steps, args.warmup)
            measured[kind.name] = measure(kind, device, steps, warmup, args.compile, prefetch)
            print(_row(measured[kind.name], ceiling), flush=True)
            if args.json:  # after each kind: a run stopped at a time limit keeps what it measured
                _write(args, where_of(device), ceiling, measured, kinds, None)
        ceiling = max(ceiling, matmul_ceiling(device) / 1e3)  # before and after: the best
    where = where_of(device)
    print(
        f"device {where}; {'bf16' if device == 'cuda' else 'fp32'} matmul ceiling "
        f"{ceiling:.1f} TFLOP/s (MFU column: achieved / ceiling)"
    )
    estimate = None
    if len(measured) == len(kinds):
        estimate = wall_time(kinds, measured, args.node_gpus)
        print(
            f"tier {cfg.get('tier', args.config)}: {estimate['jobs']} training jobs, "
            f"{estimate['one_device_h']:.1f} h on one device, {estimate['node_h']:.1f} h on "
            f"a node of {args.node_gpus} (steps as configured: an upper bound)"
        )
    if args.json:
        _write(args, where, ceiling, measured, kinds, estimate)


def where_of(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else f"{torch.get_num_threads()} thr"


def _write(args, where: str, ceiling: float, measured: dict, kinds: list[Kind], estimate) -> None:
    args.json.write_text(
        json.dumps(
            {
                "config": args.config,
                "device": where,
                "ceiling_tflops": ceiling,
                "compile": args.compile,
                "prefetch": args.prefetch,
                "loss_chunk": args.loss_chunk,
                "kinds": [asdict(m) for m in measured.values()],
                "jobs": job_table(kinds),
                "estimate": estimate,
            },
            indent=2,
        )
    )


def _row(m: Measured, ceiling: float) -> str:
    peak = f"{m.peak_gib:6.1f} GiB" if m.peak_gib is not None else "     -    "
    return (
        f"{m.kind:40s} {m.params / 1e6:8.1f} M  batch {m.batch:5d} x {m.seq_len:6.1f}  "
        f"accum {m.accum:3d}  {m.s_per_step * 1e3:9.1f} ms/step  {m.tokens_per_s:10.0f} tok/s"
        f"  {m.tflops:7.2f} TFLOP/s  MFU {m.tflops / ceiling:6.1%}  peak {peak}"
    )


if __name__ == "__main__":
    main()
