"""What a fused group feeds beyond its runs' own tokens, by how the tier groups its runs (issue 63,
item 2: padding to the group's longest sequence). Counted on the CPU from the batches the trainer
draws (each run's own seed stream, lengen.core.batch.step_rng, and its task's `train_batch`), so
no GPU is needed: a GPU step of the paper's model is bound by the tokens it feeds, real or not
(docs/performance.md), and these counts say how many of them are padding.

    python benchmarks/padding.py --config config/gpu.yaml --steps 40 --json OUT.json

Per fused variant it compares two groupings of the same runs, each group at most
`runtime.fuse_runs` runs:
- `planned`: lengen.config.plan.groups, consecutive runs of the variant (a group may mix jumps or
  depths, whose scratchpads differ in length);
- `by_setting`: the runs of one jump or depth together, split into equal groups (a setting with
  more runs than fuse_runs gives ceil(runs / fuse_runs) groups).
At `--steps` steps spread evenly over training (curricula included) it counts each group's
tokens fed (R x B x the group's longest bucketed batch), the runs' own tokens (each run's batch
as it is drawn alone: B x its own longest sequence) and prints, per variant and grouping, the
group jobs, the padding's share of the tokens fed and the fed tokens over the runs' own."""

from __future__ import annotations

import argparse
import json
import math
import statistics

import numpy as np

from lengen import tasks
from lengen.config import plan
from lengen.config.config import load
from lengen.tasks import parse_spec
from lengen.train.group import group_batch


def fused_variants(cfg: dict):
    """(experiment, variant, task) of each variant the tier trains in fused groups
    (lengen.config.plan.fused), in the config's order."""
    for experiment in plan.experiments(cfg):
        for variant in cfg[experiment]["variants"]:
            if plan.fused(cfg, experiment, variant):
                yield experiment, variant, tasks.get(experiment)


def by_setting(runs: list[plan.Run], size: int) -> list[list[plan.Run]]:
    """The runs of each setting (jump, depth) in equal groups of at most `size`."""
    out = []
    for value in sorted({r.value for r in runs}):
        same = [r for r in runs if r.value == value]
        n = math.ceil(len(same) / size)
        out += [list(part) for part in np.array_split(np.array(same, dtype=object), n)]
    return out


def group_tokens(task, specs, step: int) -> tuple[int, int]:
    """(tokens fed, the runs' own tokens) of one fused step of these runs: the trainer's own
    batch (lengen.train.group.group_batch), so what is counted is what it pads."""
    inputs, own = group_batch(task, specs, step, specs[0].train.length_buckets, None)
    return inputs["input_ids"].numel(), sum(own)


def measure(cfg: dict, steps: int) -> list[dict]:
    """One row per (fused variant, grouping)."""
    size = plan.fuse_runs(cfg)
    rows = []
    for experiment, variant, task in fused_variants(cfg):
        runs = plan.runs(cfg, experiment, variant)
        total = parse_spec(runs[0].spec(cfg)).train.steps
        at = np.linspace(0, total - 1, steps).round().astype(int).tolist()
        for name, groups in (
            ("planned", plan.groups(cfg, experiment, variant)),
            ("by_setting", by_setting(runs, size)),
        ):
            fed = own = 0
            widths = []
            for group in groups:
                specs = [parse_spec(r.spec(cfg)) for r in group]
                for step in at:
                    f, o = group_tokens(task, specs, step)
                    fed, own = fed + f, own + o
                widths.append(len(group))
            rows.append(
                {
                    "experiment": experiment,
                    "variant": variant,
                    "grouping": name,
                    "runs": len(runs),
                    "group_jobs": len(groups),
                    "runs_per_group": f"{min(widths)}-{max(widths)}",
                    "padding_share": 1 - own / fed,
                    "fed_over_own": fed / own,
                    "steps_sampled": len(at),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/gpu.yaml")
    parser.add_argument("--steps", type=int, default=40, help="steps sampled over training")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    cfg = load(args.config)
    rows = measure(cfg, args.steps)
    print(f"{args.config}: fuse_runs {plan.fuse_runs(cfg)}, {args.steps} steps sampled per group")
    print(f"{'experiment/variant':<34}grouping    jobs  R      padding  fed/own")
    for r in rows:
        print(
            f"{r['experiment'] + '/' + r['variant']:<34}{r['grouping']:<12}{r['group_jobs']:>4}  "
            f"{r['runs_per_group']:<6}{r['padding_share']:>8.1%}  {r['fed_over_own']:>7.3f}"
        )
    for name in ("planned", "by_setting"):
        mine = [r for r in rows if r["grouping"] == name]
        if not mine:
            raise SystemExit(f"{args.config}: no fused variant (runtime.fuse_runs <= 1)")
        print(
            f"all fused variants, {name}: {sum(r['group_jobs'] for r in mine)} group jobs, "
            f"median fed/own {statistics.median(r['fed_over_own'] for r in mine):.3f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "steps": args.steps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
