"""Trained members of a fused group scored alone and fused (issue 63, item 5 d): does a fused
tier's evaluation (lengen.analysis.evaluate.evaluate_scratchpad_group, every member decoded in one
pass) score each member as evaluating it alone would, on the device it runs on?

    python benchmarks/fused_agreement.py --config config/gpu-smoke.yaml --device cuda \
        --models results/gpu-smoke/parity_scratchpad/ppc/k1/seed*/model.pt --json OUT.json

The models must share their task (one experiment, variant and jump or depth: what a fused
evaluation decodes together). At each of the tier's test lengths it decodes the tier's test set
(the evaluation's own draw, `lengen.tasks.<task>.testset` with the tier's eval section and test
seed) greedily, each member alone and all members as one FusedGPTNeoX, and reports per member and
length: the fraction of examples whose whole generated sequence (tokens and, for PPC, position
IDs) is the same both ways, and the exact-match accuracy each way. In fp32 on a CPU the sums are
the same, so everything agrees (tests/test_benchmarks.py); on a GPU batched and single matmuls
sum in another order, so near-tied logits may pick other tokens: the agreement is measured, not
assumed (the decode benchmark's untrained models differed on an H200)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from lengen import tasks
from lengen.analysis.decode import exact_match, greedy_decode
from lengen.analysis.evaluate import scratchpad_testset
from lengen.config.config import load
from lengen.core.positions import get_scheme
from lengen.model.fused import FusedGPTNeoX
from lengen.model.modelfile import model_from_saved, read_model_file
from lengen.tasks import parse_spec


@torch.no_grad()
def agreement(paths: list[Path], eval_cfg: dict, test_seed: int, device: str) -> list[dict]:
    """One row per (member, test length): whole-sequence agreement alone vs fused, and the
    exact-match accuracy of each."""
    saved = [read_model_file(p, device) for p in paths]
    specs = [parse_spec(s["spec"]) for s in saved]
    tasks_ = {json.dumps(s.source["task"], sort_keys=True) for s in specs}
    if len({s.experiment for s in specs}) != 1 or len(tasks_) != 1:
        raise SystemExit("the models differ in their task: a fused evaluation decodes one task")
    models = [model_from_saved(s, device).eval() for s in saved]
    fused = FusedGPTNeoX(models).to(device).eval()
    spec, runs = specs[0], len(models)
    predicts = get_scheme(spec.task.scheme).predicts_positions
    rows = []
    for length, batch in scratchpad_testset(spec, eval_cfg, test_seed).items():
        example, p = batch.test_example(spec.task.scheme), batch.prompt_len
        n_new = example.tokens.shape[1] - p
        same = np.zeros(runs)
        right_alone, right_fused = np.zeros(runs), np.zeros(runs)
        size = eval_cfg["batch_size"]
        for i in range(0, len(example.tokens), size):
            tokens, ids = example.tokens[i : i + size], example.position_ids[i : i + size]
            prompt, prompt_ids = tokens[:, :p], ids[:, :p]
            together = greedy_decode(
                fused,
                np.repeat(prompt[None], runs, axis=0),
                np.repeat(prompt_ids[None], runs, axis=0),
                n_new,
            )
            right_fused += exact_match(together, tokens, ids, check_positions=predicts).sum(-1)
            for r, model in enumerate(models):
                alone = greedy_decode(model, prompt, prompt_ids, n_new)
                right_alone[r] += exact_match(alone, tokens, ids, check_positions=predicts).sum()
                equal = (together.tokens[r] == alone.tokens).all(-1)
                if predicts:
                    equal &= (together.position_ids[r] == alone.position_ids).all(-1)
                same[r] += equal.sum()
        n = len(example.tokens)
        rows += [
            {
                "model": str(paths[r]),
                "run": specs[r].run_name,
                "length": int(length),
                "n": n,
                "same_generation": same[r] / n,
                "accuracy_alone": right_alone[r] / n,
                "accuracy_fused": right_fused[r] / n,
            }
            for r in range(runs)
        ]
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="the tier the models were trained in")
    parser.add_argument("--models", type=Path, nargs="+", required=True, help="model.pt files")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load(args.config)
    spec = parse_spec(read_model_file(args.models[0])["spec"])
    experiment = spec.experiment
    eval_cfg = tasks.variant_section(cfg[experiment], spec.variant)["eval"]  # the eval rule's
    rows = agreement(args.models, eval_cfg, cfg["seed"], args.device)
    where = torch.cuda.get_device_name() if args.device == "cuda" else "1 CPU thread"
    print(f"{len(args.models)} members of {experiment}, {where}")
    print("run                      length  same generation  accuracy alone  fused")
    for r in rows:
        print(
            f"{r['run']:<25}{r['length']:>6}  {r['same_generation']:>15.3f}  "
            f"{r['accuracy_alone']:>14.3f}  {r['accuracy_fused']:>5.3f}"
        )
    worst = min(r["same_generation"] for r in rows)
    print(f"fused = alone, whole generations: {worst:.3f} (worst member and length)")
    if args.json:
        args.json.write_text(
            json.dumps({"config": args.config, "device": where, "rows": rows}, indent=1)
        )


if __name__ == "__main__":
    main()
