"""One trainer for every experiment: DeepSpeed engine, AdamW, warm-up + decay schedule, loss on
scored tokens only, periodic checkpoints with resume, MLflow logging (App. E "Shared model").

Run as `python -m lengen.train.train --spec spec.json --out DIR` (one process on CPU, or under the
`deepspeed` launcher for several GPUs). The spec holds the task, model, train, runtime and tracking
sections of one run; see lengen.core.specs for how the Snakefile builds it and for its typed form
(`Spec`), parsed once here.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch
from tqdm import tqdm

from lengen import tasks
from lengen.core import provenance, tracking
from lengen.core.batch import IGNORE, VALID_STREAM, step_rng
from lengen.core.cli import command_parser
from lengen.core.files import UnreadableState, read_state, space_for, write_text_atomic
from lengen.core.specs import Spec, SpecError, TrainSpec, read_spec
from lengen.model.model import GPTNeoX, ModelConfig
from lengen.model.modelfile import write_model_file
from lengen.tasks import parse_spec
from lengen.train import runtime
from lengen.train.loss import training_loss


def lr_lambda(train: TrainSpec):
    """Multiplier of the peak lr at each step: linear warm-up, then linear/cosine/constant."""
    warm, total, floor = train.warmup_steps, train.steps, train.min_lr_ratio

    def f(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        if train.schedule == "constant":
            return 1.0
        frac = min(1.0, (step - warm) / max(1, total - warm))
        if train.schedule == "linear":
            return floor + (1 - floor) * (1 - frac)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * frac))

    return f


class EarlyStop:
    """`train.early_stop`: stop once held-out exact match >= target at `patience` checks in a row
    (not before min_steps), or at the plateau budget when still below plateau_accuracy.

    The held-out set is fixed (seed, streams VALID_STREAM + i) and comes from the training
    distribution at its final curriculum stage: `n_draws` training batches (each of one length
    drawn from the training range) of n_examples / n_draws examples, at the test's position IDs
    where the task defines `heldout_example`; it never sees a test length.
    """

    def __init__(self, spec: Spec, task, device):
        self.cfg = spec.train.early_stop
        draws = self.cfg.n_draws
        draw_spec = spec.with_batch_size(max(1, self.cfg.n_examples // draws))
        last = spec.train.steps
        heldout = getattr(task, "heldout_example", None)  # a test-time view, where a task has one
        rngs = [step_rng(spec.seed, 0, VALID_STREAM + i) for i in range(draws)]
        self.draws = [
            (
                heldout(draw_spec, rng) if heldout else task.train_batch(draw_spec, rng, last)
            ).model_inputs(device)
            for rng in rngs
        ]
        self.streak = 0

    def due(self, done: int) -> bool:
        """Whether step `done` is a check step."""
        return done % self.cfg.every == 0

    @torch.no_grad()
    def accuracy(self, module) -> float:
        """Fraction of held-out examples with every scored token (and PPC ID) right (teacher-
        forced: each prediction from the true prefix)."""
        was_training = module.training
        module.eval()
        right = total = 0
        for inputs in self.draws:
            out = module(inputs["input_ids"], inputs["position_ids"])
            outputs = out if isinstance(out, tuple) else (out,)
            labels = (inputs["labels"], inputs["position_labels"])[: len(outputs)]
            ok = torch.ones(len(inputs["labels"]), dtype=torch.bool, device=labels[0].device)
            for logits, lab in zip(outputs, labels, strict=True):
                scored = lab != IGNORE
                ok &= ((logits.argmax(-1) == lab) | ~scored).all(dim=1)
            right, total = right + int(ok.sum()), total + len(ok)
        module.train(was_training)
        return right / total

    def update(self, acc: float, done: int) -> str | None:
        """Record one check at step `done`; the reason to stop now, or None."""
        cfg = self.cfg
        self.streak = self.streak + 1 if acc >= cfg.target_accuracy else 0
        if self.streak >= cfg.patience and done >= cfg.min_steps:
            target, patience = cfg.target_accuracy, cfg.patience
            return f"held-out exact match >= {target} at {patience} checks in a row"
        budget = cfg.plateau_steps
        if budget and done >= budget and acc < cfg.plateau_accuracy:
            return f"did not learn in {done} steps (held-out exact match {acc:.2f})"
        return None


def build_model(spec: Spec) -> GPTNeoX:
    """The spec's model, with weights drawn from the spec's seed."""
    torch.manual_seed(spec.seed)
    task = tasks.get(spec.experiment)
    return GPTNeoX(ModelConfig(vocab_size=task.vocab_size(spec), **spec.model))


def make_engine(spec: Spec, model: GPTNeoX):
    """DeepSpeed engine wrapping the model with a client AdamW and the lr schedule. On CUDA the
    AdamW is torch's fused one (one kernel for all parameters); on CPU the default (foreach)
    implementation, whose results the committed CPU tables were made with."""
    train = spec.train
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=train.lr,
        weight_decay=train.weight_decay,
        betas=train.betas,
        fused=True if spec.runtime.device == "cuda" else None,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(train))
    return runtime.deepspeed_engine(spec, model, optimizer, scheduler)


KEEP_CHECKPOINTS = 2  # a checkpoint cut off by a kill never leaves the run without a good one


def _checkpoint_tags(ckpt_dir: Path) -> list[str]:
    """Checkpoint tags (step_N directories), newest first."""
    tags = [p.name for p in ckpt_dir.glob("step_*") if p.is_dir()]
    return sorted(tags, key=lambda t: int(t.removeprefix("step_")), reverse=True)


def _readable(tag_dir: Path) -> str | None:
    """None if every file of a checkpoint loads, else what is wrong with the first that does
    not (a checkpoint cut off by a kill, a full disk)."""
    files = sorted(tag_dir.glob("*.pt"))
    if not files:
        return "no *.pt files"
    for f in files:
        try:
            torch.load(f, map_location="cpu", weights_only=False)
        except Exception as err:  # noqa: BLE001 - any unreadable file disqualifies the tag
            return f"{f.name}: {type(err).__name__}: {err}"
    return None


def _resume_tag(ckpt_dir: Path, log) -> str | None:
    """Newest checkpoint whose files all load; unreadable ones are named in the log and
    skipped (an older one, or a fresh start, instead)."""
    for tag in _checkpoint_tags(ckpt_dir):
        problem = _readable(ckpt_dir / tag)
        if problem is None:
            return tag
        log(f"checkpoint {ckpt_dir / tag} is unreadable ({problem}); trying an older one")
    if ckpt_dir.exists() and any(ckpt_dir.iterdir()):
        log(f"no readable checkpoint in {ckpt_dir}: training from step 0")
    return None


def _prune(ckpt_dir: Path) -> None:
    """Keep the newest KEEP_CHECKPOINTS checkpoint tags, remove the rest."""
    for tag in _checkpoint_tags(ckpt_dir)[KEEP_CHECKPOINTS:]:
        shutil.rmtree(ckpt_dir / tag, ignore_errors=True)


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


class NonFiniteLoss(FloatingPointError):
    """Training diverged: a loss is infinite or NaN (no model.pt is written; the run is FAILED)."""


def check_finite(losses: list[float], step: int, spec: Spec, out: Path) -> None:
    """Raise NonFiniteLoss naming the step, the run and its lr when a loss is not finite."""
    bad = [x for x in losses if not math.isfinite(x)]
    if bad:
        raise NonFiniteLoss(
            f"{spec.run_name} ({out}): training loss {bad[0]} at step {step}: the run diverged "
            f"(train.lr = {spec.train.lr:g}, train.grad_clip = {spec.train.grad_clip:g}); lower "
            "the lr or check the data, then rerun (no model was written)"
        )


def forget_other_spec(out: Path, spec: Spec, log) -> None:
    """A folder last used by a different spec (a changed value or seed, then a rerun) starts a
    new run; the old spec's model.pt, spec.json and MLflow run id move to replaced/<its run id>/
    (its MLflow run, which stays as it was, has its model_path tag pointed there), so nothing
    trained is lost; its checkpoints go. Only the same spec resumes."""
    old = out / "spec.json"
    if not old.exists():
        return
    try:
        same = json.loads(read_state(old, "the spec this folder trained")) == json.loads(
            json.dumps(spec.source)
        )
    except json.JSONDecodeError as err:  # cut, not another spec: never a reason to delete
        raise UnreadableState(
            f"{old}: not readable JSON ({err}); it was cut by a kill or a full disk. Delete it "
            "to resume from this folder's checkpoints (ckpt/), which are kept"
        ) from None
    if same:
        return
    run_file = out / "mlflow_run_id"
    run_id = read_state(run_file, "the old spec's MLflow run id") if run_file.exists() else None
    keep = out / "replaced" / (run_id or provenance.config_hash(json.loads(old.read_text())))
    keep.mkdir(parents=True, exist_ok=True)
    for name in ("model.pt", "spec.json", "mlflow_run_id"):
        if (out / name).exists():
            os.replace(out / name, keep / name)
    shutil.rmtree(out / "ckpt", ignore_errors=True)
    if run_id and (keep / "model.pt").exists():
        moved = {"model_path": (keep / "model.pt").resolve()}
        tracking.set_run_tags(spec.tracking.uri, run_id, moved)
    log(f"{old}: another spec trained here before; starting a new run (the old one's model and "
        f"MLflow run id kept in {keep})")


def micro_batch_spec(spec: Spec, engine) -> Spec:
    """The spec with batch_size set to one process's micro-batch (batch / processes / accum)."""
    import torch.distributed as dist

    accum = engine.gradient_accumulation_steps()
    return spec.with_batch_size(spec.train.batch_size // (dist.get_world_size() * accum))


class Batches:
    """This process's micro-batches of each step, made on the host. Each is drawn from (seed,
    step, stream), stream = rank * accum + m, so a step's batch is fixed by the seed and the
    process layout, whatever order the batches are made in. With `prefetch` (on by default where
    the device is CUDA), a worker thread makes step s + 1's batches while step s runs on the
    device, in pinned host memory so their copies to the device are non-blocking (issue: the
    host off the critical path)."""

    def __init__(self, task, spec: Spec, engine, prefetch: bool | None = None):
        import torch.distributed as dist

        self.task, self.spec = task, spec
        self.rank_spec = micro_batch_spec(spec, engine)
        self.accum = engine.gradient_accumulation_steps()
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.id_limit, self.device = engine.module.cfg.id_limit, engine.device
        self.pin = torch.device(self.device).type == "cuda"
        prefetch = self.pin if prefetch is None else prefetch
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="batches") if prefetch else None
        self.ahead: dict[int, Future] = {}

    def host(self, step: int) -> list[tuple[dict[str, torch.Tensor], int]]:
        """Step's micro-batches as host tensors, each with its count of unpadded tokens."""
        made = []
        for m in range(self.accum):
            rng = step_rng(self.spec.seed, step, self.rank * self.accum + m)
            example = self.task.train_batch(self.rank_spec, rng, step)
            real = example.tokens[:, :-1].size  # tokens fed, not counting bucket padding
            example = example.padded(self.spec.train.length_buckets)
            inputs = example.model_inputs("cpu", self.id_limit)
            if self.pin:
                inputs = {k: v.pin_memory() for k, v in inputs.items()}
            made.append((inputs, real))
        return made

    def get(self, step: int) -> list[tuple[dict[str, torch.Tensor], int]]:
        """Step's micro-batches on the device; starts making step + 1's when prefetching."""
        future = self.ahead.pop(step, None)
        made = future.result() if future is not None else self.host(step)
        if self.pool is not None:
            self.ahead = {step + 1: self.pool.submit(self.host, step + 1)}
        return [
            ({k: v.to(self.device, non_blocking=self.pin) for k, v in inputs.items()}, real)
            for inputs, real in made
        ]

    def close(self) -> None:
        """Stop the worker (a batch made ahead for a step that never runs is dropped)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.ahead = {}


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


class LossWindow:
    """The training losses since the last log, kept on the device until checked: `check` (one
    host sync) runs before a checkpoint and at the end, where a non-finite loss stops the run
    (check_finite) before anything is written from its weights; `take`, at each log_every step,
    checks too and hands over every loss since the last take (checked ones included)."""

    def __init__(self):
        self.pending: list[tuple[int, torch.Tensor]] = []  # (step, its micro-batch losses)
        self.values: list[float] = []  # checked, not yet taken

    def add(self, step: int, losses: torch.Tensor) -> None:
        self.pending.append((step, losses))

    def check(self, spec: Spec, out: Path) -> None:
        """Read the pending losses (checked finite, naming the first bad step)."""
        if not self.pending:
            return
        rows = torch.stack([losses for _, losses in self.pending]).tolist()  # the one host sync
        for (step, _), row in zip(self.pending, rows, strict=True):
            check_finite(row, step, spec, out)
            self.values += row
        self.pending = []

    def take(self, spec: Spec, out: Path) -> list[float]:
        """Every loss since the last take, checked; empties the window."""
        self.check(spec, out)
        values, self.values = self.values, []
        return values


def _train(spec: Spec, out: Path, stop_after: int | None) -> Path:
    """train's body."""
    import torch.distributed as dist

    runtime.setup(spec.runtime)
    out.mkdir(parents=True, exist_ok=True)
    ckpt_dir = out / "ckpt"
    model = build_model(spec)
    engine = make_engine(spec, model)
    runtime.compile_engine(engine, spec.runtime)
    rank = dist.get_rank()
    if rank == 0:
        forget_other_spec(out, spec, lambda msg: print(msg, file=sys.stderr, flush=True))
    dist.barrier()
    device = engine.device
    task = tasks.get(spec.experiment)
    train_cfg = spec.train
    start = 0
    stopper = EarlyStop(spec, task, device) if train_cfg.early_stop else None
    tag = _resume_tag(ckpt_dir, lambda msg: print(msg, file=sys.stderr, flush=True))
    if tag is not None:
        _, client = engine.load_checkpoint(str(ckpt_dir), tag=tag)
        start = client["step"]
        print(f"resumed from {ckpt_dir / tag} (step {start})", file=sys.stderr, flush=True)
        if stopper is not None:
            stopper.streak = client.get("early_stop_streak", 0)
    if rank == 0:
        _open_run(spec, out, model, resumed=start > 0)
    bar = tqdm(
        range(start, train_cfg.steps),
        initial=start,
        total=train_cfg.steps,
        desc=spec.run_name,
        disable=rank != 0 or not spec.runtime.progress,
        mininterval=5,
    )
    batches = Batches(task, spec, engine)
    try:
        return _loop(spec, out, engine, stopper, batches, bar, stop_after)
    finally:
        batches.close()


def _loop(spec: Spec, out: Path, engine, stopper, batches: Batches, bar, stop_after) -> Path:
    """_train's steps, logging, early stop, checkpoints and the final model."""
    import torch.distributed as dist

    rank, ckpt_dir, steps = dist.get_rank(), out / "ckpt", spec.train.steps
    every, ckpt_every = spec.train.log_every, spec.train.checkpoint_every
    window, tokens, t0 = LossWindow(), 0, time.perf_counter()
    steps_run, stop_reason = steps, "steps"
    for step in bar:
        losses, fed = train_step(engine, batches, step)
        done = step + 1
        window.add(done, losses)
        tokens += fed
        if done % every == 0 or done == steps:
            rate = tokens / (time.perf_counter() - t0)
            values = window.take(spec, out)
            metrics = {
                "train_loss": sum(values) / len(values),
                "lr": engine.get_lr()[0],
                "tokens_per_s": rate,
            }
            if rank == 0:
                tracking.log_metrics(metrics, done)
                bar.set_postfix(loss=f"{metrics['train_loss']:.3f}")
            tokens, t0 = 0, time.perf_counter()
        if stopper is not None and stopper.due(done):
            acc = stopper.accuracy(engine.module)
            if rank == 0:
                tracking.log_metrics({"heldout_exact_match": acc}, done)
            reason = stopper.update(acc, done)
            if reason and done < steps:
                steps_run, stop_reason = done, reason
                bar.write(f"early stop at step {done}: {stop_reason}")
                break
        if done % ckpt_every == 0 and done < steps:
            window.check(spec, out)  # no checkpoint of a diverged run
            client = {"step": done, "early_stop_streak": stopper.streak if stopper else 0}
            with space_for(ckpt_dir, f"checkpoint step_{done}"):  # a full disk, named
                engine.save_checkpoint(str(ckpt_dir), tag=f"step_{done}", client_state=client)
            if rank == 0:
                _prune(ckpt_dir)
        if stop_after is not None and done >= stop_after:
            window.check(spec, out)
            if rank == 0:
                tracking.end_run()
            return out / "model.pt"
    window.check(spec, out)  # an early stop leaves steps since the last log unread
    path = out / "model.pt"
    if rank == 0:
        tracking.log_metrics({"stopped_at": steps_run}, steps_run)
        tracking.set_tags({"early_stop": stop_reason})
        _save_final(engine, spec, path, steps_run, stop_reason)
        tracking.set_tags(  # the model itself stays on disk; MLflow holds where and which
            {"model_path": str(path.resolve()), "model_sha256": provenance.file_sha256(path)}
        )
        tracking.end_run()
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    return path


def _open_run(spec: Spec, out: Path, model: GPTNeoX, resumed: bool) -> None:
    """Write the spec's JSON beside the run and start (or resume) its MLflow run."""
    write_text_atomic(out / "spec.json", json.dumps(spec.source, indent=2, sort_keys=True))
    trk = spec.tracking
    tracking.start_run(trk.uri, trk.experiment, spec.run_name, out / "mlflow_run_id")
    if not resumed:
        tracking.log_params_once(spec.source, model)
        tracking.set_tags(provenance.record(spec.source, spec.seed))


def _save_final(engine, spec: Spec, path: Path, steps_run: int, stop_reason: str) -> None:
    """Final fp32 weights (from the DeepSpeed engine), readable without DeepSpeed."""
    with space_for(path, "the model file"):
        write_model_file(engine.module, spec, path, steps_run, stop_reason)


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
