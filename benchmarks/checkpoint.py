"""What a training checkpoint costs: the bytes and seconds of one DeepSpeed save_checkpoint of a
tier's model (weights and AdamW states, after one step), and, given that tier's measured seconds per
step, the fraction of training time its checkpoints take at the configured `checkpoint_every`.

    python benchmarks/checkpoint.py --config config/paper.yaml --device cpu \\
        --steps-from benchmarks/measured/2026-11-25-h100/step_time_paper.json

One save per experiment (its models differ only in embeddings and position tables) and per
language model (saved up to `--max-params`, above that estimated: 16 bytes per parameter),
written to `--dir` (default: a temporary folder there: measure the disk the runs will use), median
of `--repeats`. The overhead is save seconds / (checkpoint_every x seconds per step); a kind whose
model was too large to save here is estimated from the bytes and the write rate measured here.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from schedule import job_kinds  # this folder's
from step_time import write_lm_tokens

from lengen import tasks
from lengen.config.config import load
from lengen.tasks import parse_spec
from lengen.train import runtime
from lengen.train.train import Batches, build_model, make_engine, train_step


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def save_cost(spec_dict: dict, folder: Path, repeats: int) -> tuple[int, float]:
    """(bytes, median seconds) of one save_checkpoint of this spec's engine after one step."""
    spec = parse_spec(spec_dict)
    engine = make_engine(spec, build_model(spec))
    batches = Batches(tasks.get(spec.experiment), spec, engine, prefetch=False)
    train_step(engine, batches, 0)  # the AdamW states exist, as at any checkpoint
    times, size = [], 0
    for i in range(repeats):
        tag = f"step_{i}"
        t = time.perf_counter()
        engine.save_checkpoint(str(folder), tag=tag, client_state={"step": i})
        times.append(time.perf_counter() - t)
        size = _bytes(folder / tag)
        shutil.rmtree(folder / tag)
    batches.close()
    del engine, batches
    gc.collect()  # one engine at a time: each holds weights, gradients and AdamW moments
    return size, statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/paper.yaml")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dir", type=Path, default=Path("results"), help="where to write")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-params", type=float, default=5e8, help="larger: estimated")
    parser.add_argument("--steps-from", type=Path, help="a step_time.py --json of the tier")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    cfg = load(args.config)
    cfg["runtime"].update(device=args.device, precision="bf16" if args.device == "cuda" else "fp32")
    step_s = {}
    if args.steps_from:
        measured = json.loads(args.steps_from.read_text())
        step_s = {k["kind"]: k["s_per_step"] for k in measured["kinds"]}
    args.dir.mkdir(parents=True, exist_ok=True)
    rows, rate = [], None
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        kinds = job_kinds(cfg, write_lm_tokens(Path(tmp), 32_000, n=100_000))
        runtime.setup(parse_spec(kinds[0].spec).runtime)
        seen = set()
        for kind in kinds:
            group = (
                kind.name if kind.name.startswith("natural_language/") else kind.spec["experiment"]
            )
            if group in seen:
                continue
            seen.add(group)
            with torch.device("meta"):
                spec = parse_spec(kind.spec)
                params = sum(p.numel() for p in build_model(spec).parameters())
            row = {
                "kind": group,
                "params": params,
                "checkpoint_every": kind.spec["train"]["checkpoint_every"],
            }
            if params <= args.max_params:
                size, seconds = save_cost(kind.spec, Path(tmp), args.repeats)
                row.update(bytes=size, save_s=seconds, measured=True)
                rate = size / seconds if rate is None else min(rate, size / seconds)
            else:
                row.update(bytes=params * 16, save_s=None, measured=False)  # fp32 + 2 Adam moments
            rows.append(row)
        for row in rows:  # a model not saved here: its bytes at the slowest rate measured here
            if row["save_s"] is None and rate:
                row["save_s"] = row["bytes"] / rate
            mine = [
                s for k, s in step_s.items() if k == row["kind"] or k.startswith(row["kind"] + "/")
            ]
            per_step = row["s_per_step"] = statistics.median(mine) if mine else None
            if per_step and row["save_s"]:
                row["overhead"] = row["save_s"] / (row["checkpoint_every"] * per_step)
            how = "saved" if row["measured"] else "estimated"
            over = f"{row['overhead']:.2%} of training" if "overhead" in row else "-"
            print(
                f"{row['kind']:34s} {row['params'] / 1e6:8.1f} M  {row['bytes'] / 2**30:6.2f} GiB"
                f"  {row['save_s']:7.2f} s ({how})  every {row['checkpoint_every']:5d} steps: "
                f"{over}"
            )
    if args.json:
        args.json.write_text(json.dumps({"config": args.config, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
