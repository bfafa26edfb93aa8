"""MLflow tracking: one store per results dir, created once before parallel jobs start.

Platform pitfalls handled here: a brand-new SQLite store raced by parallel jobs crashes, and
set_experiment raced by several processes files runs under "Default"; so `prepare_store` creates
the schema and every experiment in one setup job, and runs are started by experiment id.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import sqlite3  # noqa: E402

import mlflow  # noqa: E402
from filelock import FileLock  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402
from sqlalchemy import event  # noqa: E402
from sqlalchemy.engine import Engine  # noqa: E402

from lengen.core.cli import KnownError, one_line_errors, recognises
from lengen.core.files import free_mb, read_state, write_text_atomic  # noqa: E402
from lengen.core.stores import identity, store_path  # noqa: E402

# MLflow logs each database error it re-raises, with its traceback, before raising it: the error
# itself says it (and a full or unwritable store's is one line: store_fault)
logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)

# A SQLite store is shared by every job of a run; a writer that finds it locked (another job's
# write, a `mlflow ui` query, a backup) waits this long for the lock, not sqlite3's 5 s (a store
# locked for 60 s killed training after ~20 s of MLflow's own retries), and then retries once.
BUSY_TIMEOUT_S = 120


@event.listens_for(Engine, "connect")
def _wait_for_locks(dbapi_connection, connection_record) -> None:
    """Every SQLite connection MLflow opens waits BUSY_TIMEOUT_S for a locked database."""
    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")


def artifact_root(uri: str) -> str | None:
    """Where a store's artifacts go: beside a SQLite store (`<results_dir>/mlartifacts`, so each
    tier keeps its own and deleting its results leaves no orphans); None (the server's own
    artifact store) for a tracking server."""
    if uri.startswith("sqlite:///"):
        return (Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts").resolve().as_uri()
    return None


def relocate_artifacts(uri: str) -> int:
    """A SQLite store moved or copied with its results folder: MLflow records each experiment's
    artifact location and each run's artifact URI absolute, so they still name the old folder's
    mlartifacts; rewrite those under another folder's `mlartifacts` to this store's
    (artifact_root), so the runs' logged tables and figures are found where they now lie. Cheap
    when nothing moved (one read); the rows rewritten."""
    path, root = store_path(uri), artifact_root(uri)
    if path is None or root is None or not path.is_file():
        return 0
    with contextlib.closing(sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)) as db:
        try:
            found = db.execute("SELECT artifact_location FROM experiments").fetchall()
        except sqlite3.DatabaseError:  # no schema yet, or a broken file: readable_store's case
            return 0
        marker = "/mlartifacts/"
        olds = {
            loc.split(marker)[0] + marker.rstrip("/") for (loc,) in found if loc and marker in loc
        } - {root}
        changed = 0
        for old in olds:
            for table, column in (("experiments", "artifact_location"), ("runs", "artifact_uri")):
                changed += db.execute(
                    f"UPDATE {table} SET {column} = ? || substr({column}, ?) "  # noqa: S608
                    f"WHERE substr({column}, 1, ?) = ?",
                    (root, len(old) + 1, len(old) + 1, f"{old}/"),
                ).rowcount
        db.commit()
    return changed


def recorded_path(uri: str, path: Path) -> str:
    """How the store records a file: relative to the SQLite store's folder (results_dir) where the
    file lies under it, so a results folder moved or copied whole keeps every model version and
    `model_path` pointing at its own files; else the absolute path."""
    path = Path(path).resolve()
    if uri.startswith("sqlite:///"):
        home = Path(uri.removeprefix("sqlite:///")).resolve().parent
        if path.is_relative_to(home):
            return path.relative_to(home).as_posix()
    return str(path)


def recorded_file(uri: str, recorded: str) -> Path:
    """The file a store records (recorded_path), wherever the store's folder now is."""
    path = Path(recorded)
    if path.is_absolute() or not uri.startswith("sqlite:///"):
        return path
    return Path(uri.removeprefix("sqlite:///")).resolve().parent / path


class StoreError(KnownError, RuntimeError):
    """The MLflow store cannot be read: the message names it and the recovery."""


# SQLite's words for a store it cannot write (through SQLAlchemy and MLflow, as their messages)
_STORE_FAULTS = {
    "database or disk is full": "full",
    "readonly database": "not writable",
    "unable to open database file": "not reachable",
    "disk I/O error": "unreadable",
}


@recognises
def store_fault(err: BaseException) -> StoreError | None:
    """A write MLflow could not make to a full or unwritable SQLite store (anywhere in a job:
    a metric, a tag, a run's end), as one line naming the store and its disk's free space."""
    chain, seen = [], err
    while seen is not None and len(chain) < 8:
        chain.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    fault = next((w for m, w in _STORE_FAULTS.items() if any(m in t for t in chain)), None)
    path = store_path(mlflow.get_tracking_uri())
    if fault is None or path is None:
        return None
    if not Path(path).exists():  # deleted or moved while the job wrote to it: not a full disk
        return StoreError(
            f"MLflow store {path} was deleted or moved while this job wrote to it: rerun (the "
            "workflow makes a new store; trained models and checkpoints are kept)"
        )
    return StoreError(
        f"MLflow store {path} is {fault} ({free_mb(path):.0f} MB free on its disk): free space "
        "there (or give this user write access to it and its folder) and rerun; trained models "
        "and checkpoints are kept"
    )


@contextlib.contextmanager
def readable_store(uri: str):
    """Turn a broken store's database error (a truncated or overwritten SQLite file, a schema
    half-created) into a StoreError naming the store and the recovery (README, Recovery)."""
    try:
        yield
    except Exception as err:  # noqa: BLE001 - SQLAlchemy's and MLflow's errors, by message
        text = str(err)
        broken = ("malformed", "not a database", "_alembic_tmp", "no such table", "disk image")
        if not any(b in text for b in broken):
            raise
        path = store_path(uri) or uri
        raise StoreError(
            f"MLflow store {path} is unreadable ({text.splitlines()[0][:200]}). Recover: move it "
            f"aside (mv {path} {path}.broken) and delete {Path(str(path)).parent}/mlflow.ready and "
            f"{Path(str(path)).parent}/mlflow/*.ready; the next snakemake run makes a new store "
            "(trained models stay on disk, their evaluations open new MLflow runs for them; the "
            "old runs stay in the moved file)"
        ) from err


def prepare_store(uri: str, experiments: Iterable[str]) -> dict[str, str]:
    """Create the store's schema and every experiment (artifacts under artifact_root); return
    name -> experiment id. A SQLite store is created under a file lock beside it, so that
    concurrent first uses (jobs run with --nolock, two tiers sharing a store) never leave its
    schema half-migrated."""
    path = store_path(uri)
    lock = contextlib.nullcontext()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(f"{path}.lock", timeout=600)
    with lock, readable_store(uri):
        relocate_artifacts(uri)  # a results folder moved or copied whole
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # creates the schema on first access
        root = artifact_root(uri)
        ids = {}
        for name in experiments:
            exp = client.get_experiment_by_name(name)
            location = f"{root}/{name.replace('/', '_')}" if root else None
            ids[name] = exp.experiment_id if exp else client.create_experiment(name, location)
    return ids


def flatten(d: Mapping, prefix: str = "") -> dict[str, str]:
    """Nested dict -> {'a.b.c': value} with values as strings (MLflow params)."""
    out = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = json.dumps(value) if isinstance(value, list | tuple) else str(value)
    return out


def changed(was: Mapping, now: Mapping) -> list[str]:
    """The keys of two flat params (`flatten`) whose values differ, a key on one side only
    included: what a rerun changed."""
    return sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))


def start_run(uri: str, experiment: str, run_name: str, run_id_file: Path) -> mlflow.ActiveRun:
    """Start (or resume, when run_id_file exists) the MLflow run of one trained model."""
    mlflow.set_tracking_uri(uri)
    relocate_artifacts(uri)
    with readable_store(uri):
        exp = MlflowClient(tracking_uri=uri).get_experiment_by_name(experiment)
    if exp is None:
        raise RuntimeError(
            f"MLflow experiment {experiment!r} missing in {uri}: run the setup rule "
            "(snakemake results/.../mlflow.ready) or lengen.core.tracking.prepare_store first"
        )
    if run_id_file.exists():  # a rerun after a crash or a kill: the same run goes on
        run_id = read_state(
            run_id_file,
            "this model's MLflow run id",
            "Delete it to log this model to a new MLflow run (the old run stays as it is)",
        )
        if _has_run(uri, run_id):
            print(f"MLflow: resuming run {run_id} ({run_name})", file=sys.stderr, flush=True)
            return mlflow.start_run(run_id=run_id)
        print(
            f"MLflow: run {run_id} is not in the store {uri} (a lost or replaced store): this "
            f"model goes on in a new run",
            file=sys.stderr,
            flush=True,
        )
    run = mlflow.start_run(experiment_id=exp.experiment_id, run_name=run_name)
    write_text_atomic(run_id_file, run.info.run_id)
    print(f"MLflow: new run {run.info.run_id} ({run_name})", file=sys.stderr, flush=True)
    return run


def _has_run(uri: str, run_id: str) -> bool:
    """Whether the store holds the run (a store made again after a loss does not)."""
    from mlflow.exceptions import MlflowException

    try:
        with readable_store(uri):
            MlflowClient(tracking_uri=uri).get_run(run_id)
    except MlflowException:
        return False
    return True


def resume_run(uri: str, run_id_file: Path) -> mlflow.ActiveRun:
    """Reopen the run recorded by training, to add evaluation metrics and artifacts. Where the
    store no longer holds it (a store made again after a loss: README, Recovery), the model's
    spec (spec.json beside the run id file) opens a new run for it in its experiment, its params
    logged and tagged RELOGGED_FROM the lost run's id, and the run id file names the new one:
    the evaluation is logged, and a plain rerun completes (the training's own metrics stay in
    the old store)."""
    mlflow.set_tracking_uri(uri)
    relocate_artifacts(uri)
    run_id = read_state(
        run_id_file,
        "this model's MLflow run id",
        "Delete it to write the table without logging it to MLflow",
    )
    if _has_run(uri, run_id):
        return mlflow.start_run(run_id=run_id)
    spec_file = run_id_file.parent / "spec.json"
    try:
        spec = json.loads(spec_file.read_text())
        experiment, run_name = spec["tracking"]["experiment"], spec["run_name"]
    except (OSError, ValueError, KeyError, TypeError):
        raise StoreError(
            f"{run_id_file}: MLflow run {run_id} is not in the store {uri} (a lost "
            f"or replaced store), and {spec_file} cannot say which run to open "
            "instead; delete the run id file to write the table without logging "
            "it to MLflow"
        ) from None
    run = start_run(uri, experiment, run_name, run_id_file)
    mlflow.log_params(flatten(spec))
    mlflow.set_tag(RELOGGED_FROM, run_id)
    return run


# the tag of a run opened again for a model whose training run a lost store took with it
RELOGGED_FROM = "lengen.relogged_from"


def log_params_once(spec: Mapping, model) -> None:
    """Log every spec entry and the parameter count as run params (first start only)."""
    params = flatten(spec)
    params["model.num_params"] = str(model.num_params())
    mlflow.log_params(params)


def model_name(experiment: str, run_name: str) -> str:
    """The registered model a training run's model.pt is a version of: its experiment and run
    name (MLflow's names allow no '/' or ':')."""
    return f"{experiment}.{run_name}".replace("/", ".").replace(":", "-")


def register_model(
    client: MlflowClient, experiment: str, run_name: str, run_id: str, path: Path, sha256: str
) -> str:
    """Register a trained model.pt as a new version of its registered model (model_name), its
    source the file where it lies (not a copy: a paper-size model is gigabytes), relative to the
    store's folder (recorded_path: a moved results folder keeps it; recorded_file resolves it),
    tagged with the file's hash; the version."""
    name = model_name(experiment, run_name)
    if not client.search_registered_models(f"name='{name}'"):
        client.create_registered_model(name)
    source = recorded_path(client.tracking_uri, path)
    version = client.create_model_version(
        name, source=source, run_id=run_id, tags={"model_sha256": sha256}
    )
    return version.version


def run_set_aside(uri: str, run_id: str, where: Path, model: Path | None) -> None:
    """A replaced spec's run (lifecycle.set_aside: a changed value, then a rerun): its files went
    to `where`, tagged `set_aside_in`; a run left RUNNING (its job killed outright) ends KILLED, as
    it will never go on; a moved model.pt's path is its `model_path` tag and its registered
    version's `moved_to` tag (a version's source cannot change). A store without the run (lost
    since) has nothing to mark."""
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=uri)
    with readable_store(uri):
        try:
            status = client.get_run(run_id).info.status
        except MlflowException:
            return
        if status == "RUNNING":
            client.set_terminated(run_id, "KILLED")
        client.set_tag(run_id, "set_aside_in", str(where))
        if model is None:
            return
        client.set_tag(run_id, "model_path", recorded_path(uri, model))
        for version in client.search_model_versions(f"run_id='{run_id}'"):
            client.set_model_version_tag(version.name, version.version, "moved_to", str(model))


def set_tags(tags: Mapping[str, object]) -> None:
    """Tag the active run (provenance: config hash, git commit, package versions)."""
    mlflow.set_tags({k: str(v) for k, v in tags.items()})


def logged_steps(uri: str, run_id: str, keys: list[str] | None = None) -> dict[str, int]:
    """Each metric of a run (of `keys`, else all) and the last step it was logged at."""
    client = MlflowClient(tracking_uri=uri)
    with readable_store(uri):
        keys = client.get_run(run_id).data.metrics if keys is None else keys
        return {k: max(m.step for m in client.get_metric_history(run_id, k)) for k in keys}


def unlogged(metrics: Mapping[str, float], step: int, logged: Mapping[str, int]) -> dict:
    """The metrics a step adds: those not already logged at this step or later (a resume)."""
    return {k: v for k, v in metrics.items() if step > logged.get(k, -1)}


def log_metrics(metrics: Mapping[str, float]) -> None:
    """An evaluation's metrics on the active run, in one write (not one per metric). A rerun of
    the evaluation does not log them again: a value the run already holds is skipped, and a
    changed one (a model trained again, other scoring code) is logged as the next step of its
    metric, so MLflow shows the newest and keeps the earlier ones as its history."""
    run_id = mlflow.active_run().info.run_id
    uri = mlflow.get_tracking_uri()
    client = MlflowClient(tracking_uri=uri)
    with readable_store(uri):  # a read a lock can refuse at once: waited out as a write is
        held = _wait_unlocked(lambda: client.get_run(run_id).data.metrics)
    changed = {k: float(v) for k, v in metrics.items() if k in held and held[k] != float(v)}
    steps = _wait_unlocked(lambda: logged_steps(uri, run_id, list(changed))) if changed else {}
    by_step: dict[int, dict[str, float]] = {}
    for k, v in metrics.items():
        if k not in held:
            by_step.setdefault(0, {})[k] = float(v)
        elif k in changed:
            by_step.setdefault(steps[k] + 1, {})[k] = changed[k]
    for step, fresh in sorted(by_step.items()):
        _retry_locked(lambda fresh=fresh, step=step: mlflow.log_metrics(fresh, step=step))


def log_run_metrics(
    client: MlflowClient,
    run_id: str,
    metrics: Mapping[str, float],
    step: int,
    logged: Mapping[str, int],
) -> None:
    """log_metrics for a run by id, not the active one (a training run's members each log to
    their own): one write, steps already held (`logged`, as logged_steps gives them at a resume)
    not logged twice, a locked store waited for."""
    import time

    from mlflow.entities import Metric

    stamp = int(time.time() * 1000)
    fresh = unlogged(metrics, step, logged)
    found = [Metric(k, float(v), stamp, step) for k, v in fresh.items()]
    if found:
        _retry_locked(lambda: client.log_batch(run_id, metrics=found))


def _retry_locked(write):
    """Run an MLflow write; a store still locked after BUSY_TIMEOUT_S gets one more wait, then an
    error naming the store and what holds such a lock (not ~300 lines of SQLAlchemy)."""
    for attempt in (1, 2):
        try:
            return write()
        except Exception as err:  # noqa: BLE001 - MLflow wraps SQLAlchemy's OperationalError
            if "database is locked" not in str(err):
                raise
            if attempt == 2:
                raise StoreError(
                    f"MLflow store {store_path(mlflow.get_tracking_uri()) or 'the store'} stayed "
                    f"locked for 2 x {BUSY_TIMEOUT_S} s: another process holds it (an `mlflow ui`"
                    " query, a copy, a crashed writer); free it and rerun (training resumes from "
                    "its last checkpoint)"
                ) from None


def _wait_unlocked(read):
    """Run an MLflow read; SQLite can refuse a read at once while another connection holds an
    exclusive lock (its busy handler is not always called for readers): polled each second,
    for as long as a write waits (2 x BUSY_TIMEOUT_S), then the StoreError a write gives."""
    import time

    deadline = time.monotonic() + 2 * BUSY_TIMEOUT_S
    while True:
        try:
            return read()
        except Exception as err:  # noqa: BLE001 - MLflow wraps SQLAlchemy's OperationalError
            if "database is locked" not in str(err):
                raise
            if time.monotonic() >= deadline:
                return _retry_locked(read)  # one last try: its error names the store
            time.sleep(1)


def end_run() -> None:
    """Close the active run."""
    mlflow.end_run()


def close_failed_run(err: BaseException) -> None:
    """End the active run (if any) as KILLED (interrupt, SIGTERM exit) or FAILED (an error),
    never leaving it RUNNING."""
    if mlflow.active_run() is not None:
        killed = isinstance(err, KeyboardInterrupt | SystemExit)
        mlflow.end_run(status="KILLED" if killed else "FAILED")


def log_file_run(
    uri: str,
    experiment: str,
    run_name: str,
    paths: list[Path],
    tags: Mapping,
    params: Mapping | None = None,
) -> str:
    """A finished run holding files as artifacts (a figure; the report and its tables), with
    its params (what made them, flattened) and tags; its id. A run of that name made before (a
    rerun) is replaced by a clear rule: the new run's `replaces` tag names it and `changed` the
    params that differ (or "nothing"), and the old one is deleted (MLflow's soft delete:
    `mlflow gc` purges it, `mlflow runs restore` brings it back)."""
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise RuntimeError(f"MLflow experiment {experiment!r} missing in {uri}")
    flat = flatten(params or {})
    old = client.search_runs(
        [exp.experiment_id], filter_string=f"attributes.run_name = '{run_name}'"
    )
    replaced = {}
    if old:
        was = old[0].data.params  # the newest
        replaced = {
            "replaces": " ".join(r.info.run_id for r in old),
            "changed": " ".join(changed(was, flat))[:500] or "nothing (a rerun of the same inputs)",
        }
    with mlflow.start_run(experiment_id=exp.experiment_id, run_name=run_name) as run:
        set_tags({**tags, **replaced})
        if flat:
            _retry_locked(lambda: mlflow.log_params(flat))
        for path in paths:
            mlflow.log_artifact(str(path))
    for r in old:
        client.delete_run(r.info.run_id)
    return run.info.run_id


def log_figure(
    path: Path,
    model_runs: list[str],
    uri: str,
    experiment: str,
    tags: Mapping | None = None,
    params: Mapping | None = None,
) -> str:
    """One MLflow run per drawn figure, `figure/<file stem>`, holding the PNG, its params (what
    was drawn: the config slice, the input tables' hashes) and tags (provenance; the runs of the
    models it shows, `model_runs`: their training runs' names; none for a figure computed
    without a model, which says so): `mlflow ui` answers "which runs made this figure"."""
    shown = " ".join(sorted(set(model_runs))) or "none (drawn without a trained model)"
    return log_file_run(
        uri,
        experiment,
        f"figure/{path.stem}",
        [path],
        {"figure": path.name, "model_runs": shown, **(tags or {})},
        params,
    )


def log_artifact(path: Path) -> None:
    """Attach a file to the active run."""
    mlflow.log_artifact(str(path))


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: create the store (and the named experiments) before parallel training jobs."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--uri", required=True)
    parser.add_argument("--experiments", nargs="*", default=[])
    parser.add_argument("--done", type=Path, help="file to write when ready")
    args = parser.parse_args(argv)
    ids = prepare_store(args.uri, args.experiments)
    if args.done:  # the store it marks, so that a lost or replaced store reruns this
        done = {"uri": args.uri, "experiments": ids, "store": identity(args.uri)}
        write_text_atomic(args.done, json.dumps(done, indent=2))


if __name__ == "__main__":
    main()
