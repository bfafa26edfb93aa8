"""Sparse-parity probes (issue: make Fig. 1 / Fig. 7 reproduce on a 2-core CPU).

A probe is the default tier's sparse-parity section with a few keys overridden (probes listed in
`probes/sparse_parity.yaml`), trained by the project's own trainer and scored by the project's own
evaluator (`lengen.tasks.sparse_parity.final_token_accuracy`) on a fixed probe test grid:
2l in {50, 100, 200, 500} x k_test in {1..K_train} (256 examples each, seed 0), plus the best
accuracy at k_test in {K_train + 2, K_train + 4} (SP-2 says it fails). Each finished
probe appends one row to `probes/sparse_parity_probes.csv` (committed), failures included.

    python probes/sparse_parity.py run NAME [NAME ...]   # train + score, append rows
    python probes/sparse_parity.py list                 # names, and which have a row
    python probes/sparse_parity.py figure               # worst-k accuracy vs 2l per probe

Run two at a time, one thread each (platform notes), in the background:

    OMP_NUM_THREADS=1 nohup python probes/sparse_parity.py run NAME > results/probes/NAME.log 2>&1 &
"""

from __future__ import annotations

import argparse
import fcntl
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

from lengen.config import config as config_mod
from lengen.core import provenance, tracking
from lengen.core.device import eval_device
from lengen.core.specs import merge_dicts
from lengen.model.modelfile import model_from_saved, read_model_file
from lengen.tasks import sparse_parity as sp
from lengen.train.train import train

ROOT = Path(__file__).resolve().parents[1]
PROBES = ROOT / "probes" / "sparse_parity.yaml"
TABLE = ROOT / "probes" / "sparse_parity_probes.csv"
LENGTHS = (50, 100, 200, 500)
N_EXAMPLES = 256
TEST_SEED = 0


def append_row(table_path: Path, row: dict, key: tuple[str, ...] = ("probe",)) -> None:
    """Write a probe's row into a probe table, replacing an older row with the same key columns;
    locked, since two probes may finish together."""
    with open(table_path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        table = pd.read_csv(table_path) if table_path.exists() else pd.DataFrame(columns=key)
        same = np.logical_and.reduce([table[k] == row[k] for k in key])
        table = pd.concat([table[~same], pd.DataFrame([row])])
        table.to_csv(table_path, index=False)


def read_base(base: str) -> dict:
    """A probe's base config: `PATH` (as it is now) or `PATH@COMMIT` (as it was at that commit,
    so that a probe reruns on the defaults it was run with after the default tier moves on); a
    tier that extends another is merged with its base as of the same commit."""
    path, _, commit = base.partition("@")
    if not commit:
        return config_mod.read_tier(ROOT / path)  # a tier that extends another, merged
    try:
        cfg = config_mod.read_tier_at(path, commit, ROOT)
    except config_mod.ConfigError as e:
        raise SystemExit(f"probe base {base}: {e}") from None
    # sparse-parity variants gained `runs` later (issue 44); before, each trained one run
    for variant in cfg.get("sparse_parity", {}).get("variants", {}).values():
        variant.setdefault("runs", 1)
    return cfg


def load_probe(probes_path: Path, name: str, kind: str, section, overrides) -> tuple[dict, dict]:
    """(validated config with a probe's overrides, the probe's entry) for a probe named in
    probes_path; section(entry) names the config section, overrides(entry) its overrides. Shared
    by every probe runner (results under results/probes/<kind>/<name>)."""
    probes = yaml.safe_load(probes_path.read_text())
    if name not in probes["probes"]:
        raise SystemExit(
            f"{probes_path}: no probe named {name!r}; known: {sorted(probes['probes'])}"
        )
    entry = probes["probes"][name]
    cfg = read_base(entry.get("base", probes["base"]))
    cfg[section(entry)] = merge_dicts(cfg[section(entry)], overrides(entry))
    cfg["seed"] = entry.get("seed", cfg["seed"])  # the config's one seed: weights and data draws
    cfg["results_dir"] = str(ROOT / "results" / "probes" / kind / name)
    cfg["tracking"]["experiment_prefix"] = "lengen-probes"
    return config_mod.validate(cfg), entry


def scored_model(path: Path) -> tuple[dict, torch.nn.Module]:
    """(the model file's dict, its model) on the evaluation device: the GPU where there is one.
    (Scoring on the CPU is what a GPU machine did before: on one H100 the PPC parity probe
    trained in 141 s, then its scoring on one CPU thread had not finished 210 s later.)"""
    device = eval_device()
    saved = read_model_file(path, device)
    return saved, model_from_saved(saved, device)


def probe_config(name: str) -> tuple[dict, dict]:
    """(validated config with the probe's overrides, the probe's entry) for a probe name."""
    section = "sparse_parity"
    return load_probe(PROBES, name, section, lambda e: section, lambda e: e.get(section, {}))


def accuracy(model, length: int, k: int) -> float:
    """Final-token accuracy on the fixed probe draw at test length 2l = length, sparsity k."""
    batch = sp.sample(np.random.default_rng([TEST_SEED, length, k]), N_EXAMPLES, length // 2, k, 20)
    return sp.final_token_accuracy(model, batch.tokens, 128)


def score(model, k_train: int) -> dict[str, float]:
    """Accuracy per (2l, k_test) of the probe grid, keyed 'acc_L{2l}_k{k}', and the best accuracy
    at k_test in {K_train + 2, K_train + 4} (SP-2: should fail at every length)."""
    out = {
        f"acc_L{length}_k{k}": accuracy(model, length, k)
        for length in LENGTHS
        for k in range(1, k_train + 1)
    }
    out["best_acc_k_above_K"] = max(
        accuracy(model, length, k)
        for length in LENGTHS
        for k in (k_train + 2, k_train + 4)
        if k < length // 2
    )
    return out


def verdict(row: dict, k_train: int) -> str:
    """Longest probe length at which every k_test <= K_train has accuracy >= 0.9 (SP-1's bar)."""
    good = [
        length
        for length in LENGTHS
        if all(row[f"acc_L{length}_k{k}"] >= 0.9 for k in range(1, k_train + 1))
    ]
    reach = 0
    for length in LENGTHS:  # the bar must hold at every shorter length too
        if length not in good:
            break
        reach = length
    if reach == LENGTHS[-1]:
        return "near-perfect to 2l=500 (SP-1 bar met)"
    if reach == 0:
        return "not learned in distribution (2l=50 below 0.9)"
    return f">= 0.9 up to 2l={reach} only"


def run(name: str, rescore: bool = False) -> dict:
    """Train and score one probe (or, with rescore, score its trained model again, keeping the
    recorded wall time); write its row to the probe table."""
    torch.set_num_threads(1)
    cfg, entry = probe_config(name)
    k_train = entry["k_train"]
    spec = sp.train_spec(cfg, k_train)
    spec["run_name"] = f"probe/{name}"
    out = Path(cfg["results_dir"]) / f"K{k_train}"
    if rescore:
        path = out / "model.pt"
        old = pd.read_csv(TABLE).set_index("probe")
        wall = float(old.loc[name, "train_wall_s"])
    else:
        tracking.prepare_store(spec["tracking"]["uri"], [spec["tracking"]["experiment"]])
        t0 = time.perf_counter()
        path = train(spec, out)
        wall = time.perf_counter() - t0
    saved, model = scored_model(path)
    row = {
        "probe": name,
        "k_train": k_train,
        "note": entry.get("note", ""),
        "overrides": json.dumps(entry.get("sparse_parity", {}), sort_keys=True),
        "steps_run": saved.get("steps_run", spec["train"]["steps"]),
        "train_wall_s": round(wall, 1),
        "params": model.num_params(),
        **score(model, k_train),
    }
    row["verdict"] = verdict(row, k_train)
    row.update(provenance.record(spec, spec["seed"]))
    append_row(TABLE, row)
    print(json.dumps({k: row[k] for k in ("probe", "steps_run", "train_wall_s", "verdict")}))
    return row


def figure(out: Path) -> None:
    """Worst accuracy over k_test <= K_train vs test length, one line per probe."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = pd.read_csv(TABLE)
    fig, ax = plt.subplots(figsize=(7, 4))
    for row in table.itertuples():
        k_train = int(row.k_train)
        worst = [
            min(getattr(row, f"acc_L{length}_k{k}") for k in range(1, k_train + 1))
            for length in LENGTHS
        ]
        ax.plot(LENGTHS, worst, marker="o", label=f"{row.probe} ({int(row.steps_run)} steps)")
    ax.axhline(0.9, color="green", lw=0.8, ls="--")
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set(
        xscale="log",
        xlabel="test length 2l",
        ylabel="worst accuracy over k_test <= K_train",
        title="Sparse-parity probes (train 2l in [20, 50])",
        ylim=(-0.02, 1.02),
    )
    ax.set_xticks(LENGTHS, labels=LENGTHS)
    ax.minorticks_off()
    ax.legend(fontsize=6, loc="lower left")
    fig.savefig(out, dpi=150, bbox_inches="tight")
    plt.close(fig)


def probe_cli(doc: str, probes_path: Path, table: Path, run_probe, draw, argv=None) -> None:
    """A probe runner's CLI (shared): `run` / `rescore` probes by name, `list` them (and which
    have a row in `table`), or `figure` (draw(png path) from the table)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run").add_argument("names", nargs="+")
    sub.add_parser("rescore", help="score trained probes again").add_argument("names", nargs="+")
    sub.add_parser("list")
    sub.add_parser("figure", help=f"{table.with_suffix('.png').name} from the probe table")
    args = parser.parse_args(argv)
    if args.cmd == "figure":
        draw(table.with_suffix(".png"))
        return
    if args.cmd == "list":
        done = set(pd.read_csv(table)["probe"]) if table.exists() else set()
        for name in yaml.safe_load(probes_path.read_text())["probes"]:
            print(f"{'done' if name in done else '    '}  {name}")
        return
    for name in args.names:
        run_probe(name, rescore=args.cmd == "rescore")


def main(argv: list[str] | None = None) -> None:
    """CLI: run probes by name, score them again, list them, or draw the probe figure."""
    probe_cli(__doc__, PROBES, TABLE, run, figure, argv)


if __name__ == "__main__":
    main()
