"""A group of training runs of one shape trained as one fused model
(lengen.model.fused): one DeepSpeed engine, one optimizer step per step for every run, each run
with its own seed-drawn weights and data stream, its own gradient clipping, its own early or
plateau stop (a stopped run stops changing), and its own model.pt, so that every later stage
(evaluation, tables, figures, the report) sees the files the runs trained one by one would have
written. tests/test_group.py checks that a group gives each run's weights and stopping point as
train.train does alone.

    python -m lengen.train.group --spec A.json B.json ... --out DIR_A DIR_B ...
    python -m lengen.train.group --specs '[{...}, {...}]' --out DIR_A DIR_B   (the workflow's)

The life cycle (engine, schedule, checkpoints and resume, stops, MLflow) is the one a run alone
goes through (lengen.train.lifecycle.fit); this module is only what a fused group adds to it, the
`Fused` trainee. The group checkpoints itself (DIR_A/group_ckpt: every run's weights and AdamW
moments, the step, which runs stopped and why) and resumes from there. Each member keeps its own
MLflow run (its folder's mlflow_run_id, as train.train writes it), which its evaluation then
resumes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from lengen import tasks
from lengen.core.batch import step_rng
from lengen.core.cli import one_line_errors
from lengen.core.files import GROUP_CHECKPOINTS, space_for
from lengen.core.specs import Spec, read_spec
from lengen.model.fused import LAYOUT, FusedGPTNeoX
from lengen.model.modelfile import write_model_file
from lengen.tasks import parse_spec
from lengen.train import runtime
from lengen.train.lifecycle import (
    HostBatches,
    Member,
    build_model,
    fit,
    forget_other_checkpoints,
    forget_other_spec,
    log,
    make_engine,
    restore_finished,
)
from lengen.train.loss import scored_run_losses, training_loss

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
    never scored and the model is causal, so each run's loss is its batch's alone. (R, B, T),
    and each run's tokens fed, not counting the padding."""
    drawn = [task.train_batch(s, step_rng(s.seed, step, 0), step) for s in specs]
    real = [e.tokens[:, :-1].size for e in drawn]
    examples = [e.padded(buckets) for e in drawn]
    longest = max(e.tokens.shape[1] for e in examples)
    inputs = [e.padded((longest,)).model_inputs("cpu", id_limit) for e in examples]
    return {k: torch.stack([x[k] for x in inputs]) for k in inputs[0]}, real


def run_losses(output, inputs: dict, chunk: int) -> torch.Tensor:
    """Each run's training loss on its own scored tokens (R,): training_loss of each run, in one
    cross-entropy per head for the whole group (loss.scored_run_losses); run by run where a
    run's batch is chunked (chunk: runtime.loss_chunk_tokens, as training_loss chunks it)."""
    outs = output if isinstance(output, tuple) else (output,)
    runs, rows, length = outs[0].shape[:3]
    if chunk and rows * length > chunk:
        return torch.stack(
            [
                training_loss(
                    tuple(o[r] for o in outs) if len(outs) > 1 else outs[0][r],
                    {k: v[r] for k, v in inputs.items()},
                    chunk,
                )
                for r in range(runs)
            ]
        )
    losses = scored_run_losses(outs[0], inputs["labels"])
    if len(outs) > 1:  # the PPC head's position loss, as training_loss adds it (Sec. 5.2)
        losses = losses + scored_run_losses(outs[1], inputs["position_labels"])
    return losses


class GroupBatches(HostBatches):
    """Each step's one fused micro-batch (group_batch), made ahead on CUDA."""

    def __init__(
        self, task, specs: list[Spec], fused: FusedGPTNeoX, device, prefetch: bool | None = None
    ):
        super().__init__(device, prefetch)
        self.task, self.specs, self.id_limit = task, specs, fused.cfg.id_limit

    def host(self, step: int) -> list[tuple[dict[str, torch.Tensor], list[int]]]:
        buckets = self.specs[0].train.length_buckets
        inputs, real = group_batch(self.task, self.specs, step, buckets, self.id_limit)
        return [(self.pinned(inputs), real)]


class Fused:
    """R runs trained as one FusedGPTNeoX (lifecycle.Trainee): one process, one micro-batch per
    step, each run's own loss and gradient clipping (FusedGPTNeoX.clip_run_grads_; the engine's
    global-norm clipping is off); a stopped run's weights and AdamW moments are put back after
    each step (it stops changing: frozen_state)."""

    lead = True  # one process

    def __init__(self, specs: list[Spec], outs: list[Path]):
        self.specs, self.outs = specs, outs
        self.fused = FusedGPTNeoX([build_model(s) for s in specs])
        self.engine = make_engine(specs[0], self.fused, engine_clips=False)
        if self.engine.gradient_accumulation_steps() != 1:
            raise ValueError(
                "a fused group trains one micro-batch per step (train.micro_batch_size)"
            )
        self.active = torch.ones(len(specs), dtype=torch.bool)  # which runs still train (host)
        # what the step reads of it, on the device, made when a run stops (freeze) and not in the
        # step: the mask its loss is weighted by and the stopped runs' indices (integers: a
        # boolean mask's indexing would read its count on the host), so that a step copies
        # nothing from the host but its pinned batch and reads no value back
        self.on_device = self.active.to(self.engine.device)
        self.stopped = None  # the stopped runs' indices on the device, once one has stopped
        self.fed = 0  # the last step's tokens fed, padding included (R x B x T)
        task = tasks.get(specs[0].experiment)
        self.batches = GroupBatches(task, specs, self.fused, self.engine.device)

    def step(self, step: int) -> tuple[torch.Tensor, list[int]]:
        """One optimizer step of every run still training: (R, 1) losses, each run's tokens."""
        [(inputs, real)] = self.batches.get(step)
        self.fed = inputs["input_ids"].numel()  # tokens fed, the padding included
        engine, fused, spec = self.engine, self.fused, self.specs[0]
        out = engine(inputs["input_ids"], inputs["position_ids"])
        losses = run_losses(out, inputs, spec.runtime.loss_chunk_tokens)
        engine.backward((losses * self.on_device).sum())
        fused.clip_run_grads_(spec.train.grad_clip)
        kept = self.frozen_state(self.stopped) if self.stopped is not None else []
        engine.step()
        with torch.no_grad():
            for tensor, rows in kept:
                tensor[self.stopped] = rows
        return losses.detach()[:, None], real

    def frozen_state(self, frozen: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The stopped runs' rows (`frozen`: their indices) of every stacked weight and of its
        AdamW moments, to put back after the step: a stopped run stops changing, moments
        included, so a checkpoint holds it as it stopped (weight decay and momentum would move
        it even at a zero gradient). Its forward and backward still run, masked, until the group
        ends: a stopped member costs its share of the step (docs/performance.md, "Fused runs")."""
        state = getattr(self.engine.optimizer, "state", {})
        kept = []
        for p in self.fused.weights.values():
            moments = [state[p][k] for k in ("exp_avg", "exp_avg_sq") if k in state.get(p, {})]
            for tensor in (p.data, *moments):
                kept.append((tensor, tensor[frozen]))  # index_select: a copy
        return kept

    def model(self, r: int) -> torch.nn.Module:
        return self.fused.member(r).to(self.engine.device)

    def write(self, r: int, steps_run: int, reason: str) -> Path:
        """Run r's model.pt in its own folder, as train.train writes it."""
        path = self.outs[r] / "model.pt"
        with space_for(path, "the model file"):
            write_model_file(self.fused.member(r), self.specs[r], path, steps_run, reason)
        return path

    def freeze(self, r: int) -> None:
        self.active[r] = False
        self.on_device = self.active.to(self.engine.device)  # once per stopped run, not per step
        self.stopped = torch.nonzero(~self.active).flatten().to(self.engine.device)

    def client_state(self) -> dict:
        return {"layout": LAYOUT}

    def load_client_state(self, client: dict, where: Path) -> None:
        """A checkpoint of another fused layout is refused (a square weight would load
        transposed, silently)."""
        if client.get("layout") != LAYOUT:
            raise RuntimeError(
                f"{where}: a group checkpoint of another fused layout "
                f"({client.get('layout', 'linear weights [R, out, in]')}; this code's: {LAYOUT}); "
                f"delete {where.parent} to train the group from its start"
            )

    def close(self) -> None:
        self.batches.close()


def train_group(
    specs: list[Spec | dict],
    outs: list[Path],
    stop_after: int | None = None,
    budget_s: float | None = None,
):
    """Train the runs as one fused group through the one life cycle (lengen.train.lifecycle.fit);
    write each run's model.pt. stop_after simulates a crash after that many steps (tests).
    budget_s, seconds of training: once spent, every active run ends at the step it reached, stop
    reason "budget" (a probe on a lent GPU's few minutes; the workflow never sets it, and its
    runs train their configured steps). Returns the model paths."""
    specs, outs = [parse_spec(s) for s in specs], [Path(o) for o in outs]
    if len(specs) != len(outs):
        raise ValueError(f"{len(specs)} specs but {len(outs)} output folders")
    check_group(specs)
    runtime.setup(specs[0].runtime)
    # a member finished already (a retry of a job cut after training; a member trained alone,
    # targeted by its own model.pt) is linked back, not trained again; the others train as a
    # group of their own (each run's weights are its own: the same as in the whole group)
    done = {
        o: r[0]
        for s, o in zip(specs, outs, strict=True)
        if (r := restore_finished([s], [o])) is not None
    }
    if len(done) == len(outs):
        return [done[o] for o in outs]
    if done:
        log(
            f"{len(done)} of the group's {len(outs)} runs finished already (restored, not "
            f"retrained); the other {len(outs) - len(done)} train as a group"
        )
    every = outs
    specs = [s for s, o in zip(specs, outs, strict=True) if o not in done]
    outs = [o for o in outs if o not in done]
    trainee, ckpt_dir = Fused(specs, outs), outs[0] / GROUP_CHECKPOINTS
    if any([forget_other_spec(o, s, ckpt_dir) for s, o in zip(specs, outs, strict=True)]):
        log(f"{ckpt_dir}: a member's spec changed; the group trains from its start")
    forget_other_checkpoints(ckpt_dir, specs, outs)
    members = [Member.of(s, o, trainee.engine.device) for s, o in zip(specs, outs, strict=True)]
    trained = fit(
        trainee,
        members,
        ckpt_dir,
        desc=f"group of {len(specs)}",
        stop_after=stop_after,
        budget_s=budget_s,
    )
    done |= dict(zip(outs, trained, strict=True))
    return [done[o] for o in every]


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: python -m lengen.train.group --spec A.json ... --out DIR_A ..."""
    parser = argparse.ArgumentParser(
        prog="python -m lengen.train.group", description=__doc__.splitlines()[0]
    )
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
