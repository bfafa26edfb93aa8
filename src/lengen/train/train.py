"""One trainer for every experiment: DeepSpeed engine, AdamW, warm-up + decay schedule, loss on
scored tokens only, periodic checkpoints with resume, MLflow logging (App. E "Shared model"). The
life cycle is lengen.train.lifecycle's, shared with a fused group (lengen.train.group); this
module is what a run alone adds to it: data parallel over processes, micro-batches accumulated.

Run as `python -m lengen.train.train --spec spec.json --out DIR` (one process on CPU, or under the
`deepspeed` launcher for several GPUs). The spec holds the task, model, train, runtime and tracking
sections of one run; see lengen.core.specs for how the Snakefile builds it and for its typed form
(`Spec`), parsed once here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from lengen import tasks
from lengen.core import tracking
from lengen.core.batch import step_rng
from lengen.core.cli import command_parser, one_line_errors
from lengen.core.files import CHECKPOINTS, space_for
from lengen.core.specs import Spec, SpecError, read_spec
from lengen.model.modelfile import write_model_file
from lengen.tasks import parse_spec
from lengen.train import runtime
from lengen.train.lifecycle import (
    EarlyStop,
    HostBatches,
    LossWindow,
    Member,
    NonFiniteLoss,
    build_model,
    fit,
    forget_other_checkpoints,
    forget_other_spec,
    lr_lambda,
    make_engine,
    restore_finished,
)
from lengen.train.loss import training_loss

# the life cycle's names a run alone is built from, importable from here as before the one
# life cycle (lengen.train.lifecycle) held them
__all__ = [
    "EarlyStop",
    "LossWindow",
    "NonFiniteLoss",
    "build_model",
    "lr_lambda",
    "make_engine",
    "Batches",
    "train",
    "train_step",
    "main",
]


def train(spec: Spec | dict, out: Path, stop_after: int | None = None) -> Path:
    """Train one model as the spec says (its JSON is parsed here, once); write out/model.pt;
    resume from out/ckpt if present.

    stop_after simulates a crash after that many steps (for tests); returns the model path. A
    run that raises, is interrupted or is terminated leaves its MLflow run FAILED or KILLED (a
    rerun resumes that run, from the newest readable checkpoint).
    """
    try:
        return _train(parse_spec(spec), out, stop_after)
    except BaseException as err:
        try:
            tracking.close_failed_run(err)
        except Exception as close_err:  # noqa: BLE001 - e.g. a full disk refuses the write too
            print(
                f"the MLflow run could not be closed ({type(close_err).__name__}: "
                f"{str(close_err).splitlines()[0][:200]}); it may still show RUNNING",
                file=sys.stderr,
                flush=True,
            )
        raise  # the first cause, not the store's complaint about it


def micro_batch_spec(spec: Spec, engine) -> Spec:
    """The spec with batch_size set to one process's micro-batch (batch / processes / accum)."""
    import torch.distributed as dist

    accum = engine.gradient_accumulation_steps()
    return spec.with_batch_size(spec.train.batch_size // (dist.get_world_size() * accum))


class Batches(HostBatches):
    """This process's micro-batches of each step. Each is drawn from (seed, step, stream), stream
    = rank * accum + m, so a step's batch is fixed by the seed and the process layout, whatever
    order the batches are made in (made ahead on CUDA: lifecycle.HostBatches)."""

    def __init__(self, task, spec: Spec, engine, prefetch: bool | None = None):
        import torch.distributed as dist

        super().__init__(engine.device, prefetch)
        self.task, self.spec = task, spec
        self.rank_spec = micro_batch_spec(spec, engine)
        self.accum = engine.gradient_accumulation_steps()
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.id_limit = engine.module.cfg.id_limit

    def host(self, step: int) -> list[tuple[dict[str, torch.Tensor], int]]:
        """Step's micro-batches as host tensors, each with its count of unpadded tokens."""
        made = []
        for m in range(self.accum):
            rng = step_rng(self.spec.seed, step, self.rank * self.accum + m)
            example = self.task.train_batch(self.rank_spec, rng, step)
            real = example.tokens[:, :-1].size  # tokens fed, not counting bucket padding
            example = example.padded(self.spec.train.length_buckets)
            made.append((self.pinned(example.model_inputs("cpu", self.id_limit)), real))
        return made


def train_step(engine, batches: Batches, step: int) -> tuple[torch.Tensor, int]:
    """One optimizer step: this process's micro-batches, each forward, loss and backward, with
    DeepSpeed stepping the optimizer on the last. Returns the micro-batch losses, on the device
    (reading them is a host sync: the caller does it once per log_every steps), and the tokens
    fed by all processes (bucket padding not counted)."""
    losses, tokens = [], 0
    for inputs, real in batches.get(step):
        loss = training_loss(
            engine(inputs["input_ids"], inputs["position_ids"]),
            inputs,
            batches.spec.runtime.loss_chunk_tokens,
        )
        engine.backward(loss)
        engine.step()
        losses.append(loss.detach())
        tokens += real * batches.world
    return torch.stack(losses), tokens


class Alone:
    """One model trained alone (lifecycle.Trainee): data parallel over the launcher's
    processes, micro-batches accumulated, DeepSpeed's clipping (one global norm)."""

    def __init__(self, spec: Spec, out: Path):
        import torch.distributed as dist

        self.spec, self.out = spec, out
        self.engine = make_engine(spec, build_model(spec))
        self.lead = dist.get_rank() == 0
        self.batches = Batches(tasks.get(spec.experiment), spec, self.engine)

    def step(self, step: int) -> tuple[torch.Tensor, list[int]]:
        losses, tokens = train_step(self.engine, self.batches, step)
        return losses[None], [tokens]

    def model(self, r: int) -> torch.nn.Module:
        return self.engine.module

    def write(self, r: int, steps_run: int, reason: str) -> Path:
        """Final fp32 weights (from the DeepSpeed engine), readable without DeepSpeed."""
        path = self.out / "model.pt"
        with space_for(path, "the model file"):
            write_model_file(self.engine.module, self.spec, path, steps_run, reason)
        return path

    def freeze(self, r: int) -> None:
        """Nothing to freeze: a run alone that stops ends its training."""

    def client_state(self) -> dict:
        return {}

    def load_client_state(self, client: dict, where: Path) -> None:
        """A run alone's checkpoint holds nothing beyond the step and its stop."""

    def close(self) -> None:
        self.batches.close()


def _train(spec: Spec, out: Path, stop_after: int | None) -> Path:
    """train's body: the run's folder claimed (another spec's moved aside), then the life cycle."""
    import torch.distributed as dist

    runtime.setup(spec.runtime)
    out.mkdir(parents=True, exist_ok=True)
    if (restored := restore_finished([spec], [out])) is not None:
        return restored[0]  # a retry of a job cut after its training: nothing to train
    alone, ckpt_dir = Alone(spec, out), out / CHECKPOINTS
    if alone.lead:
        forget_other_spec(out, spec, ckpt_dir)
        forget_other_checkpoints(ckpt_dir, [spec], [out])
    dist.barrier()
    member = Member.of(spec, out, alone.engine.device)
    return fit(alone, [member], ckpt_dir, desc=spec.run_name, stop_after=stop_after)[0]


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: python -m lengen.train.train --spec SPEC.json --out DIR."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument("--spec", required=True, help="JSON file or JSON string of the run spec")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument(
        "--local_rank", type=int, default=None, help="set by the deepspeed launcher"
    )
    args = parser.parse_args(argv)
    try:
        spec = parse_spec(read_spec(args.spec))
    except SpecError as err:
        parser.error(str(err))
    runtime.exit_on_signals(args.out)  # SIGTERM: a line naming it, the run ends KILLED
    train(spec, args.out)


if __name__ == "__main__":
    main()
