"""One training life cycle (App. E "Shared model"), for a run trained alone (lengen.train.train)
and for a fused group of runs (lengen.train.group): read top to bottom, it is

1. the engine: the model, AdamW and the warm-up + decay schedule in one DeepSpeed engine
   (`build_model`, `lr_lambda`, `make_engine`);
2. the host's batches, made a step ahead of the device on CUDA (`HostBatches`);
3. each member's own state: its loss window checked finite before anything is written from its
   weights (`LossWindow`), its early or plateau stop (`EarlyStop`), its MLflow run (`Runs`);
4. checkpoints, kept two deep, and resume from the newest readable one (`Checkpoints`); once
   every model is written, a hard link to each kept for a retry of a job cut after training
   (`keep_finished`, `restore_finished`);
5. the loop that runs them (`fit`).

What differs between the two is only the thing trained, a `Trainee`: one GPTNeoX (data parallel
over processes, micro-batches accumulated: train.Alone) or a FusedGPTNeoX of R runs (one
process, per-run clipping, a stopped run frozen: group.Fused). Everything the GPU work adds to a
step is written once, in a Trainee's `step`, or here for both.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import json
import math
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
from tqdm import tqdm

from lengen import tasks
from lengen.core import provenance, tracking
from lengen.core.batch import IGNORE, VALID_STREAM, step_rng
from lengen.core.cli import KnownError
from lengen.core.files import (
    FINISHED,
    MODEL,
    UnreadableState,
    read_state,
    space_for,
    write_text_atomic,
)
from lengen.core.specs import Spec, TrainSpec
from lengen.model.model import GPTNeoX, ModelConfig
from lengen.train import runtime


def log(message: str) -> None:
    """One line on stderr (the job's log), flushed."""
    print(message, file=sys.stderr, flush=True)


# 1. The engine ------------------------------------------------------------------------------


def build_model(spec: Spec) -> GPTNeoX:
    """The spec's model, with weights drawn from the spec's seed."""
    torch.manual_seed(spec.seed)
    task = tasks.get(spec.experiment)
    return GPTNeoX(ModelConfig(vocab_size=task.vocab_size(spec), **spec.model))


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


def make_engine(spec: Spec, module: torch.nn.Module, engine_clips: bool = True):
    """DeepSpeed engine wrapping `module` with a client AdamW and the lr schedule, compiled as
    `runtime.compile` says. On CUDA the AdamW is torch's fused one (one kernel for all
    parameters); on CPU torch's default there, the single-tensor loop (a few operators per
    weight: benchmarks/launches.py counts them), whose results the committed CPU tables were
    made with. engine_clips=False turns DeepSpeed's clipping (one global norm) off,
    for a module that clips per run itself (FusedGPTNeoX.clip_run_grads_)."""
    train = spec.train
    optimizer = torch.optim.AdamW(
        module.parameters(),
        lr=train.lr,
        weight_decay=train.weight_decay,
        betas=train.betas,
        fused=True if spec.runtime.device == "cuda" else None,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(train))
    if not engine_clips:
        spec = dataclasses.replace(spec, train=dataclasses.replace(train, grad_clip=0.0))
    engine = runtime.deepspeed_engine(spec, module, optimizer, scheduler)
    runtime.compile_engine(engine, spec.runtime)
    return engine


# 2. Batches ---------------------------------------------------------------------------------


class HostBatches:
    """A step's micro-batches, made on the host by `host(step)` (a subclass's: a list of
    (inputs: name -> CPU tensor, what the step counts of them)). With `prefetch` (on by default
    where the device is CUDA), a worker thread makes step s + 1's batches while step s runs on the
    device, in pinned host memory so their copies to the device are non-blocking: the host off the
    critical path. Each batch is drawn from (seed, step, stream), so what a step gets never
    depends on when it was made."""

    def __init__(self, device, prefetch: bool | None = None):
        self.device = device
        self.pin = torch.device(device).type == "cuda"
        prefetch = self.pin if prefetch is None else prefetch
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="batches") if prefetch else None
        self.ahead: dict[int, Future] = {}

    def host(self, step: int) -> list[tuple[dict[str, torch.Tensor], object]]:
        raise NotImplementedError

    def pinned(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The inputs in pinned memory where they go to a GPU (else as they are)."""
        return {k: v.pin_memory() for k, v in inputs.items()} if self.pin else inputs

    def get(self, step: int) -> list[tuple[dict[str, torch.Tensor], object]]:
        """Step's micro-batches on the device; starts making step + 1's when prefetching."""
        future = self.ahead.pop(step, None)
        made = future.result() if future is not None else self.host(step)
        if self.pool is not None:
            self.ahead = {step + 1: self.pool.submit(self.host, step + 1)}
        return [
            ({k: v.to(self.device, non_blocking=self.pin) for k, v in inputs.items()}, count)
            for inputs, count in made
        ]

    def close(self) -> None:
        """Stop the worker (a batch made ahead for a step that never runs is dropped)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.ahead = {}


# 3. Each member's state ---------------------------------------------------------------------


class NonFiniteLoss(KnownError, FloatingPointError):
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


class LossWindow:
    """One run's training losses since the last log, kept on the device until checked: `check`
    (one host sync) runs before a checkpoint and before a model is written, where a non-finite
    loss stops the run (check_finite) before anything is written from its weights; `take`, at
    each log_every step, checks too and hands over every loss since the last take (checked ones
    included)."""

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


@dataclass
class Member:
    """One run being trained: its spec and folder, its loss window, its early stop (None without
    `train.early_stop`), the tokens it was fed since the last log, and where and why it stopped
    (None while it trains)."""

    spec: Spec
    out: Path
    stopper: EarlyStop | None
    window: LossWindow = field(default_factory=LossWindow)
    tokens: int = 0
    last_loss: float = math.nan  # the mean training loss at the last log
    stopped: tuple[int, str] | None = None
    sha256: str | None = None  # its model.pt's, once written (hashed once: a paper model is GBs)

    @classmethod
    def of(cls, spec: Spec, out: Path, device) -> Member:
        """A run about to train: its held-out set drawn on `device` where it stops early."""
        stop = spec.train.early_stop
        return cls(spec, out, EarlyStop(spec, tasks.get(spec.experiment), device) if stop else None)


def forget_other_spec(out: Path, spec: Spec, ckpt_dir: Path) -> bool:
    """A folder last used by a different spec (a changed value or seed, then a rerun) starts a
    new run; the old spec's model.pt, spec.json and MLflow run id move to replaced/<its run id>/
    (its MLflow run has its model_path tag pointed there, and ends KILLED if a kill left it
    RUNNING), so nothing
    trained is lost; the checkpoints it trained (`ckpt_dir`: the run's, or its group's) go. Only
    the same spec resumes. True when it forgot one."""
    old = out / "spec.json"
    if not old.exists():
        return False
    delete = (
        f"Delete it to resume from the checkpoints in {ckpt_dir}, which are kept (they "
        "resume only into the spec that wrote them)"
    )
    try:
        written = json.loads(read_state(old, "the spec this folder trained", delete))
    except json.JSONDecodeError as err:  # cut, not another spec: never a reason to delete
        raise UnreadableState(
            f"{old}: not readable JSON ({err}); it was cut by a kill or a full disk. {delete}"
        ) from None
    if written == json.loads(json.dumps(spec.source)):
        return False
    keep = set_aside(out, spec, written)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    shutil.rmtree(out / FINISHED, ignore_errors=True)  # the old spec's (its model is in `keep`)
    log(
        f"{old}: another spec trained here before; starting a new run (the old one's model and "
        f"MLflow run id kept in {keep})"
    )
    return True


def set_aside(out: Path, spec: Spec, old_source: dict | None) -> Path | None:
    """Move an old spec's model.pt, spec.json and MLflow run id out of the way, to
    out/replaced/<its run id> (else <its spec's hash>); its MLflow run keeps its history, its
    model_path tag pointed there, and ends KILLED if a kill left it RUNNING. Where they went
    (None: nothing was there)."""
    names = [n for n in ("model.pt", "spec.json", "mlflow_run_id") if (out / n).exists()]
    if not names:
        return None
    run_file = out / "mlflow_run_id"
    run_id = (
        read_state(
            run_file,
            "the old spec's MLflow run id",
            "Delete it to keep the old spec's model without its MLflow run id",
        )
        if run_file.exists()
        else None
    )
    keep = out / "replaced" / (run_id or provenance.config_hash(old_source or {}))
    keep.mkdir(parents=True, exist_ok=True)
    for name in names:
        os.replace(out / name, keep / name)
    if run_id:
        model = keep / "model.pt"
        tracking.run_set_aside(
            spec.tracking.uri, run_id, keep.resolve(), model.resolve() if model.exists() else None
        )
    return keep


def forget_other_checkpoints(ckpt_dir: Path, specs: list[Spec], outs: list[Path]) -> bool:
    """Checkpoints resume only into the specs that wrote them. Each records its members' specs
    (`Checkpoints.SPECS`); a folder whose newest checkpoint records others (a spec.json deleted,
    then a value changed: forget_other_spec had nothing to compare) is removed, saying which
    value differs, and the run trains from its start; so is one that records none (written by
    code older than the committed references: not read). What the other specs left beside them
    (each member's MLflow run id: its steps are another spec's) is set aside as
    forget_other_spec does. True when it removed them. Lead process only."""
    ckpts = Checkpoints(ckpt_dir)
    tags = ckpts.tags()
    if not tags:
        return False
    written = ckpts.specs(tags[0])
    if written is None:
        why = "it records no spec: written by code older than the references"
    else:
        why = spec_change(written, spec_record(specs))
        if why is None:
            return False
    ckpts.remove()
    old = written or {}
    kept = [set_aside(o, s, old.get(s.run_name)) for s, o in zip(specs, outs, strict=True)]
    where = "; the old MLflow run ids kept in replaced/" if any(kept) else ""
    log(
        f"{ckpt_dir}: its checkpoints were written for another spec ({why}); training from step "
        f"0{where}"
    )
    return True


def spec_record(specs: list[Spec]) -> dict:
    """What a checkpoint records of the specs it is written for ({run name: spec}), and what
    forget_other_checkpoints compares it with."""
    return {s.run_name: s.source for s in specs}


def spec_change(old: dict, new: dict) -> str | None:
    """What differs between two {run name: spec} records, in a few words (None: the same)."""
    new = json.loads(json.dumps(new))  # as JSON reads it back: tuples are lists
    if old == new:
        return None
    if set(old) != set(new):
        return f"runs {sorted(old)}, now {sorted(new)}"
    diffs = []
    for name in new:
        was, now = tracking.flatten(old[name]), tracking.flatten(new[name])
        diffs += [
            f"{name} {k}: {was.get(k, '-')} -> {now.get(k, '-')}"
            for k in tracking.changed(was, now)
        ]
    return "; ".join(diffs[:3]) + (f"; {len(diffs) - 3} more" if len(diffs) > 3 else "")


class Runs:
    """Each member's own MLflow run: opened (or resumed, from its folder's mlflow_run_id) with the
    spec's params and provenance at the start, its metrics as it trains, its stop, model path
    and hash at its end; a failure or a kill closes every unfinished run FAILED or KILLED, never
    RUNNING. Only the lead process (rank 0) logs: elsewhere (`lead` False) every call is a no-op.
    """

    def __init__(
        self,
        members: list[Member],
        model: Callable[[], torch.nn.Module],
        resumed: bool,
        lead: bool = True,
        opened: list | None = None,
    ):
        """`model()`: a member's model, for the parameter count a new run's params log (built
        only then: a fused group's member is a copy). `opened`: a list this object joins before
        it opens a run, so the caller can close its runs whenever a signal lands (even between
        this constructor's return and the caller's next statement)."""
        from mlflow.tracking import MlflowClient

        self.members, self.ids, self.logged, self.clients = members, [], [], []
        if opened is not None:
            opened.append(self)
        if not lead:
            return
        counted = None if resumed else model()
        try:
            for m in members:
                m.out.mkdir(parents=True, exist_ok=True)
                write_text_atomic(
                    m.out / "spec.json", json.dumps(m.spec.source, indent=2, sort_keys=True)
                )
                trk = m.spec.tracking
                client = MlflowClient(tracking_uri=trk.uri)
                run = tracking.start_run(
                    trk.uri, trk.experiment, m.spec.run_name, m.out / "mlflow_run_id"
                )
                self.ids.append(run.info.run_id)
                self.clients.append(client)
                if not resumed:
                    tracking.log_params_once(m.spec.source, counted)
                    tracking.set_tags(provenance.record(m.spec.source, m.spec.seed))
                tracking.end_run()
            # after a resume, the steps since the last checkpoint are not logged twice
            self.logged = [
                tracking.logged_steps(m.spec.tracking.uri, i)
                for m, i in zip(members, self.ids, strict=True)
            ]
            for client, run_id in zip(self.clients, self.ids, strict=True):
                client.update_run(run_id, status="RUNNING")
        except BaseException as err:  # a SIGTERM while the runs open: none is left RUNNING
            tracking.close_failed_run(err)
            self.fail(err)
            raise

    def log(self, r: int, metrics: dict[str, float], step: int) -> None:
        if self.ids:
            tracking.log_run_metrics(self.clients[r], self.ids[r], metrics, step, self.logged[r])

    def finish(self, r: int, path: Path) -> None:
        """Member r's run ends FINISHED with its stop and its model file's path and hash; the file
        is registered as a version of the run's model (tracking.register_model)."""
        if not self.ids:
            return
        member = self.members[r]
        steps_run, reason = member.stopped
        self.log(r, {"stopped_at": steps_run}, steps_run)
        close_finished(
            self.clients[r],
            member.spec,
            self.ids[r],
            path,
            member.sha256 or provenance.file_sha256(path),
            reason,
        )

    def fail(self, err: BaseException, finished: set[int] = frozenset()) -> None:
        """Every run not in `finished` ends KILLED (an interrupt, a SIGTERM's exit) or FAILED; a
        store that refuses the write too (a full disk) is named on stderr, and the first cause
        stays the one raised."""
        status = "KILLED" if isinstance(err, KeyboardInterrupt | SystemExit) else "FAILED"
        # the cause's traceback keeps the frames it cut short alive, and with them a store
        # connection a signal stopped mid-transaction, whose lock would refuse the writes below:
        # their locals go first (the traceback itself stays, for the error raised after this)
        traceback.clear_frames(err.__traceback__)
        gc.collect()
        for r, (client, run_id) in enumerate(zip(self.clients, self.ids, strict=True)):
            if r in finished:
                continue
            try:
                client.set_terminated(run_id, status)
            except Exception as close_err:  # noqa: BLE001 - the store may be what failed
                log(
                    f"the MLflow run {run_id} could not be closed ({type(close_err).__name__}: "
                    f"{str(close_err).splitlines()[0][:200]}); it may still show RUNNING"
                )


def close_finished(client, spec: Spec, run_id: str, path: Path, sha: str, reason: str) -> None:
    """A run's end once its model.pt is written: the file registered as a version of the run's
    model (tracking.register_model), its stop, path and hash as tags, the run FINISHED."""
    trk = spec.tracking
    version = tracking.register_model(client, trk.experiment, spec.run_name, run_id, path, sha)
    for k, v in {
        "early_stop": reason,
        "model_path": tracking.recorded_path(trk.uri, path),
        "model_sha256": sha,
        "model_version": version,
    }.items():
        client.set_tag(run_id, k, v)
    client.set_terminated(run_id, "FINISHED")


# 4. Checkpoints -----------------------------------------------------------------------------


KEEP_CHECKPOINTS = 1  # written atomically (`save`): the newest whole one is all a resume needs
PARTIAL = ".partial"  # a checkpoint being written (a kill leaves it; it is never resumed from)


class Checkpoints:
    """A folder of DeepSpeed checkpoints, one step_N tag each. Each holds the engine (weights,
    AdamW moments, schedule) and a client state: the step, each member's early-stop streak and
    stop, and what the Trainee adds (`client_state`). A checkpoint is written under
    step_N.partial and renamed to step_N once whole, so a kill or a full disk mid-write never
    leaves a step_N that looks whole; the older one is removed only then. At most two are on the
    disk at once (the newest and the one being written; before, two kept and a third being
    written): for a group of 8 of the paper's model in bf16, 2 x ~16 GB, not 3 x
    (`lengen.config.config.checkpoint_mb`). Each also records the specs it was written for
    (SPECS: {run name: spec}, written inside it before the rename), and resumes only into those
    (forget_other_checkpoints)."""

    SPECS = "specs.json"

    def __init__(self, folder: Path, specs: dict | None = None):
        """`specs`: {run name: spec source} of the members this folder's checkpoints are for
        (only `save` needs it)."""
        self.folder, self.record = Path(folder), specs

    def tags(self) -> list[str]:
        """Checkpoint tags (whole step_N directories), newest first."""
        tags = [
            p.name
            for p in self.folder.glob("step_*")
            if p.is_dir() and p.name.removeprefix("step_").isdigit()
        ]
        return sorted(tags, key=lambda t: int(t.removeprefix("step_")), reverse=True)

    def unreadable(self, tag: str) -> str | None:
        """None if every file of a checkpoint loads, else what is wrong with the first that does
        not (a file damaged after it was written)."""
        files = sorted((self.folder / tag).glob("*.pt"))
        if not files:
            return "no *.pt files"
        for f in files:
            try:
                torch.load(f, map_location="cpu", weights_only=False)
            except Exception as err:  # noqa: BLE001 - any unreadable file disqualifies the tag
                return f"{f.name}: {type(err).__name__}: {err}"
        return None

    def resume_tag(self) -> str | None:
        """Newest checkpoint whose files all load; unreadable ones are named in the log and
        skipped (an older one, or a fresh start, instead); a write a kill cut off is removed."""
        self.remove_partial()
        for tag in self.tags():
            problem = self.unreadable(tag)
            if problem is None:
                return tag
            log(f"checkpoint {self.folder / tag} is unreadable ({problem}); trying an older one")
        if self.folder.exists() and any(self.folder.iterdir()):
            log(f"no readable checkpoint in {self.folder}: training from step 0")
        return None

    def specs(self, tag: str) -> dict | None:
        """The {run name: spec} a checkpoint was written for; None for one written before
        checkpoints recorded them, or whose record was cut."""
        try:
            return json.loads((self.folder / tag / self.SPECS).read_text())
        except (OSError, ValueError):
            return None

    def remove_partial(self) -> None:
        """Remove checkpoints whose writing was cut off (step_N.partial)."""
        for cut in self.folder.glob(f"step_*{PARTIAL}"):
            shutil.rmtree(cut, ignore_errors=True)

    def load(self, engine) -> tuple[str, dict] | None:
        """Load the newest readable checkpoint into the engine: (its tag, its client state)."""
        tag = self.resume_tag()
        if tag is None:
            return None
        _, client = engine.load_checkpoint(str(self.folder), tag=tag)
        return tag, client

    def save(self, engine, done: int, client: dict, lead: bool) -> None:
        """Checkpoint step `done` (every process: DeepSpeed's save is collective) under
        step_N.partial; the lead renames it step_N once whole (and points DeepSpeed's `latest`
        at it), then removes all but the newest KEEP_CHECKPOINTS."""
        import torch.distributed as dist

        tag = f"step_{done}"
        if lead:
            self.remove_partial()
        with space_for(self.folder, f"checkpoint {tag}"):  # a full disk, named
            engine.save_checkpoint(str(self.folder), tag=tag + PARTIAL, client_state=client)
            dist.barrier()  # every process's files are written
            if lead:  # a step_N already there (damaged, so training went back) is replaced
                write_text_atomic(
                    self.folder / (tag + PARTIAL) / self.SPECS,
                    json.dumps(self.record, sort_keys=True),
                )
                shutil.rmtree(self.folder / tag, ignore_errors=True)
                os.replace(self.folder / (tag + PARTIAL), self.folder / tag)
                write_text_atomic(self.folder / "latest", tag)
        if lead:
            for old in self.tags()[KEEP_CHECKPOINTS:]:
                shutil.rmtree(self.folder / old, ignore_errors=True)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


@functools.cache
def code_fingerprint() -> str:
    """A hash of every module a training can run (lengen's core, data, tasks, model and train
    packages, their sources byte for byte): a finished model is restored only into the code
    that trained it, so a changed trainer retrains, as the workflow's code trigger asks."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for package in ("core", "data", "tasks", "model", "train"):
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def keep_finished(members: list[Member]) -> None:
    """Once every member's model.pt is written (before the checkpoints go): a hard link to each
    in its folder's finished/ (no second copy on the disk) with a record of what trained it
    (spec, code, the file's hash, its stop). A job cut after this point (its evaluation, MLflow's
    last writes, a time limit), whose outputs Snakemake then removes, is finished on its retry
    without training (restore_finished). A file system without hard links keeps none."""
    for m in members:
        model, keep, part = m.out / MODEL, m.out / FINISHED, m.out / (FINISHED + ".partial")
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir()
        try:
            os.link(model, part / MODEL)
        except OSError as err:
            shutil.rmtree(part, ignore_errors=True)
            log(
                f"{model}: no hard link kept for a retry ({err.strerror}); a job cut after this "
                "point trains again"
            )
            return
        steps_run, reason = m.stopped
        record = {
            "spec": m.spec.source,
            "code": code_fingerprint(),
            "sha256": m.sha256 or provenance.file_sha256(model),
            "steps_run": steps_run,
            "stop_reason": reason,
        }
        write_text_atomic(part / "record.json", json.dumps(record, sort_keys=True))
        shutil.rmtree(keep, ignore_errors=True)
        os.replace(part, keep)


def restore_finished(specs: list[Spec], outs: list[Path]) -> list[Path] | None:
    """The members' model.pt paths where every member's finished/ holds a model of this spec and
    this code, whole (its hash as written), and its model.pt is missing or is that very file: a
    retry of a job cut after training. Each missing model.pt is linked back (the lead process),
    an MLflow run left unfinished is finished, and nothing trains. None otherwise: train."""
    found = []
    for spec, out in zip(specs, outs, strict=True):
        kept, model = out / FINISHED / MODEL, out / MODEL
        try:
            record = json.loads((out / FINISHED / "record.json").read_text())
        except (OSError, ValueError):
            return None
        same = record.get("spec") == json.loads(json.dumps(spec.source))
        if not same or record.get("code") != code_fingerprint() or not kept.is_file():
            return None
        if model.exists() and not os.path.samefile(model, kept):
            return None
        found.append((spec, out, kept, model, record))
    if any(provenance.file_sha256(kept) != record["sha256"] for _, _, kept, _, record in found):
        return None  # damaged since: train
    lead = int(os.environ.get("RANK", "0")) == 0
    for spec, out, kept, model, record in found if lead else []:
        if not model.exists():
            os.link(kept, model)
        log(
            f"{model}: restored from {kept} (trained to step {record['steps_run']}, stop: "
            f"{record['stop_reason']}, by this spec and code): the retry of a job cut after its "
            f"training; nothing trains (delete {out / FINISHED} to train it again)"
        )
        _finish_restored_run(spec, out, model, record)
    return [model for _, _, _, model, _ in found]


def _finish_restored_run(spec: Spec, out: Path, model: Path, record: dict) -> None:
    """A restored model's MLflow run, where the cut left it unfinished, ends FINISHED as Runs.finish
    ends it (its stop, the model file's path, hash and registered version)."""
    from mlflow.tracking import MlflowClient

    if not (out / "mlflow_run_id").is_file():
        return
    run_id = (out / "mlflow_run_id").read_text().strip()
    client = MlflowClient(tracking_uri=spec.tracking.uri)
    try:
        if client.get_run(run_id).info.status == "FINISHED":
            return
    except Exception:  # noqa: BLE001 - a store made anew: the run is not there to finish
        return
    client.log_metric(run_id, "stopped_at", record["steps_run"], step=record["steps_run"])
    close_finished(client, spec, run_id, model, record["sha256"], record["stop_reason"])


# 5. The loop --------------------------------------------------------------------------------


class Trainee(Protocol):
    """What `fit` trains: one model (train.Alone) or R runs fused (group.Fused)."""

    engine: object  # the DeepSpeed engine
    lead: bool  # whether this process logs and writes (rank 0)

    def step(self, step: int) -> tuple[torch.Tensor, list[int]]:
        """One optimizer step: each run's micro-batch losses (R, M), on the device (not read),
        and the tokens each run was fed (bucket padding not counted)."""

    def model(self, r: int) -> torch.nn.Module:
        """Run r's model, on the device, for its held-out check."""

    def write(self, r: int, steps_run: int, reason: str) -> Path:
        """Write run r's model.pt (lead only); its path."""

    def freeze(self, r: int) -> None:
        """Run r stopped: it stops changing from now on."""

    def client_state(self) -> dict:
        """What a checkpoint records beyond the step and the stops."""

    def load_client_state(self, client: dict, where: Path) -> None:
        """Check and take a resumed checkpoint's client state."""

    def close(self) -> None:
        """Release the batch worker."""


def fit(
    trainee: Trainee,
    members: list[Member],
    ckpt_dir: Path,
    *,
    desc: str,
    stop_after: int | None = None,
    budget_s: float | None = None,
) -> list[Path]:
    """Train every member to its end: from the newest readable checkpoint in ckpt_dir when there
    is one, each run logged to its own MLflow run, each stopped by its own early or plateau stop
    (writing its model.pt then), or at train.steps; the checkpoints are removed once every
    model.pt is written. stop_after simulates a crash after that many steps (tests): the runs end
    KILLED, as a killed job leaves them. budget_s, seconds of training: once spent, every active
    run ends at the step it reached, stop reason "budget" (a probe on a lent GPU's few minutes;
    the workflow never sets it). Returns the members' model paths."""
    ckpts = Checkpoints(ckpt_dir, spec_record([m.spec for m in members]))
    opened: list[Runs] = []  # the runs, from before they open (a SIGTERM lands anywhere)
    try:
        start = _resume(trainee, members, ckpts)
        runs = Runs(
            members, lambda: trainee.model(0), resumed=start > 0, lead=trainee.lead, opened=opened
        )
        return _loop(trainee, members, runs, ckpts, start, desc, stop_after, budget_s)
    except BaseException as err:
        for runs in opened:  # never left RUNNING: a signal between Runs() and the loop too
            runs.fail(err, {r for r, m in enumerate(members) if m.stopped})
        raise
    finally:
        trainee.close()


def _resume(trainee: Trainee, members: list[Member], ckpts: Checkpoints) -> int:
    """Load the newest readable checkpoint, if any, into the engine, the trainee and the members
    (streaks, stops); the step to go on from (0 without one)."""
    resumed = ckpts.load(trainee.engine)
    if resumed is None:
        return 0
    tag, client = resumed
    trainee.load_client_state(client, ckpts.folder / tag)
    log(f"resumed from {ckpts.folder / tag} (step {client['step']})")
    if "streaks" not in client or "stopped" not in client:  # code older than the references
        raise UnreadableState(
            f"{ckpts.folder / tag}: a checkpoint of code older than the committed references (no "
            f"early-stop streaks or stops recorded); delete {ckpts.folder} and rerun: the run "
            "trains from step 0"
        )
    streaks, stopped = client["streaks"], client["stopped"]
    for r, m in enumerate(members):
        if m.stopper is not None:
            m.stopper.streak = streaks[r]
        if str(r) in stopped:
            m.stopped = tuple(stopped[str(r)])
            trainee.freeze(r)
    return client["step"]


def _loop(
    trainee: Trainee,
    members: list[Member],
    runs: Runs,
    ckpts: Checkpoints,
    start: int,
    desc: str,
    stop_after,
    budget_s,
) -> list[Path]:
    """fit's steps, logging, stops, checkpoints and the final models."""
    cfg, lead = members[0].spec.train, trainee.lead
    deadline = None if budget_s is None else time.monotonic() + budget_s
    bar = tqdm(
        range(start, cfg.steps),
        initial=start,
        total=cfg.steps,
        desc=desc,
        mininterval=5,
        disable=not lead or not members[0].spec.runtime.progress,
    )
    training = [r for r, m in enumerate(members) if not m.stopped]
    t0 = time.perf_counter()
    for step in bar:
        runtime.exit_if_stopped()  # a SIGTERM whose exit a callback swallowed
        losses, fed = trainee.step(step)
        done = step + 1
        for r in training:
            members[r].window.add(done, losses[r])
            members[r].tokens += fed[r]
        if done % cfg.log_every == 0 or done == cfg.steps:
            elapsed, t0 = time.perf_counter() - t0, time.perf_counter()
            for r in training:
                _log_loss(members[r], runs, r, trainee.engine.get_lr()[0], elapsed, done)
            if lead and len(members) == 1:
                bar.set_postfix(loss=f"{members[0].last_loss:.3f}")
        if members[0].stopper is not None and members[0].stopper.due(done):
            for r in list(training):
                reason = _check_stop(trainee, members[r], runs, r, done)
                if reason and done < cfg.steps:
                    _end(trainee, members[r], runs, r, done, reason)
                    training.remove(r)
                    bar.write(f"{members[r].spec.run_name}: early stop at step {done}: {reason}")
        if not training:
            break
        if done % cfg.checkpoint_every == 0 and done < cfg.steps:
            for r in training:  # no checkpoint of a diverged run
                members[r].window.check(members[r].spec, members[r].out)
            ckpts.save(trainee.engine, done, _client_state(trainee, members, done), lead)
        if stop_after is not None and done >= stop_after:
            for r in training:
                members[r].window.check(members[r].spec, members[r].out)
            runs.fail(KeyboardInterrupt(), {r for r, m in enumerate(members) if m.stopped})
            return [m.out / "model.pt" for m in members]
        if deadline is not None and time.monotonic() >= deadline and done < cfg.steps:
            for r in training:
                _end(trainee, members[r], runs, r, done, "budget")
            training = []
            break
    for r in training:
        _end(trainee, members[r], runs, r, cfg.steps, "steps")
    if lead:
        keep_finished(members)  # before the checkpoints go: a retry always has one or the other
        ckpts.remove()
    return [m.out / "model.pt" for m in members]


def _log_loss(member: Member, runs: Runs, r: int, lr: float, elapsed: float, done: int) -> None:
    """Member r's mean training loss since the last log, the lr and its tokens per second."""
    values = member.window.take(member.spec, member.out)
    member.last_loss = sum(values) / len(values)
    rate, member.tokens = member.tokens / elapsed, 0
    runs.log(r, {"train_loss": member.last_loss, "lr": lr, "tokens_per_s": rate}, done)


def _check_stop(trainee: Trainee, member: Member, runs: Runs, r: int, done: int) -> str | None:
    """Member r's held-out check at step `done`, logged; the reason it stops now, or None."""
    acc = member.stopper.accuracy(trainee.model(r))
    runs.log(r, {"heldout_exact_match": acc}, done)
    return member.stopper.update(acc, done)


def _end(trainee: Trainee, member: Member, runs: Runs, r: int, steps_run: int, reason: str):
    """Member r stops here: its losses checked, it is frozen, its model.pt written and its MLflow
    run finished (the lead's part)."""
    member.window.check(member.spec, member.out)  # no model of a diverged run
    member.stopped = (steps_run, reason)
    trainee.freeze(r)
    if trainee.lead:
        path = trainee.write(r, steps_run, reason)
        member.sha256 = provenance.file_sha256(path)
        runs.finish(r, path)


def _client_state(trainee: Trainee, members: list[Member], done: int) -> dict:
    """A checkpoint's client state: the step, each member's streak and stop, the trainee's own."""
    return {
        "step": done,
        "streaks": [m.stopper.streak if m.stopper else 0 for m in members],
        "stopped": {str(r): list(m.stopped) for r, m in enumerate(members) if m.stopped},
        **trainee.client_state(),
    }
