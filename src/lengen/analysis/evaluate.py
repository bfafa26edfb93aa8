"""Length-sweep evaluation, written as a tidy CSV per model and logged to that model's MLflow run.

Two kinds of scoring, chosen by the task module (lengen.tasks):
- a task with a stored test set scores a model itself (`score`; sparse parity, Sec. 5.1: the final
  token per (2l, k_test));
- a generation-scored task (one with a `SETTING`, the scratchpad tasks of Sec. 5.2) is scored
  here by greedy generation after the prompt (lengen.analysis.decode): the fraction of examples with
  every scored token and, for PPC, every predicted position ID right (Fig. 2, 3a); the answer token
  alone without a scratchpad (Fig. 3c).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from lengen import tasks
from lengen.analysis.decode import exact_match, greedy_decode
from lengen.core import provenance, tracking
from lengen.core.cli import command_parser, one_line_errors
from lengen.core.device import eval_device
from lengen.core.positions import get_scheme
from lengen.core.specs import Spec
from lengen.model.fused import FusedGPTNeoX
from lengen.model.modelfile import model_from_saved, read_model_file, training_outcome
from lengen.tasks import parse_spec


def evaluate(model_path: Path, testset: Path, batch_size: int, out: Path) -> pd.DataFrame:
    """Table of one trained model scored on its task's stored test set (the task's `score`;
    sparse parity: final-token accuracy over the (2l, k_test) grid)."""
    device = eval_device()
    saved = read_model_file(model_path, device)
    spec, model = parse_spec(saved["spec"]), model_from_saved(saved, device)
    task = tasks.get(spec.experiment)
    progress = partial(tqdm, desc="eval", mininterval=5)
    rows = [
        {**row, **training_outcome(saved)}
        for row in task.score(model, spec, testset, batch_size, progress)
    ]
    setup = {"spec": spec.source, "testset": task.testset_config(testset), "batch_size": batch_size}
    table = provenance.stamp(pd.DataFrame(rows), setup, spec.seed)
    _write_and_log(table, spec, model_path, out)
    return table


def scratchpad_testset(spec: Spec, eval_cfg: dict, test_seed: int) -> dict:
    """Fixed test draws per length for a generation-scored spec (its task's `testset`); the same
    for every model and variant."""
    return tasks.get(spec.experiment).testset(spec, eval_cfg, test_seed)


def generation_accuracy(model, batch, scheme: str, batch_size: int):
    """Fraction of examples generated exactly right from the prompt (tokens, and IDs for ppc);
    `batch` is a task's test draw (its `prompt_len` and `test_example(scheme)`). For a fused
    group (lengen.model.fused: R runs that share this test draw) every run decodes the same
    prompts in one pass, and the result is the R runs' fractions (an array)."""
    with torch.no_grad():  # a block: mutmut skips decorated functions
        example = batch.test_example(scheme)
        p = batch.prompt_len
        n_new = example.tokens.shape[1] - p
        predicts = get_scheme(scheme).predicts_positions  # PPC: its predicted IDs are scored too
        runs = getattr(model, "runs", None)  # a fused group's R
        correct = 0
        for i in range(0, len(example.tokens), batch_size):
            tokens = example.tokens[i : i + batch_size]
            ids = example.position_ids[i : i + batch_size]
            prompt, prompt_ids = tokens[:, :p], ids[:, :p]
            if runs is not None:  # one copy of the prompts per run: (R, B, P)
                prompt = np.repeat(prompt[None], runs, axis=0)
                prompt_ids = np.repeat(prompt_ids[None], runs, axis=0)
            gen = greedy_decode(model, prompt, prompt_ids, n_new)
            correct = correct + exact_match(gen, tokens, ids, check_positions=predicts).sum(-1)
        share = correct / len(example.tokens)
        return share if runs is not None else float(share)


def _scratchpad_table(
    spec: Spec, saved: dict, accuracy: dict[int, float], eval_cfg: dict, test_seed: int
) -> pd.DataFrame:
    """One model's eval table: a row per test length with its accuracy, stamped."""
    task = spec.task
    param = tasks.get(spec.experiment).SETTING.key
    stopped = training_outcome(saved)  # "did not learn in N steps" travels with the table
    rows = [
        {
            "experiment": spec.experiment,
            "variant": spec.variant,
            "run": spec.run_name,
            "scheme": task.scheme,
            "scratchpad": getattr(task, "scratchpad", True),
            param: getattr(task, param),
            "seed": spec.seed,
            "length": length,
            "n": n,
            "accuracy": acc,
            **stopped,
        }
        for length, (n, acc) in accuracy.items()
    ]
    setup = {"spec": spec.source, "eval": eval_cfg, "test_seed": test_seed}
    return provenance.stamp(pd.DataFrame(rows), setup, spec.seed)


def evaluate_scratchpad(
    model_path: Path, eval_cfg: dict, test_seed: int, out: Path
) -> pd.DataFrame:
    """Exact-match accuracy of one generation-scored model (a scratchpad task) over the test
    lengths."""
    device = eval_device()
    saved = read_model_file(model_path, device)
    spec, model = parse_spec(saved["spec"]), model_from_saved(saved, device)
    accuracy = {}
    testset = scratchpad_testset(spec, eval_cfg, test_seed)
    for length, batch in tqdm(testset.items(), desc="eval", mininterval=5):
        acc = generation_accuracy(model, batch, spec.task.scheme, eval_cfg["batch_size"])
        accuracy[length] = (len(batch.tokens), acc)
    table = _scratchpad_table(spec, saved, accuracy, eval_cfg, test_seed)
    _write_and_log(table, spec, model_path, out)
    return table


def evaluate_scratchpad_group(
    model_paths: list[Path], eval_cfg: dict, test_seed: int, outs: list[Path]
) -> list[pd.DataFrame]:
    """evaluate_scratchpad for a fused group's members (issue 45: evaluation fused too): the
    members that share a test set (one experiment, variant and jump / depth: their task specs
    are equal, only their seeds differ) decode it as one fused model (lengen.model.fused), a
    length's prompts once for all of them; each member gets its own table, file and MLflow
    metrics, equal to evaluating it alone (tests/test_evaluate.py)."""
    device = eval_device()
    saved = [read_model_file(path, device) for path in model_paths]
    specs = [parse_spec(s["spec"]) for s in saved]
    sharing: dict[str, list[int]] = {}
    for i, spec in enumerate(specs):
        same = {"experiment": spec.experiment, "variant": spec.variant, "task": spec.source["task"]}
        sharing.setdefault(json.dumps(same, sort_keys=True), []).append(i)
    tables: list[pd.DataFrame] = [None] * len(model_paths)
    for members in sharing.values():
        spec = specs[members[0]]
        fused = FusedGPTNeoX([model_from_saved(saved[i], device) for i in members]).to(device)
        accuracy: dict[int, tuple] = {}
        testset = scratchpad_testset(spec, eval_cfg, test_seed)
        for length, batch in tqdm(testset.items(), desc=f"eval x{len(members)}", mininterval=5):
            acc = generation_accuracy(fused, batch, spec.task.scheme, eval_cfg["batch_size"])
            accuracy[length] = (len(batch.tokens), acc)
        for r, i in enumerate(members):
            mine = {length: (n, float(acc[r])) for length, (n, acc) in accuracy.items()}
            tables[i] = _scratchpad_table(specs[i], saved[i], mine, eval_cfg, test_seed)
            _write_and_log(tables[i], specs[i], model_paths[i], outs[i])
    return tables


# pragma: no mutate start  (file and MLflow output)
def _write_and_log(table: pd.DataFrame, spec: Spec, model_path: Path, out: Path) -> None:
    """Write the table; log accuracies and the table to the model's MLflow run."""
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    run_id_file = model_path.parent / "mlflow_run_id"
    if not run_id_file.exists():
        return
    tracking.resume_run(spec.tracking.uri, run_id_file)
    suffix = (lambda r: f"_k{r.k_test}") if "k_test" in table else (lambda r: "")
    tracking.log_metrics({f"acc_len{r.length}{suffix(r)}": r.accuracy for r in table.itertuples()})
    tracking.log_artifact(out)
    tracking.end_run()


# pragma: no mutate end


# pragma: no mutate block  (CLI wiring: tested through the workflow in subprocesses)
@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: `run` scores a model on its task's stored test set; `generate` scores a
    generation-scored (scratchpad) model. (Test sets and joined tables: lengen.analysis.tables.)"""
    parser = command_parser(__spec__, __doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--model", type=Path, required=True)
    r.add_argument("--testset", type=Path, required=True)
    r.add_argument("--batch-size", type=int, default=128)
    r.add_argument("--out", type=Path, required=True)
    g = sub.add_parser("generate", help="score a scratchpad-task model by greedy generation")
    g.add_argument(
        "--model",
        type=Path,
        nargs="+",
        required=True,
        help="a model.pt, or a fused group's (decoded as one model)",
    )
    g.add_argument("--eval", required=True, help="JSON of the eval config section")
    g.add_argument("--seed", type=int, required=True, help="test-set seed (the config's)")
    g.add_argument("--out", type=Path, nargs="+", required=True, help="one per --model")
    args = parser.parse_args(argv)
    if args.cmd == "run":
        evaluate(args.model, args.testset, args.batch_size, args.out)
    else:
        if len(args.model) != len(args.out):
            parser.error(f"generate: {len(args.model)} --model for {len(args.out)} --out")
        if len(args.model) == 1:
            evaluate_scratchpad(args.model[0], json.loads(args.eval), args.seed, args.out[0])
        else:
            evaluate_scratchpad_group(args.model, json.loads(args.eval), args.seed, args.out)


if __name__ == "__main__":
    main()
