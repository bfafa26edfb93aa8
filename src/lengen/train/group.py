"""A group of training runs of one shape trained as one fused model
(lengen.model.fused): one DeepSpeed engine, one optimizer step per step for every run, each run
with its own seed-drawn weights and data stream, its own gradient clipping, its own early or
plateau stop (a stopped run stops changing), and its own model.pt, so that every later stage
(evaluation, tables, figures, the report) sees the files the runs trained one by one would have
written. tests/test_group.py checks that a group gives each run's weights and stopping point as
train.train does alone.

    python -m lengen.train.group --spec A.json B.json ... --out DIR_A DIR_B ...
    python -m lengen.train.group --specs '[{...}, {...}]' --out DIR_A DIR_B   (the workflow's)

The group checkpoints itself (DIR_A/group_ckpt: every run's weights and AdamW moments, the step,
which runs stopped and why) and resumes from there. Each member keeps its own MLflow run (its
folder's mlflow_run_id, as train.train writes it), which its evaluation then resumes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from lengen import tasks
from lengen.core import provenance, tracking
from lengen.core.batch import step_rng
from lengen.core.files import space_for, write_text_atomic
from lengen.core.specs import Spec, read_spec
from lengen.model.fused import LAYOUT, FusedGPTNeoX
from lengen.model.modelfile import write_model_file
from lengen.tasks import parse_spec
from lengen.train import runtime
from lengen.train.loss import training_loss
from lengen.train.train import EarlyStop, _prune, _resume_tag, build_model, lr_lambda

SHARED = ("experiment", "model", "train", "runtime")  # what one group's runs share


def check_group(specs: list[Spec]) -> None:
    """A group's runs share one experiment, model, schedule and runtime (the shapes and the
    optimizer); their seeds and task settings (a jump, a depth: data, not shape) may differ,
    their names may not. Else ValueError naming the key."""
    first = specs[0].source
    for spec in specs[1:]:
        for key in SHARED:
            if spec.source.get(key) != first.get(key):
                raise ValueError(
                    f"runs {specs[0].run_name} and {spec.run_name} differ in `{key}`: a fused "
                    "group's runs share everything but their seed and task settings"
                )
    if len({s.run_name for s in specs}) != len(specs):
        raise ValueError("a fused group's runs need distinct names (one folder each)")


def group_batch(task, specs: list[Spec], step: int, buckets: tuple[int, ...], id_limit):
    """Each run's batch of this step (its own seed's stream, as train.Batches draws it with one
    process), padded at the end to the longest (and to the bucket edge above it): padding is
    never scored and the model is causal, so each run's loss is its batch's alone. (R, B, T)."""
    examples = [task.train_batch(s, step_rng(s.seed, step, 0), step).padded(buckets) for s in specs]
    longest = max(e.tokens.shape[1] for e in examples)
    inputs = [e.padded((longest,)).model_inputs("cpu", id_limit) for e in examples]
    return {k: torch.stack([x[k] for x in inputs]) for k in inputs[0]}


def run_losses(output, inputs: dict, chunk: int) -> torch.Tensor:
    """Each run's training loss on its own scored tokens (R,)."""
    outs = output if isinstance(output, tuple) else (output,)
    runs = outs[0].shape[0]
    return torch.stack([
        training_loss(tuple(o[r] for o in outs) if len(outs) > 1 else outs[0][r],
                      {k: v[r] for k, v in inputs.items()}, chunk)
        for r in range(runs)
    ])  # fmt: skip


class Group:
    """The fused runs' state: which are still training, why each stopped."""

    def __init__(self, specs: list[Spec], outs: list[Path]):
        self.specs, self.outs = specs, outs
        self.active = torch.ones(len(specs), dtype=torch.bool)
        self.stopped: dict[int, tuple[int, str]] = {}  # run -> (steps run, reason)

    def stop(self, r: int, done: int, reason: str) -> None:
        self.active[r] = False
        self.stopped[r] = (done, reason)

    def state(self) -> dict:
        return {
            "active": self.active.tolist(),
            "stopped": {str(r): v for r, v in self.stopped.items()},
        }

    def load(self, state: dict) -> None:
        self.active = torch.tensor(state["active"], dtype=torch.bool)
        self.stopped = {int(r): tuple(v) for r, v in state["stopped"].items()}


class Runs:
    """Each member's own MLflow run, as train.train keeps one per model: opened (or resumed,
    from its folder's mlflow_run_id) with the spec's params and provenance at the start, the
    member's training loss every log_every steps, its stop, model path and hash at its end; a
    group that fails or is killed closes every unfinished member's run so."""

    def __init__(self, group: Group, fused: FusedGPTNeoX, resumed: bool):
        from mlflow.tracking import MlflowClient

        self.ids = []
        uri = group.specs[0].tracking.uri
        self.client = MlflowClient(tracking_uri=uri)
        model = fused.member(0)  # the parameter count every member's params log
        try:
            for spec, out in zip(group.specs, group.outs, strict=True):
                out.mkdir(parents=True, exist_ok=True)
                write_text_atomic(out / "spec.json",
                                  json.dumps(spec.source, indent=2, sort_keys=True))  # fmt: skip
                trk = spec.tracking
                run = tracking.start_run(trk.uri, trk.experiment, spec.run_name,
                                         out / "mlflow_run_id")  # fmt: skip
                self.ids.append(run.info.run_id)
                if not resumed:
                    tracking.log_params_once(spec.source, model)
                    tracking.set_tags(provenance.record(spec.source, spec.seed))
                tracking.end_run()
            # after a resume, the steps since the last checkpoint are not logged twice
            self.logged = [tracking.logged_steps(uri, i) for i in self.ids]
            for run_id in self.ids:
                self.client.update_run(run_id, status="RUNNING")
        except BaseException as err:  # a SIGTERM while the runs open: none is left RUNNING
            tracking.close_failed_run(err)
            self.fail(err, set())
            raise

    def log(self, r: int, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        fresh = tracking.unlogged(metrics, step, self.logged[r])
        found = [Metric(k, float(v), stamp, step) for k, v in fresh.items()]
        if found:
            self.client.log_batch(self.ids[r], metrics=found)

    def finish(self, r: int, path: Path, steps_run: int, reason: str) -> None:
        self.log(r, {"stopped_at": steps_run}, steps_run)
        for k, v in {"early_stop": reason, "model_path": str(path.resolve()),
                     "model_sha256": provenance.file_sha256(path)}.items():  # fmt: skip
            self.client.set_tag(self.ids[r], k, v)
        self.client.set_terminated(self.ids[r], "FINISHED")

    def fail(self, err: BaseException, done: set[int]) -> None:
        status = "KILLED" if isinstance(err, KeyboardInterrupt | SystemExit) else "FAILED"
        for r, run_id in enumerate(self.ids):
            if r not in done:
                self.client.set_terminated(run_id, status)


def write_member(fused: FusedGPTNeoX, group: Group, r: int, steps_run: int, reason: str) -> Path:
    """Run r's model.pt in its own folder, as train.train writes it."""
    path = group.outs[r] / "model.pt"
    with space_for(path, "the model file"):
        write_model_file(fused.member(r), group.specs[r], path, steps_run, reason)
    return path


def make_engine(specs: list[Spec]):
    """The fused model of the runs' seed-drawn weights in one DeepSpeed engine, with AdamW and
    the lr schedule as train.make_engine builds them; clipping is per run
    (FusedGPTNeoX.clip_run_grads_), so the engine's own (a global norm) is off."""
    first = specs[0]
    cfg = first.train
    fused = FusedGPTNeoX([build_model(s) for s in specs])
    optimizer = torch.optim.AdamW(
        fused.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas,
        fused=True if first.runtime.device == "cuda" else None,
    )  # fmt: skip
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    no_clip = dataclasses.replace(first, train=dataclasses.replace(cfg, grad_clip=0.0))
    engine = runtime.deepspeed_engine(no_clip, fused, optimizer, scheduler)
    if engine.gradient_accumulation_steps() != 1:
        raise ValueError("a fused group trains one micro-batch per step (train.micro_batch_size)")
    return fused, engine


def fused_step(engine, fused: FusedGPTNeoX, group: Group, inputs: dict, spec: Spec) -> list:
    """One optimizer step of every run still training: each run's loss on its own batch, its own
    clipping; a stopped run's weights are put back after the step (it stops changing)."""
    inputs = {k: v.to(engine.device) for k, v in inputs.items()}
    out = engine(inputs["input_ids"], inputs["position_ids"])
    losses = run_losses(out, inputs, spec.runtime.loss_chunk_tokens)
    engine.backward((losses * group.active.to(losses.device)).sum())
    fused.clip_run_grads_(spec.train.grad_clip)
    frozen = ~group.active
    kept = {n: p.detach()[frozen].clone() for n, p in fused.weights.items()} if frozen.any() else {}
    engine.step()
    with torch.no_grad():
        for n, p in fused.weights.items() if kept else ():
            p[frozen] = kept[n]
    values = losses.tolist()  # one host sync per step (the CPU's and a first GPU version's)
    for r, x in enumerate(values):
        if group.active[r] and not math.isfinite(x):
            raise FloatingPointError(
                f"{group.specs[r].run_name}: training loss {x}: the run diverged"
            )
    return values


def check_stops(stoppers, fused: FusedGPTNeoX, group: Group, runs: Runs, done: int, device):
    """Each training run's early or plateau stop at a check step (train.EarlyStop, on the run's
    own held-out draw); a run that stops writes its model.pt and closes its MLflow run now."""
    for r in map(int, group.active.nonzero().flatten()):
        acc = stoppers[r].accuracy(fused.member(r).to(device))
        runs.log(r, {"heldout_exact_match": acc}, done)
        reason = stoppers[r].update(acc, done)
        if reason and done < group.specs[r].train.steps:
            group.stop(r, done, reason)
            runs.finish(r, write_member(fused, group, r, done, reason), done, reason)


def train_group(specs: list[Spec | dict], outs: list[Path], stop_after: int | None = None,
                budget_s: float | None = None):  # fmt: skip
    """Train the runs as one fused group; write each run's model.pt. stop_after simulates a crash
    after that many steps (tests). budget_s, seconds of training: once spent, every active run
    ends at the step it reached, stop reason "budget" (a probe on a lent GPU's few minutes; the
    workflow never sets it, and its runs train their configured steps). Returns the model
    paths."""
    specs, outs = [parse_spec(s) for s in specs], [Path(o) for o in outs]
    if len(specs) != len(outs):
        raise ValueError(f"{len(specs)} specs but {len(outs)} output folders")
    check_group(specs)
    runtime.setup(specs[0].runtime)
    fused, engine = make_engine(specs)
    group, ckpt_dir = Group(specs, outs), outs[0] / "group_ckpt"
    task = tasks.get(specs[0].experiment)
    early = specs[0].train.early_stop
    stoppers = [EarlyStop(s, task, engine.device) for s in specs] if early else None
    start, tag = 0, _resume_tag(ckpt_dir, lambda msg: print(msg, file=sys.stderr, flush=True))
    if tag is not None:
        _, client = engine.load_checkpoint(str(ckpt_dir), tag=tag)
        if client.get("layout") != LAYOUT:  # a square weight would load transposed, silently
            raise RuntimeError(
                f"{ckpt_dir / tag}: a group checkpoint of another fused layout "
                f"({client.get('layout', 'linear weights [R, out, in]')}; this code's: {LAYOUT}); "
                f"delete {ckpt_dir} to train the group from its start"
            )
        start = client["step"]
        group.load(client["group"])
        for stopper, streak in zip(stoppers or [], client["streaks"], strict=True):
            stopper.streak = streak
    runs = Runs(group, fused, resumed=start > 0)
    try:
        return _loop(engine, fused, group, runs, stoppers, task, start, stop_after, budget_s)
    except BaseException as err:
        runs.fail(err, set(group.stopped))
        raise


def _loop(engine, fused, group: Group, runs: Runs, stoppers, task, start: int, stop_after,
          budget_s):  # fmt: skip
    """train_group's steps, logging, stops, checkpoints and the final models."""
    specs, outs, ckpt_dir = group.specs, group.outs, group.outs[0] / "group_ckpt"
    deadline = None if budget_s is None else time.monotonic() + budget_s
    first, cfg = specs[0], specs[0].train
    steps = tqdm(range(start, cfg.steps), initial=start, total=cfg.steps, mininterval=5,
                 desc=f"group of {len(specs)}", disable=not first.runtime.progress)  # fmt: skip
    window: list[list[float]] = []
    for step in steps:
        done = step + 1
        batch = group_batch(task, specs, step, cfg.length_buckets, fused.cfg.id_limit)
        window.append(fused_step(engine, fused, group, batch, first))
        if done % cfg.log_every == 0 or done == cfg.steps:
            for r in map(int, group.active.nonzero().flatten()):
                mean = sum(w[r] for w in window) / len(window)
                runs.log(r, {"train_loss": mean, "lr": engine.get_lr()[0]}, done)
            window = []
        if stoppers is not None and stoppers[0].due(done):
            check_stops(stoppers, fused, group, runs, done, engine.device)
        if not group.active.any():
            break
        if done % cfg.checkpoint_every == 0 and done < cfg.steps:
            client = {"step": done, "group": group.state(), "layout": LAYOUT,
                      "streaks": [s.streak for s in stoppers or []]}  # fmt: skip
            with space_for(ckpt_dir, f"the group's checkpoint step_{done}"):
                engine.save_checkpoint(str(ckpt_dir), tag=f"step_{done}", client_state=client)
            _prune(ckpt_dir)  # the newest two, as train.train keeps
        if stop_after is not None and done >= stop_after:
            runs.fail(KeyboardInterrupt(), set(group.stopped))  # as a killed job leaves them
            return [o / "model.pt" for o in outs]
        if deadline is not None and time.monotonic() >= deadline and done < cfg.steps:
            for r in map(int, group.active.nonzero().flatten()):
                group.stop(r, done, "budget")
                runs.finish(r, write_member(fused, group, r, done, "budget"), done, "budget")
            break
    for r in map(int, group.active.nonzero().flatten()):
        runs.finish(r, write_member(fused, group, r, cfg.steps, "steps"), cfg.steps, "steps")
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    return [o / "model.pt" for o in outs]


def main(argv: list[str] | None = None) -> None:
    """CLI: python -m lengen.train.group --spec A.json ... --out DIR_A ..."""
    parser = argparse.ArgumentParser(prog="python -m lengen.train.group",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--spec", nargs="+", help="each run's spec (JSON file or string)")
    parser.add_argument("--specs", help="every run's spec in one JSON list (the workflow's)")
    parser.add_argument("--out", nargs="+", required=True, type=Path, help="each run's folder")
    args = parser.parse_args(argv)
    if bool(args.spec) == bool(args.specs):
        parser.error("give either --spec (one per run) or --specs (a JSON list)")
    specs = json.loads(args.specs) if args.specs else [read_spec(s) for s in args.spec]
    runtime.exit_on_signals(args.out)  # SIGTERM: a line naming it, every member's run closed
    train_group([parse_spec(s) for s in specs], args.out)


if __name__ == "__main__":
    main()
