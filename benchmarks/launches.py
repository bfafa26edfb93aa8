"""How many operators the trainer's fused step dispatches, by phase and by group size R (issue 63:
a fused step of the gpu tier's group left the H100 idle a third of the step, waiting on the host).
Each non-view ATen operator is roughly one kernel the host must launch on a GPU, so an operator
count that grows with R is a per-run loop on the host, and a step of many small operators is
bound by launches, not by the GPU's arithmetic. Counted on the CPU (no GPU needed), through the
trainer's own step (lengen.train.group.Fused, the DeepSpeed engine built as the trainer builds
it), at the tier's layers with a narrow width (the count does not depend on the width):

    python benchmarks/launches.py --config config/gpu.yaml --runs 1 4 8 16 --json OUT.json

Phases: `batch` (the step's micro-batch: group_batch, stacked and moved), `forward`
(FusedGPTNeoX.forward), `loss` (each run's loss: lengen.train.group.run_losses), `backward`,
`clip` (each run's own gradient clipping: FusedGPTNeoX.clip_run_grads_), `optimizer` (the
engine's step) and `other` (what the engine does around them). The optimizer is the one the
trainer builds on CUDA, torch's fused AdamW (torch runs it on the CPU too; the trainer's CPU
runs use the single-tensor loop). Per phase it prints the operators per step at each R, the
slope per added run (a least-squares fit over the R measured) and the host reads of a tensor's
value (`.item()` and kin), each a point where a GPU's queue drains. Two limits of a count on the
CPU: a read of a tensor that stays on the host (the group's stopped-runs mask) counts as a read,
though on a GPU it waits for nothing; and a multi-tensor (`_foreach_*`) operator counts once,
though a GPU runs it as one kernel per chunk of its tensors."""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from group_step import group_specs  # this folder's (python benchmarks/launches.py)
from torch.utils._python_dispatch import TorchDispatchMode

from lengen.config import plan
from lengen.config.config import load
from lengen.train import group, runtime
from lengen.train.group import Fused

PHASES = ("batch", "forward", "loss", "backward", "clip", "optimizer", "other")


# operators that read a tensor's value on the host: on a GPU each waits for every kernel before
# it, so the host stops launching and the GPU then idles until it starts again
SYNCS = {"_local_scalar_dense", "nonzero", "is_nonzero", "equal"}


class Count(TorchDispatchMode):
    """Counts each non-view operator, and each host read of a value, under the phase set."""

    def __init__(self):
        super().__init__()
        self.phase, self.ops, self.syncs, self.names = "other", Counter(), Counter(), Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if not func.is_view:
            self.ops[self.phase] += 1
            self.names[(self.phase, name)] += 1
        if name in SYNCS:
            self.syncs[self.phase] += 1
        return func(*args, **(kwargs or {}))


def phased(count: Count, name: str, fn):
    """`fn` with the counter's phase set to `name` while it runs."""

    def wrapped(*args, **kwargs):
        outer, count.phase = count.phase, name
        try:
            return fn(*args, **kwargs)
        finally:
            count.phase = outer

    return wrapped


@contextlib.contextmanager
def cuda_optimizer():
    """lengen.train.lifecycle.make_engine's AdamW as it builds it on CUDA (torch's fused one,
    which torch also runs on the CPU), not the CPU's single-tensor loop."""
    adamw = torch.optim.AdamW
    torch.optim.AdamW = lambda *args, **kwargs: adamw(*args, **(kwargs | {"fused": True}))
    try:
        yield
    finally:
        torch.optim.AdamW = adamw


def measure(cfg: dict, name: str, runs: int, steps: int, width: int) -> dict:
    """Operators per step by phase for the first fused group of `name` with R = runs."""
    cfg = json.loads(json.dumps(cfg))
    section = cfg[name.split("/")[0]]
    section["model"] = {**section.get("model", {}), "d_model": width, "n_head": 2}
    specs = group_specs(cfg, name, runs, "none")
    runtime.setup(specs[0].runtime)
    count = Count()
    with tempfile.TemporaryDirectory() as tmp:
        with cuda_optimizer():
            trainee = Fused(specs, [Path(tmp) / str(i) for i in range(len(specs))])
        engine, fused = trainee.engine, trainee.fused
        trainee.batches.get = phased(count, "batch", trainee.batches.get)
        fused.forward = phased(count, "forward", fused.forward)
        fused.clip_run_grads_ = phased(count, "clip", fused.clip_run_grads_)
        engine.backward = phased(count, "backward", engine.backward)
        engine.step = phased(count, "optimizer", engine.step)
        losses, group.run_losses = group.run_losses, phased(count, "loss", group.run_losses)
        try:
            first = specs[0].train.steps // 2  # past the curricula
            trainee.step(first)  # the optimizer's state is made at the first step: not counted
            with count:
                for i in range(1, steps + 1):
                    trainee.step(first + i)
        finally:
            group.run_losses = losses
            trainee.close()
    per_step = {p: count.ops[p] / steps for p in PHASES}
    top = Counter({k: n / steps for k, n in count.names.items()}).most_common(8)
    return {
        "group": name,
        "runs": len(specs),
        "layers": specs[0].model["n_layer"],
        "ops_per_step": per_step,
        "total": sum(per_step.values()),
        "syncs_per_step": {p: count.syncs[p] / steps for p in PHASES if count.syncs[p]},
        "top": [{"phase": p, "op": op, "per_step": n} for (p, op), n in top],
    }


def slopes(rows: list[dict]) -> dict[str, float]:
    """Per phase, the operators each added run costs (least squares over the R measured)."""
    r = np.array([row["runs"] for row in rows], dtype=float)
    out = {}
    for phase in (*PHASES, "total"):
        y = np.array(
            [row["total"] if phase == "total" else row["ops_per_step"][phase] for row in rows]
        )
        out[phase] = float(np.polyfit(r, y, 1)[0]) if len(set(r)) > 1 else float("nan")
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/gpu.yaml")
    parser.add_argument(
        "--groups", nargs="+", default=["parity_scratchpad/ppc", "sparse_parity/neox"]
    )
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--steps", type=int, default=2, help="steps counted")
    parser.add_argument("--width", type=int, default=32, help="d_model (the count ignores it)")
    parser.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="bf16",
        help="the step's precision (bf16: DeepSpeed's torch_autocast, the GPU tiers')",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load(args.config)
    cfg["runtime"] |= {"device": "cpu", "precision": args.precision}
    out = {"config": args.config, "precision": args.precision, "groups": []}
    for name in args.groups:
        rows = []
        for runs in args.runs:  # a variant with fewer runs than R: its whole variant, once
            if not rows or rows[-1]["runs"] < min(runs, len(plan.runs(cfg, *name.split("/")))):
                rows.append(measure(cfg, name, runs, args.steps, args.width))
        fit = slopes(rows)
        out["groups"].append({"group": name, "rows": rows, "per_added_run": fit})
        print(f"{name} ({rows[0]['layers']} layers): operators per step")
        print(
            f"{'phase':<10}"
            + "".join(f"{'R = ' + str(r['runs']):>10}" for r in rows)
            + f"{'per run':>10}"
        )
        for phase in (*PHASES, "total"):
            cells = [r["total"] if phase == "total" else r["ops_per_step"][phase] for r in rows]
            print(f"{phase:<10}" + "".join(f"{c:>10.0f}" for c in cells) + f"{fit[phase]:>10.1f}")
        print(
            "host reads of a value per step at R = "
            + str(rows[-1]["runs"])
            + ": "
            + (", ".join(f"{p} {n:.0f}" for p, n in rows[-1]["syncs_per_step"].items()) or "none")
        )
        print(
            "most dispatched at R = "
            + str(rows[-1]["runs"])
            + ": "
            + ", ".join(f"{t['op']} ({t['phase']}) {t['per_step']:.0f}" for t in rows[-1]["top"])
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
