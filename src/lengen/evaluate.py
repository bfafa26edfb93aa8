"""Length-sweep evaluation (Sec. 5.1): accuracy of the final token per (2l, k_test), batched by
length, written as a tidy CSV per model and logged to that model's MLflow run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from lengen import tracking
from lengen.tasks import sparse_parity as sp
from lengen.train import load_model


def write_testset(eval_cfg: dict, n: int, seed: int, path: Path) -> None:
    """Draw the sparse-parity test set once and store it (tokens, k, label per group)."""
    arrays = {}
    for (length, k), b in sp.make_testset(eval_cfg, n, seed).items():
        arrays[f"L{length}_k{k}_tokens"] = b.tokens
        arrays[f"L{length}_k{k}_label"] = b.label
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)


def read_testset(path: Path) -> dict[tuple[int, int], np.ndarray]:
    """(2l, k_test) -> tokens of the stored test set."""
    data = np.load(path)
    groups = {}
    for key in data.files:
        if key.endswith("_tokens"):
            length, k = key.removesuffix("_tokens").split("_")
            groups[(int(length[1:]), int(k[1:]))] = data[key]
    return groups


@torch.no_grad()
def final_token_accuracy(model, tokens: np.ndarray, batch_size: int) -> float:
    """Fraction of rows whose last token is the argmax prediction at true position IDs."""
    correct = 0
    for i in range(0, len(tokens), batch_size):
        chunk = tokens[i : i + batch_size]
        example = sp.test_example(sp.Batch(chunk, np.zeros_like(chunk), None, None))
        inputs = example.model_inputs()
        logits = model(inputs["input_ids"], inputs["position_ids"])[:, -1]
        correct += (logits.argmax(-1).numpy() == chunk[:, -1]).sum()
    return float(correct / len(tokens))


def evaluate(model_path: Path, testset: Path, batch_size: int, out: Path) -> pd.DataFrame:
    """Accuracy table of one trained model over the whole test grid."""
    torch.set_num_threads(1)
    saved_spec = torch.load(model_path, map_location="cpu", weights_only=True)["spec"]
    model = load_model(model_path)
    groups = read_testset(testset)
    rows = []
    for (length, k), tokens in tqdm(sorted(groups.items()), desc="eval", mininterval=5):
        acc = final_token_accuracy(model, tokens, batch_size)
        rows.append(
            {
                "experiment": saved_spec["experiment"],
                "run": saved_spec["run_name"],
                "k_train": saved_spec["task"]["k_train"],
                "seed": saved_spec["seed"],
                "length": length,
                "k_test": k,
                "n": len(tokens),
                "accuracy": acc,
            }
        )
    table = pd.DataFrame(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    run_id_file = model_path.parent / "mlflow_run_id"
    if run_id_file.exists():
        tracking.resume_run(saved_spec["tracking"]["uri"], run_id_file)
        tracking.log_metrics(
            {f"acc_len{r.length}_k{r.k_test}": r.accuracy for r in table.itertuples()}, 0
        )
        tracking.log_artifact(out)
        tracking.end_run()
    return table


def combine(tables: list[Path], out: Path) -> pd.DataFrame:
    """One tidy table from per-model tables, sorted by K_train, length and k_test."""
    table = pd.concat([pd.read_csv(p) for p in tables], ignore_index=True)
    table = table.sort_values(["k_train", "length", "k_test"], ignore_index=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    return table


def main(argv: list[str] | None = None) -> None:
    """CLI: `testset` writes the fixed test set; `run` scores one model; `combine` joins tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("testset")
    t.add_argument("--eval", required=True, help="JSON of the eval config section")
    t.add_argument("--n", type=int, required=True)
    t.add_argument("--seed", type=int, required=True)
    t.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("run")
    r.add_argument("--model", type=Path, required=True)
    r.add_argument("--testset", type=Path, required=True)
    r.add_argument("--batch-size", type=int, default=128)
    r.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("combine")
    c.add_argument("--tables", nargs="+", type=Path, required=True)
    c.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.cmd == "testset":
        write_testset(json.loads(args.eval), args.n, args.seed, args.out)
    elif args.cmd == "run":
        evaluate(args.model, args.testset, args.batch_size, args.out)
    else:
        combine(args.tables, args.out)


if __name__ == "__main__":
    main()
