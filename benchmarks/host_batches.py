"""How long the host takes to make one fused step's batch (issue 63, item 3: batches made on the
host in series with the GPU), per fused variant of a tier: lengen.train.group.group_batch for the
variant's first group, its runs' own seed streams, at steps past the curricula, on one CPU thread.

    python benchmarks/host_batches.py --config config/gpu.yaml --steps 10 --json OUT.json

The trainer makes step s + 1's batch in a worker thread while step s runs on the GPU
(lengen.train.lifecycle.HostBatches), so a batch shorter than the GPU's step costs nothing there
unless the worker holds the interpreter the main thread needs to launch kernels; this says which
side of that line each variant is on. It needs no GPU: the batch is numpy and torch on the CPU."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from padding import fused_variants  # this folder's (python benchmarks/host_batches.py)

from lengen.config import plan
from lengen.config.config import load
from lengen.tasks import parse_spec
from lengen.train.group import group_batch


def measure(cfg: dict, steps: int, start: int) -> list[dict]:
    """One row per fused variant: its first group's runs and the median ms per group batch."""
    rows = []
    for experiment, variant, task in fused_variants(cfg):
        specs = [parse_spec(r.spec(cfg)) for r in plan.groups(cfg, experiment, variant)[0]]
        buckets = specs[0].train.length_buckets
        times = []
        for step in range(start, start + steps):
            t = time.perf_counter()
            group_batch(task, specs, step, buckets, None)
            times.append(time.perf_counter() - t)
        rows.append(
            {
                "experiment": experiment,
                "variant": variant,
                "runs": len(specs),
                "ms_per_batch": 1e3 * statistics.median(times),
                "steps": steps,
                "first_step": start,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/gpu.yaml")
    parser.add_argument("--steps", type=int, default=10, help="batches timed per variant")
    parser.add_argument("--start", type=int, default=5000, help="the first step timed")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load(args.config)
    rows = measure(cfg, args.steps, args.start)
    if not rows:
        raise SystemExit(f"{args.config}: no fused variant (runtime.fuse_runs <= 1)")
    print(f"{args.config}: one fused group's batch, one CPU thread, median of {args.steps}")
    for r in rows:
        print(
            f"{r['experiment'] + '/' + r['variant']:<34}R = {r['runs']:<3}"
            f"{r['ms_per_batch']:>7.1f} ms"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
