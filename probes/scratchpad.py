"""Scratchpad-task probes (issue: make Figs. 2, 8 and 3a-d reproduce on a 2-core CPU).

A probe is one model of the default tier's parity-with-scratchpad or variable-assignment section
(experiment, variant, jump / depth) with a few section keys overridden (probes listed in
`probes/scratchpad.yaml`), trained by the project's own trainer and scored by the project's own
evaluator (`lengen.analysis.evaluate.generation_accuracy`: greedy generation, exact match of every
scratchpad token and, for PPC, every predicted position ID) on a fixed probe grid of lengths
(128 examples each, test seed 0). Each finished probe appends one row to
`probes/scratchpad_probes.csv` (committed), failures included.

    python probes/scratchpad.py run NAME [NAME ...]   # train + score, append rows

A probe with `values` (jumps / depths) and `runs` instead of one `value` is a fused group
(lengen.train.group): its len(values) x runs models train as one, each scored and appended as
its own row, `NAME/<value>/seed<run>` (the GPU's first paper-scale grid: GPU_PS_ppc_fused).
    python probes/scratchpad.py list                 # names, and which have a row
    python probes/scratchpad.py figure               # accuracy vs length per probe
    python probes/scratchpad.py import NAME TABLE VARIANT VALUE [TIER_FILE]  # a tier's runs

`import` records the runs of one model of a tier's committed tidy table (a reference's
`<experiment>_accuracy.csv`, scored by the tier's evaluator on its own test sets: more examples
per length than a probe's) as rows `NAME/<value>/seed<seed>`, at the probe lengths the table has,
judged against the training range of TIER_FILE (default config/config.yaml) as of the runs'
commit: the evidence of runs whose reference a later one replaces.

Run two at a time, one thread each (platform notes), in the background:

    OMP_NUM_THREADS=1 nohup python probes/scratchpad.py run NAME > results/probes/NAME.log 2>&1 &
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import torch
from sparse_parity import ROOT, append_row, load_probe, probe_cli, scored_model

from lengen import tasks
from lengen.analysis.evaluate import generation_accuracy, scratchpad_testset
from lengen.core import provenance, tracking
from lengen.model.fused import FusedGPTNeoX
from lengen.tasks import parse_spec
from lengen.train.group import train_group
from lengen.train.train import train

PROBES = ROOT / "probes" / "scratchpad.yaml"
TABLE = ROOT / "probes" / "scratchpad_probes.csv"
LENGTHS = {  # the paper's length: 2l for parity (train 10-40), l for variable assignment (20-60)
    "parity_scratchpad": (20, 40, 60, 80, 100, 150, 200),
    "variable_assignment": (40, 60, 90, 120, 180),
}
N_EXAMPLES = 128
TEST_SEED = 0


def probe_config(name: str) -> tuple[dict, dict]:
    """(validated config with the probe's overrides, the probe's entry) for a probe name."""
    return load_probe(
        PROBES, name, "scratchpad", lambda e: e["experiment"], lambda e: e.get("overrides", {})
    )


def score(model, spec: dict) -> dict:
    """Exact match per probe length, keyed 'acc_L{length}' (for a fused group of runs that share
    the spec's test set: each length's R accuracies, decoded in one pass)."""
    spec = parse_spec(spec)
    eval_cfg = {"lengths": list(LENGTHS[spec.experiment]), "n_examples": N_EXAMPLES}
    testset = scratchpad_testset(spec, eval_cfg, TEST_SEED)
    scheme = spec.task.scheme
    return {
        f"acc_L{n}": generation_accuracy(model, b, scheme, N_EXAMPLES) for n, b in testset.items()
    }


def verdict(row: dict, experiment: str, train_max: int) -> str:
    """In distribution (worst probe length <= the longest training length) >= 0.9, and the
    longest length reached at >= 0.9 with every shorter one."""
    lengths = LENGTHS[experiment]
    inside = min(row[f"acc_L{n}"] for n in lengths if n <= train_max)
    if inside < 0.9:
        return f"not learned in distribution (worst {inside:.2f} at lengths <= {train_max})"
    reach = 0
    for n in lengths:
        if row[f"acc_L{n}"] < 0.9:
            break
        reach = n
    return f">= 0.9 up to {reach} ({reach / train_max:.1f}x the longest training length)"


def _row(
    name: str,
    entry: dict,
    cfg: dict,
    spec: dict,
    value: int,
    path: Path,
    wall: float,
    scores: dict | None = None,
) -> dict:
    """A trained probe model's row (`value`: its jump or depth): its steps, stop, wall time,
    parameters, scores (given, or scored here), verdict."""
    experiment = spec["experiment"]
    saved, model = scored_model(path)
    row = {
        "probe": name,
        "experiment": experiment,
        "variant": spec["variant"],
        "value": value,
        "note": entry.get("note", ""),
        "overrides": json.dumps(entry.get("overrides", {}), sort_keys=True),
        "steps_run": saved.get("steps_run", spec["train"]["steps"]),
        "stop_reason": saved.get("stop_reason", "steps"),
        "train_wall_s": round(wall, 1),
        "params": model.num_params(),
        **(scores if scores is not None else score(model, spec)),
    }
    row["verdict"] = verdict(row, experiment, cfg[experiment]["train_max_len"])
    row.update(provenance.record(spec, spec["seed"]))
    return row


def run_group(name: str, cfg: dict, entry: dict, table: Path = TABLE) -> list[dict]:
    """Train a fused group probe (every value x run as one model, lengen.train.group) and score
    each member; one row each, `NAME/<value>/seed<run>`, the group's wall time on every row."""
    experiment, variant = entry["experiment"], entry["variant"]
    members = [(v, r) for v in entry["values"] for r in range(entry["runs"])]
    specs, outs, names = [], [], []
    for value, run_ in members:
        spec = tasks.generation_spec(cfg, experiment, variant, value, run_)
        spec["run_name"] = f"probe/{name}/{value}/seed{run_}"
        specs.append(spec)
        outs.append(Path(cfg["results_dir"]) / f"{value}" / f"seed{run_}")
        names.append(f"{name}/{value}/seed{run_}")
    tracking.prepare_store(specs[0]["tracking"]["uri"], [specs[0]["tracking"]["experiment"]])
    t0 = time.perf_counter()
    # budget_s: seconds of training a lent GPU allows; the runs end where it is spent
    # (steps_run, stop_reason "budget" in their rows)
    train_group([parse_spec(s) for s in specs], outs, budget_s=entry.get("budget_s"))
    wall = time.perf_counter() - t0
    scores = group_scores(specs, members, outs)
    rows = []
    for member, spec, (value, _), out, mine in zip(
        names, specs, members, outs, scores, strict=True
    ):
        row = _row(member, entry, cfg, spec, value, out / "model.pt", wall, mine)
        append_row(table, row)
        print(json.dumps({k: row[k] for k in ("probe", "steps_run", "train_wall_s", "verdict")}))
        rows.append(row)
    return rows


def group_scores(specs: list[dict], members: list[tuple], outs: list[Path]) -> list[dict]:
    """Each member's scores, the members of one value (one test set) decoded as one fused
    model (the fused tier's evaluation: lengen.analysis.evaluate.evaluate_scratchpad_group)."""
    by_value: dict[int, list[int]] = {}
    for i, (value, _) in enumerate(members):
        by_value.setdefault(value, []).append(i)
    scores: list[dict] = [{}] * len(members)
    for idx in by_value.values():
        fused = FusedGPTNeoX([scored_model(outs[i] / "model.pt")[1] for i in idx]).eval()
        together = score(fused, specs[idx[0]])
        for r, i in enumerate(idx):
            scores[i] = {key: float(acc[r]) for key, acc in together.items()}
    return scores


def run(name: str, rescore: bool = False) -> dict | list[dict]:
    """Train and score one probe (or score its trained model again, keeping the recorded wall
    time); write its row to the probe table. A fused group probe: run_group."""
    torch.set_num_threads(1)
    cfg, entry = probe_config(name)
    if "values" in entry:
        if rescore:
            raise SystemExit(f"{name}: a fused group probe is scored where it trains; run it")
        return run_group(name, cfg, entry)
    experiment, variant, value = entry["experiment"], entry["variant"], entry["value"]
    spec = tasks.generation_spec(cfg, experiment, variant, value, entry.get("run", 0))
    spec["run_name"] = f"probe/{name}"
    out = Path(cfg["results_dir"]) / "model"
    if rescore:
        wall = float(pd.read_csv(TABLE).set_index("probe").loc[name, "train_wall_s"])
    else:
        tracking.prepare_store(spec["tracking"]["uri"], [spec["tracking"]["experiment"]])
        t0 = time.perf_counter()
        train(spec, out)
        wall = time.perf_counter() - t0
    row = _row(name, entry, cfg, spec, value, out / "model.pt", wall)
    append_row(TABLE, row)
    print(json.dumps({k: row[k] for k in ("probe", "steps_run", "train_wall_s", "verdict")}))
    return row


def import_runs(
    name: str, table: Path, variant: str, value: int, tier_file: str = "config/config.yaml"
) -> list[dict]:
    """Record each run of `variant` at jump / depth `value` in a tier's tidy table as a probe
    row (see the module's doc), judged against the longest training length of the tier file as
    of the commit that trained the runs (config.read_tier_at); returns the rows."""
    from lengen.config.config import read_tier_at

    d = pd.read_csv(table)
    experiment = d.experiment.iloc[0]
    key = tasks.get(experiment).SETTING.key
    d = d[(d.variant == variant) & (d[key] == value)]
    if d.empty:
        raise SystemExit(f"{table}: no run of {variant} at {key} {value}")
    trained_by = d.git_commit.iloc[0].removesuffix("-dirty")
    commit = trained_by[:7]
    cfg = read_tier_at(tier_file, trained_by, ROOT)
    train_max = tasks.variant_section(cfg[experiment], variant)["train_max_len"]
    where = table.resolve()
    where = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
    rows = []
    for seed, runs in d.groupby("seed"):
        at = runs.set_index("length").accuracy
        n = int(runs.n.iloc[0])
        row = {
            "probe": f"{name}/{value}/seed{seed}",
            "experiment": experiment,
            "variant": variant,
            "value": value,
            "note": f"run {runs.run.iloc[0]} of the tier at {commit} "
            f"({where}), {n} examples "
            "per length",
            "overrides": "{}",
            "steps_run": int(runs.steps_run.iloc[0]),
            "stop_reason": runs.stop_reason.iloc[0],
            **{f"acc_L{k}": float(at[k]) for k in LENGTHS[experiment] if k in at.index},
        }
        row["verdict"] = verdict(row, experiment, train_max)
        row |= {c: runs[c].iloc[0] for c in ("config_hash", "git_commit", "versions")}
        row["seed"] = int(seed)
        append_row(TABLE, row)
        rows.append(row)
    return rows


def figure(out: Path) -> None:
    """Exact match vs length, one panel per experiment, one line per probe."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = pd.read_csv(TABLE)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, (experiment, lengths) in zip(axes, LENGTHS.items(), strict=True):
        ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)  # > 10 probes: distinct colours
        for row in table[table.experiment == experiment].itertuples():
            acc = [getattr(row, f"acc_L{n}") for n in lengths]
            ax.plot(lengths, acc, marker="o", label=f"{row.probe} ({int(row.steps_run)} st.)")
        ax.axhline(0.9, color="green", lw=0.8, ls="--")
        ax.set(xlabel="test length", ylabel="exact match", title=experiment, ylim=(-0.02, 1.02))
        ax.legend(fontsize=6, loc="upper right")
    fig.savefig(out, dpi=150, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """CLI: run probes by name, score them again, list them, draw the probe figure, or import a
    tier's runs."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["import"]:
        if len(argv) not in (5, 6):
            raise SystemExit("usage: scratchpad.py import NAME TABLE VARIANT VALUE [TIER_FILE]")
        for row in import_runs(argv[1], Path(argv[2]), argv[3], int(argv[4]), *argv[5:]):
            print(json.dumps({k: row[k] for k in ("probe", "steps_run", "verdict")}))
        return
    probe_cli(__doc__, PROBES, TABLE, run, figure, argv)


if __name__ == "__main__":
    main()
