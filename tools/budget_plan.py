"""The default tier at five runs per compared arm, planned from committed step rates: what each
sentence's runs cost on 2 cores, in the order they decide most per hour, and where 12 h ends.

    python tools/budget_plan.py                 # print the plan (markdown)
    python tools/budget_plan.py --out FILE.md   # write it
    python tools/budget_plan.py --runs-from reference/default   # RUNS from a reference's tables

Every number comes from committed files: each job kind's seconds per step measured alone on the
2-core machine (BENCH, benchmarks/step_time.py), times how much slower two jobs side by side
stepped in a reference run (SIDE_BY_SIDE's last line, tools/step_rates.py); the steps each run of
the reference it was planned from took (RUNS: reference/default's tables' `steps_run` at the
three-run reference of commit c21ffa7, early stopping included; kept because that reference has
since been replaced by the five-run one this plan made); and that run's wall time
(benchmarks/measured/times.yaml, `default_tier_run_3runs`) over its training job-seconds so
estimated (evaluation, start-up and the language branch folded into one factor). A model the
reference never trained (variable assignment at depths 3 and 4, the ablations of Fig. 3) takes a
trained one's rate and steps, named in its row. The plan (ARMS): five runs per compared arm,
sparse parity's log-length arm at every K_train, variable assignment at depths 2-5; its order is
by what a run decides: arms whose runs learn and whose sentence no other arm decides first, arms
whose verdict no run count changes last (each says why).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
BENCH = "benchmarks/measured/2026-11-25-cpu/step_time_default_3runs.json"
SIDE_BY_SIDE = "benchmarks/measured/2026-11-27-cpu-refrun/step_rates.txt"
TIMES = "benchmarks/measured/times.yaml"
RUNS = "benchmarks/measured/2026-12-06-cpu/planned_from_runs.csv"  # the runs the plan began from
PLANNED_FROM = "default_tier_run_3runs"  # TIMES key: the wall time of the run RUNS lists
BUDGET_H = 12.0  # the default tier from scratch on 2 cores (issue 64's bound)
PARALLEL = 2  # training jobs side by side on 2 cores, one thread each


@dataclass(frozen=True)
class Arm:
    """Runs of one model the plan trains: its experiment, variant and setting (K_train, jump,
    depth, training length), the runs today's tier trains and the planned ones, the sentences
    they decide, and, where its runs decide nothing at any count, why."""

    experiment: str
    variant: str
    value: int
    today: int
    planned: int
    decides: str
    like: tuple[str, int] | None = None  # a trained (variant, value) whose rate and steps it takes
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.experiment} {self.variant} {SETTING[self.experiment]}{self.value}"


# each experiment's setting as the job names write it, and its column in the tables
SETTING = {
    "sparse_parity": "K",
    "parity_scratchpad": "k",
    "variable_assignment": "d",
    "majority": "n",
}
COLUMN = {
    "sparse_parity": "k_train",
    "parity_scratchpad": "jump",
    "variable_assignment": "depth",
    "majority": "train_max_len",
}
NO_RECIPE = (
    "no CPU recipe learns it in distribution (probes: <= 0.06 after 24,000 steps); PPC's "
    "18,000 steps assumed"
)

ARMS = [  # in the order they decide most per hour (the module docstring)
    *[Arm("parity_scratchpad", "ppc", j, 3, 5, "PS-1, PS-2") for j in (1, 2, 3, 4)],
    *[
        Arm("sparse_parity", "loglen", k, 1, 5, "SP-1, SP-2 [loglen] (a DEPARTURE)")
        for k in (4, 6, 8)
    ],
    *[Arm("sparse_parity", "neox", k, 3, 5, "SP-1, SP-2 [neox]") for k in (4, 6, 8)],
    *[Arm("sparse_parity", "neox", k, 3, 5, "SP-2, SP-3 [neox]") for k in (10, 12)],
    *[
        Arm("sparse_parity", "loglen", k, 1, 5, "SP-2, SP-3 [loglen] (a DEPARTURE)")
        for k in (10, 12)
    ],
    *[
        Arm("majority", v, 21, 3, 3, "MJ-1 (beyond the paper)")
        for v in ("absolute", "nope", "alibi", "rope_pose")
    ],
    *[
        Arm(
            "variable_assignment",
            "ppc",
            d,
            3 if d in (2, 5) else 0,
            5,
            "VA-1 (a DEPARTURE: log-length scaling)",
            None if d in (2, 5) else ("ppc", 5),
        )
        for d in (2, 5, 3, 4)
    ],  # the paper's extremes first
    *[
        Arm(
            "parity_scratchpad",
            v,
            1,
            3,
            5,
            "PS-3",
            note="gated: run mean below 0.9 in "
            "distribution after 24,000 steps (0.35 / 0.81); more runs do not lift a mean when 1-2 "
            "runs of 3 learn",
        )
        for v in ("absolute", "rope_pose")
    ],
    *[
        Arm("variable_assignment", v, 2, 0, 5, "VA-2, VA-3, VA-4", ("ppc", 2), NO_RECIPE)
        for v in ("no_coupling", "no_scratchpad", "rope_pose")
    ],
]


def bench_kind(experiment: str, variant: str, value: int) -> str:
    """The job kind as BENCH names it."""
    if experiment == "sparse_parity":
        return f"{experiment}/{variant}"
    return f"{experiment}/{variant}/{SETTING[experiment].lower()}{value}"


def side_by_side(root: Path = ROOT) -> float:
    """How much slower than alone two jobs side by side stepped (SIDE_BY_SIDE's 'all: ... Nx')."""
    found = re.search(r"^all: .* ([\d.]+)x$", (root / SIDE_BY_SIDE).read_text(), re.M)
    if not found:
        raise SystemExit(f"{SIDE_BY_SIDE}: no 'all: ... N.NNx' line")
    return float(found[1])


def step_rates(root: Path = ROOT) -> dict[str, float]:
    """Each BENCH kind's seconds per step with two jobs side by side."""
    kinds = json.loads((root / BENCH).read_text())["kinds"]
    ratio = side_by_side(root)
    return {k["kind"]: k["s_per_step"] * ratio for k in kinds}


def reference_runs(tables: Path) -> pd.DataFrame:
    """Every run of a reference's tables (a reference/<tier> directory): experiment, variant,
    value, seed, steps run (what RUNS holds)."""
    frames = []
    for experiment, column in COLUMN.items():
        d = pd.read_csv(tables / f"{experiment}_accuracy.csv")
        runs = d.groupby(["variant", column, "seed"]).steps_run.first().reset_index()
        frames.append(runs.rename(columns={column: "value"}).assign(experiment=experiment))
    runs = pd.concat(frames, ignore_index=True)
    return runs[["experiment", "variant", "value", "seed", "steps_run"]]


def plan(arms: list[Arm] = ARMS, root: Path = ROOT) -> tuple[pd.DataFrame, float]:
    """One row per arm: its runs, steps, minutes per run and job-hours, cumulative wall hours on
    2 cores (job-hours / PARALLEL x the reference run's factor); and that factor."""
    rates, runs = step_rates(root), pd.read_csv(root / RUNS)
    wall = yaml.safe_load((root / TIMES).read_text())[PLANNED_FROM]["seconds"]
    job_seconds = sum(
        r.steps_run * rates[bench_kind(r.experiment, r.variant, r.value)] for r in runs.itertuples()
    )
    factor = wall / (job_seconds / PARALLEL)  # evaluation, start-up, the language branch
    steps = runs.groupby(["experiment", "variant", "value"]).steps_run.median()
    rows, total = [], 0.0
    for arm in arms:
        variant, value = arm.like or (arm.variant, arm.value)
        kind = bench_kind(arm.experiment, variant, value)
        n = steps[arm.experiment, variant, value]
        minutes = n * rates[kind] / 60
        hours = arm.planned * minutes / 60
        total += hours / PARALLEL * factor
        like = f"as {variant} {SETTING[arm.experiment]}{value}" if arm.like else ""
        rows.append(
            {
                "arm": arm.name,
                "decides": arm.decides,
                "runs (today -> planned)": f"{arm.today} -> {arm.planned}",
                "steps": f"{n:,.0f}",
                "min per run": f"{minutes:.0f}",
                "job-h": f"{hours:.1f}",
                "wall h, cumulative": total,
                "note": "; ".join(x for x in (like, arm.note) if x),
            }
        )
    return pd.DataFrame(rows), factor


def markdown(arms: list[Arm] = ARMS) -> str:
    """The plan as a markdown page: the table, the line where BUDGET_H ends, what lies beyond."""
    table, factor = plan(arms)
    fits = table["wall h, cumulative"] <= BUDGET_H
    shown = table.assign(
        **{
            "wall h, cumulative": table["wall h, cumulative"].map("{:.1f}".format),
            "fits 12 h": fits.map({True: "yes", False: "no"}),
        }
    )
    head = "| " + " | ".join(shown.columns) + " |\n" + "|---" * len(shown.columns) + "|"
    body = "\n".join("| " + " | ".join(str(v) for v in r) + " |" for r in shown.itertuples(False))
    beyond = table[~fits]
    total = table["wall h, cumulative"].iloc[-1]
    return "\n".join(
        [
            "# The five-run default tier, planned from committed step rates",
            "",
            f"Made by `python tools/budget_plan.py` from `{BENCH}` (each kind's seconds per step, "
            f"alone) x {side_by_side():.2f} (two jobs side by side, `{SIDE_BY_SIDE}`) and "
            f"the steps per run of the three-run reference it began from (`{RUNS}`). Wall "
            f"hours are job-hours / {PARALLEL} x "
            f"{factor:.2f}, the reference run's wall time over its training job-seconds so "
            "estimated (evaluation, start-up and the language branch folded in). Arms in the "
            "order they decide most per hour.",
            "",
            head,
            body,
            "",
            f"Everything: {total:.1f} h on 2 cores. Within {BUDGET_H:g} h: the rows marked yes "
            f"({fits.sum()} arms). The rest would cost {total - BUDGET_H:.1f} h more "
            f"({len(beyond)} arms: {', '.join(beyond.arm) or 'none'}).",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python tools/budget_plan.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, help="write the plan here (default: print it)")
    parser.add_argument(
        "--runs-from", type=Path, metavar="DIR", help=f"write {RUNS} from DIR's tables, then plan"
    )
    args = parser.parse_args(argv)
    if args.runs_from:
        reference_runs(args.runs_from).to_csv(ROOT / RUNS, index=False)
    text = markdown()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
