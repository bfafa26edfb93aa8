"""The model file, model.pt: what `lengen.train.train` writes at the end of a run and how every
later stage (evaluation, perplexity, leave-one-out, attention, probes) reads it back, checked,
without importing the trainer or DeepSpeed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from lengen.core import provenance
from lengen.core.cli import KnownError
from lengen.model.model import GPTNeoX, ModelConfig

if TYPE_CHECKING:
    from lengen.core.specs import Spec


def write_model_file(
    model: GPTNeoX, spec: Spec, path: Path, steps_run: int, stop_reason: str
) -> None:
    """model.pt: fp32 weights, model config, the job's spec (its JSON, `Spec.source`), its
    provenance, and the steps actually run with why training stopped (train.early_stop)."""
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    config = model.cfg.to_dict()
    prov = provenance.record(spec.source, spec.seed)
    torch.save(
        {
            "model_config": config,
            "state_dict": state,
            "spec": spec.source,
            "provenance": prov,
            "steps_run": steps_run,
            "stop_reason": stop_reason,
        },
        path,
    )


MODEL_KEYS = ("model_config", "state_dict", "spec", "steps_run", "stop_reason")


class ModelFileError(KnownError, RuntimeError):
    """A model.pt that `train` did not finish writing, or that is not one of its files."""


def read_model_file(path: str | Path, device: str = "cpu") -> dict:
    """The dict `train` saved in model.pt, checked: loadable and with MODEL_KEYS; otherwise an
    error naming the file and what to do."""
    path = Path(path)
    fix = f"delete {path} and rerun the rule that trains it"
    try:
        saved = torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise ModelFileError(f"{path}: missing (train it first)") from None
    except Exception as err:  # noqa: BLE001 - truncated zip, bad pickle, wrong file
        raise ModelFileError(f"{path}: unreadable ({type(err).__name__}: {err}); {fix}") from err
    missing = [k for k in MODEL_KEYS if not isinstance(saved, dict) or k not in saved]
    if missing:
        raise ModelFileError(
            f"{path}: not a model file of this code (missing {missing}: another "
            f"file, or one of code older than the references); {fix}"
        )
    check_bound(path, saved["spec"], fix)
    return saved


def _named(spec: dict) -> str:
    """A spec as an error names it: its run and the hash of its science."""
    return f"{spec.get('run_name', '?')} (spec hash {provenance.config_hash(spec)})"


def check_bound(path: Path, spec: dict, fix: str) -> None:
    """A model file is bound to its run: where its folder holds the spec.json that training
    wrote, the spec saved inside model.pt must be that one (a model.pt copied from another
    run's folder, or left by an older spec, is refused, one line naming both). A folder without
    spec.json (a model directory of one's own, `lengen influence`) is not checked."""
    beside = path.parent / "spec.json"
    if not beside.is_file():
        return
    try:
        folder = json.loads(beside.read_text())
    except (OSError, ValueError) as err:
        raise ModelFileError(
            f"{beside}: unreadable ({type(err).__name__}: {err}); delete it "
            "and rerun the rule that trains it"
        ) from err
    if json.dumps(folder, sort_keys=True) == json.dumps(spec, sort_keys=True):
        return
    if spec.get("run_name") != folder.get("run_name"):  # another run's model, copied in
        raise ModelFileError(
            f"{path}: trained for {_named(spec)}, but its folder's spec.json "
            f"is {_named(folder)}: a model file of another run; {fix}"
        )
    keys = ", ".join(_differing(spec, folder)) or "its values"
    raise ModelFileError(
        f"{path}: trained for {_named(spec)}, but its folder's spec.json, of the same run, "
        f"differs in {keys} ({_named(folder)}). If spec.json was edited or copied in, delete "
        f"{beside}: the model keeps its own spec and nothing retrains. If the config changed "
        "since, rerun the rule that trains it: Snakemake reruns a training whose spec changed, "
        "and the old model is kept in replaced/"
    )


def _differing(a: dict, b: dict, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two specs."""
    found = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            found += _differing(x, y, f"{prefix}{key}.")
        elif x != y:
            found.append(f"{prefix}{key}")
    return found


def load_model(path: str | Path, device: str = "cpu") -> GPTNeoX:
    """Model saved by `train`, in eval mode."""
    return model_from_saved(read_model_file(path, device), device)


def training_outcome(saved: dict) -> dict:
    """The steps a saved model actually trained and why it stopped (`steps_run`, `stop_reason`):
    the columns every tidy table of a trained model carries (issue 64: a table says the scale its
    numbers hold at); read_model_file refuses a file without them."""
    return {"steps_run": int(saved["steps_run"]), "stop_reason": saved["stop_reason"]}


def model_from_saved(saved: dict, device: str = "cpu") -> GPTNeoX:
    """The model in a dict read by read_model_file (when its spec is needed too: one read)."""
    model = GPTNeoX(ModelConfig(**saved["model_config"]))
    model.load_state_dict(saved["state_dict"])
    return model.to(device).eval()
