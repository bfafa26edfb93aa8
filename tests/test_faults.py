"""Fault injection: every file a rule reads fails clearly when it is cut off or wrong, naming the
file and the fix (the other drills: corrupt checkpoints and FAILED runs in test_train.py, partial
configs in test_workflow.py, bad CLI arguments in test_sparse_parity.py)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from lengen.analysis.tables import TableError, combine, read_eval_table
from lengen.data.tokens import DTYPE, TokenFileError, load_tokens
from lengen.model.modelfile import ModelFileError, load_model
from lengen.tasks import parse_spec
from lengen.train.train import train


def _eval_table(path, experiment="parity_scratchpad"):
    rows = [
        {
            "experiment": experiment,
            "variant": "ppc",
            "jump": 1,
            "seed": 0,
            "length": n,
            "n": 8,
            "accuracy": 0.5,
        }
        for n in (10, 20, 30)
    ]
    pd.DataFrame(rows).to_csv(path, index=False)


def test_eval_table_cut_mid_line_fails_the_combine_naming_it(tmp_path):
    good, cut = tmp_path / "good.csv", tmp_path / "cut.csv"
    _eval_table(good)
    _eval_table(cut)
    assert read_eval_table(good)["jump"].dtype == np.int64
    cut.write_text(cut.read_text()[:-12])  # the last row loses its accuracy and more
    with pytest.raises(TableError, match=f"{cut}: .*delete {cut} and rerun its eval rule"):
        combine([good, cut], tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists()
    _eval_table(cut)  # cut inside its last value (0.3125 read as 0.31), the columns after lost
    text = cut.read_text()
    cut.write_text(text[: text.rindex("0.5") + 2])
    with pytest.raises(TableError, match=f"{cut}: its last line is cut .*delete {cut} and rerun"):
        combine([good, cut], tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists()
    _eval_table(cut)
    cut.write_text("".join(cut.read_text().splitlines(keepends=True)[:-1]))  # a whole row lost
    with pytest.raises(
        TableError, match=f"{cut}: 2 test points where the other tables of its variant have 3"
    ):
        combine([good, cut], tmp_path / "out.csv")
    cut.write_text("")
    with pytest.raises(TableError, match="unreadable"):
        read_eval_table(cut)
    pd.read_csv(good).drop(columns="seed").to_csv(cut, index=False)
    with pytest.raises(TableError, match=r"missing columns \['seed'\]"):
        read_eval_table(cut)


def test_token_file_is_checked_against_meta_json(tmp_path):
    np.arange(100, dtype=DTYPE).tofile(tmp_path / "train.bin")
    (tmp_path / "meta.json").write_text(json.dumps({"tokens": {"train": 100}}))
    assert len(load_tokens(tmp_path / "train.bin")) == 100
    path = tmp_path / "train.bin"
    path.write_bytes(path.read_bytes()[:100])  # half the tokens
    with pytest.raises(TokenFileError, match="50 tokens, but .*meta.json records 100"):
        load_tokens(path)
    path.write_bytes(path.read_bytes()[:51])  # an odd number of bytes
    with pytest.raises(TokenFileError, match="not a whole number of uint16 tokens") as err:
        load_tokens(path)
    # the pipeline's own file: the rule that remakes it, never a folder to delete (issue 65)
    assert "snakemake --forcerun natural_language_tokens" in str(err.value)
    assert "delete" not in str(err.value)
    (tmp_path / "meta.json").unlink()  # a user's file: what the format is, nothing to delete
    with pytest.raises(TokenFileError, match="as lengen.data.tokens writes them") as err:
        load_tokens(path)
    assert "delete" not in str(err.value) and "rerun" not in str(err.value)
    with pytest.raises(TokenFileError, match=r"missing\.bin: no such file$"):
        load_tokens(tmp_path / "missing.bin")


def test_truncated_model_file_is_named_with_the_fix(tiny_spec, tmp_path):
    path = train(tiny_spec, tmp_path / "run")
    load_model(path)
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ModelFileError, match=f"{path}: unreadable .*delete {path} and rerun"):
        load_model(path)
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(ModelFileError, match="not a model file of this code"):
        load_model(path)
    with pytest.raises(ModelFileError, match="missing"):
        load_model(tmp_path / "nope.pt")


@pytest.mark.slow
def test_kill_9_during_training_resumes_to_identical_weights(tiny_spec, tmp_path):
    """The drill: SIGKILL a training process once it has checkpointed, run it again: it resumes
    (from the newest readable checkpoint), its MLflow run ends FINISHED, and the weights equal an
    uninterrupted run's bit for bit."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from mlflow.tracking import MlflowClient

    spec = dict(tiny_spec, train={**tiny_spec["train"], "steps": 400, "checkpoint_every": 5})
    straight = torch.load(train(spec, tmp_path / "straight"), weights_only=True)["state_dict"]
    out = tmp_path / "killed"
    module = "lengen.train.train"
    cmd = [sys.executable, "-m", module, "--spec", json.dumps(spec), "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120

    # a whole checkpoint (step_N: written as step_N.partial and renamed once whole, issue 63);
    # the kill may cut the next one mid-write, which the rerun removes
    def whole():
        return [p for p in (out / "ckpt").glob("step_*") if p.name[5:].isdigit()]

    while not whole() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)  # into the next steps
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "model.pt").exists(), "finished before the kill: raise steps"
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "resumed from" in rerun.stderr and "MLflow: resuming run" in rerun.stderr
    resumed = torch.load(out / "model.pt", weights_only=True)["state_dict"]
    for name in straight:
        torch.testing.assert_close(straight[name], resumed[name], rtol=0, atol=0)
    client = MlflowClient(tracking_uri=spec["tracking"]["uri"])
    assert client.get_run((out / "mlflow_run_id").read_text()).info.status == "FINISHED"


def test_a_table_is_checked_against_the_grid_the_config_asks_for(tmp_path, capsys):
    """A variant's only eval.csv that lost its last row (nothing to compare it with) fails the
    combine and the figure, naming the file, the missing length and the rule to rerun; so does a
    table of a variant or at lengths the config does not ask for (an older config's)."""
    from lengen.report import figures

    table = tmp_path / "eval.csv"
    _eval_table(table)
    grid = {"ppc": [10, 20, 30]}
    assert len(combine([table], tmp_path / "out.csv", grid)) == 3
    table.write_text("".join(table.read_text().splitlines(keepends=True)[:-1]))
    assert len(combine([table], tmp_path / "unchecked.csv")) == 2  # alone, without the grid
    why = rf"{table}: ppc scored at lengths \[10, 20\], the config asks for \[10, 20, 30\] "
    with pytest.raises(TableError, match=why + r"\(missing \[30\].*rerun its eval rule"):
        combine([table], tmp_path / "out2.csv", grid)
    assert not (tmp_path / "out2.csv").exists()
    with pytest.raises(SystemExit) as ended:  # the tool: one line, exit 2
        figures.main(
            [
                "generation",
                "--tables",
                str(table),
                "--panels",
                "ppc",
                "--lengths",
                '{"ppc": [10, 20, 30]}',
                "--out",
                str(tmp_path / "fig.png"),
            ]
        )
    assert ended.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"TableError: {table}: ") and "missing [30]" in line
    assert not (tmp_path / "fig.png").exists()
    _eval_table(table)
    with pytest.raises(TableError, match=r"not asked \[30\]"):
        read_eval_table(table, {"ppc": [10, 20]})
    with pytest.raises(TableError, match="variant 'ppc' is not one the config scores"):
        read_eval_table(table, {"absolute": [10, 20, 30]})


def test_an_all_digit_config_hash_stays_text_and_tables_combine(tmp_path):
    """A run whose hash happens to be all digits once made pandas mix int and str hashes, and the
    figure rule crashed sorting them (default-tier run, Fig. 2)."""
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for path, digest in zip(paths, ("01234567", "abcdef01"), strict=True):
        _eval_table(path)
        pd.read_csv(path).assign(config_hash=digest).to_csv(path, index=False)
    assert read_eval_table(paths[0])["config_hash"].iloc[0] == "01234567"
    out = combine(paths, tmp_path / "all.csv")
    assert sorted(out["config_hash"].unique()) == ["01234567", "abcdef01"]


def test_a_cut_state_file_is_an_error_naming_it_and_nothing_is_deleted(tiny_spec, tmp_path, capfd):
    """Issue 47's drills: a 0-byte or cut spec.json beside checkpoints (a full disk left one)
    stops the rerun naming the file, keeping the checkpoints (it once deleted them and trained
    from step 0); a 0-byte mlflow_run_id stops it too (it once opened a new run in `Default`)."""
    from lengen.core.files import UnreadableState, write_text_atomic

    spec = dict(tiny_spec, train={**tiny_spec["train"], "steps": 6, "checkpoint_every": 2})
    out = tmp_path / "run"
    train(spec, out, stop_after=4)  # a crash after step 4: its checkpoint, the newest, kept
    tags = sorted(p.name for p in (out / "ckpt").glob("step_*"))
    assert tags == ["step_4"]
    for cut in ("", '{"experiment": "sparse_par'):
        (out / "spec.json").write_text(cut)
        with pytest.raises(UnreadableState, match=f"{out / 'spec.json'}: "):
            train(spec, out)
        assert sorted(p.name for p in (out / "ckpt").glob("step_*")) == tags  # kept
    (out / "spec.json").unlink()  # what the message says to do: then it resumes
    run_id = (out / "mlflow_run_id").read_text()
    (out / "mlflow_run_id").write_text("")
    with pytest.raises(
        UnreadableState,
        match="mlflow_run_id: empty .*Delete it to log this model to a new MLflow run",
    ):
        train(spec, out)
    write_text_atomic(out / "mlflow_run_id", run_id)  # restored: the same run goes on
    assert (train(spec, out)).exists()
    (out / "model.pt").unlink()
    shutil.rmtree(out / "finished")  # as its line says, to train again (else it is restored)
    train(spec, out, stop_after=4)
    (out / "mlflow_run_id").write_text("")
    (out / "mlflow_run_id").unlink()  # the advice: a new run, the checkpoints resumed
    capfd.readouterr()
    assert (train(spec, out)).exists()
    err = capfd.readouterr().err
    assert "MLflow: new run" in err and "resumed from" in err, err
    assert (out / "mlflow_run_id").read_text() != run_id
    assert not list(out.glob(".mlflow_run_id.*")) and not list(out.glob(".spec.json.*"))


def test_a_checkpoint_resumes_only_into_the_spec_that_wrote_it(tiny_spec, tmp_path, capfd):
    """Issue 66's drill: a cut spec.json deleted as its message advises, then `train.lr` changed:
    the rerun once resumed the old lr's checkpoint and wrote its weights under the new spec. Each
    checkpoint now records its spec; another spec's are removed, saying which value differs, and
    the run equals a fresh one of the new spec bit for bit. The same spec still resumes."""
    from lengen.core.files import UnreadableState

    spec = dict(tiny_spec, train={**tiny_spec["train"], "steps": 6, "checkpoint_every": 2})
    out = tmp_path / "run"
    train(spec, out, stop_after=4)
    record = json.loads((out / "ckpt" / "step_4" / "specs.json").read_text())
    assert record == {parse_spec(spec).run_name: json.loads((out / "spec.json").read_text())}
    (out / "spec.json").write_text("")
    with pytest.raises(UnreadableState, match="they resume only into the spec that wrote them"):
        train(spec, out)
    (out / "spec.json").unlink()  # the advice
    changed = dict(spec, train={**spec["train"], "lr": 0.5})
    capfd.readouterr()
    model = train(changed, out)
    err = capfd.readouterr().err
    assert "written for another spec" in err and "train.lr: 0.001 -> 0.5" in err, err
    assert "resumed from" not in err
    fresh = train(changed, tmp_path / "fresh")
    want, got = (torch.load(p, weights_only=False) for p in (fresh, model))
    assert got["spec"]["train"]["lr"] == 0.5
    for name, value in want["state_dict"].items():
        torch.testing.assert_close(got["state_dict"][name], value, rtol=0, atol=0)


def test_a_checkpoint_that_records_no_spec_is_not_read(tiny_spec, tmp_path, capfd):
    """A checkpoint written before checkpoints recorded their spec (no specs.json: code older
    than the committed references) is never resumed, spec.json or not: the run says so in one
    line and trains from step 0."""
    spec = dict(tiny_spec, train={**tiny_spec["train"], "steps": 6, "checkpoint_every": 2})
    out = tmp_path / "run"
    train(spec, out, stop_after=4)
    (out / "ckpt" / "step_4" / "specs.json").unlink()  # as older code wrote it
    capfd.readouterr()
    train(spec, out)
    err = capfd.readouterr().err
    assert "resumed from" not in err, err
    assert "records no spec: written by code older than the references" in err, err
    assert (out / "model.pt").is_file()


def test_spec_change_names_what_differs():
    from lengen.train.lifecycle import spec_change

    old = {"a": {"train": {"lr": 0.001, "steps": 6}, "seed": 0}, "b": {"seed": 1}}
    assert spec_change(old, old) is None
    assert spec_change(old, {**old, "b": {"seed": 2}}) == "b seed: 1 -> 2"
    assert spec_change(old, {"a": old["a"]}) == "runs ['a', 'b'], now ['a']"
    many = {"a": {"train": {"lr": 1, "steps": 7}, "seed": 3, "x": 1}, "b": {"seed": 1}}
    assert spec_change(old, many).endswith("; 1 more")


def test_a_figure_from_a_cut_eval_table_fails_naming_it(tmp_path):
    """Issue 47: the figure rule read eval.csv with a bare read_csv and drew Fig. 1 from a file
    cut mid-line; it now reads it as the table rule does, and stops naming the file."""
    from lengen.analysis.tables import TableError
    from lengen.report import figures

    good = pd.DataFrame(
        {
            "experiment": "sparse_parity",
            "variant": "neox",
            "k_train": 2,
            "seed": 0,
            "length": [8, 16],
            "k_test": 1,
            "n": 4,
            "accuracy": [1.0, 0.5],
        }
    )
    path = tmp_path / "eval.csv"
    good.to_csv(path, index=False)
    text = path.read_text()
    path.write_text(text[: text.rindex(",") + 1])  # cut mid-line: the last accuracy is gone
    with pytest.raises(TableError, match=f"{path}: "):
        figures.main.__wrapped__(
            ["sparse_parity", "--tables", str(path), "--out", str(tmp_path / "f.png")]
        )
    assert not (tmp_path / "f.png").exists()


@pytest.mark.slow  # a fault drill (trains in a subprocess until signalled), as the kill -9 one
@pytest.mark.parametrize("module", ["lengen.train.train", "lengen.train.group"])
def test_a_sigterm_is_named_and_the_mlflow_runs_end_killed(tiny_spec, tmp_path, module):
    """Snakemake and SLURM stop a job with SIGTERM: the trainer (and a fused group) exits 143
    with one line naming the signal and what a rerun does, and its MLflow runs end KILLED, not
    left RUNNING (before: Snakemake said only "non-zero exit code"; a group died without closing
    its members' runs). The line reaches LENGEN_ERROR_FD too: Snakemake's own output."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from mlflow.tracking import MlflowClient

    spec = dict(tiny_spec, train={**tiny_spec["train"], "steps": 100000, "checkpoint_every": 5})
    outs = [tmp_path / "a", tmp_path / "b"]
    if module == "lengen.train.train":
        args, outs = ["--spec", json.dumps(spec), "--out", str(outs[0])], outs[:1]
    else:
        second = dict(spec, seed=1, run_name=spec["run_name"] + "-b")
        args = ["--specs", json.dumps([spec, second]), "--out", *map(str, outs)]
    read, write = os.pipe()  # the workflow's descriptor on Snakemake's own output
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LENGEN_ERROR_FD": str(write)}
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        env=env,
        pass_fds=(write,),
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    deadline = time.time() + 120
    while not (outs[0] / "mlflow_run_id").exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # into the training loop
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "stopped by SIGTERM (signal 15)" in err and "rerun" in err
    with os.fdopen(read) as shown:  # where Snakemake reports the job, not only in its log
        assert shown.read().startswith("stopped by SIGTERM (signal 15)")
    client = MlflowClient(tracking_uri=spec["tracking"]["uri"])
    for out in outs:  # the job's stderr beside a failure: what kept its run open
        status = client.get_run((out / "mlflow_run_id").read_text()).info.status
        assert status == "KILLED", err[-3000:]


def test_a_sigterm_whose_exit_a_callback_swallowed_still_stops_training(
    tmp_path, monkeypatch, capfd
):
    """A SIGTERM landing in a garbage collector's callback had its SystemExit swallowed by
    Python ("Exception ignored in ...") and the training went on: a drill of 5 signals hung 1.
    The handler records the signal; the loop's next step exits 143 (one line said, once)."""
    import signal

    from lengen.train import runtime

    handlers = {}
    monkeypatch.setattr(runtime, "_STOPPED", [])
    monkeypatch.setattr(signal, "signal", lambda sig, fn: handlers.setdefault(sig, fn))
    runtime.exit_on_signals(tmp_path)
    runtime.exit_if_stopped()  # no signal yet: nothing happens
    for _ in range(2):  # swallowed, as in a weakref callback; a second signal is not said again
        with pytest.raises(SystemExit):
            handlers[signal.SIGTERM](signal.SIGTERM, None)
    with pytest.raises(SystemExit) as ended:
        runtime.exit_if_stopped()
    assert ended.value.code == 143
    assert capfd.readouterr().err.count("stopped by SIGTERM (signal 15)") == 1


def test_a_full_disk_is_named_as_one(tiny_spec, tmp_path, monkeypatch):
    """torch.save on a full disk says "basic_ios::clear: iostream error" (and the log, on the same
    disk, is cut mid-traceback): a failed write with under 64 MB free is an error that says no
    space is left, where, and what to do; the checkpoints written before stay. A failure with
    room on the disk, or not a write, stays what it was."""
    import errno
    import shutil
    from collections import namedtuple

    from lengen.core import files
    from lengen.train import train as train_module

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 2**20, 2**20))

    def full(*args, **kwargs):
        raise RuntimeError("basic_ios::clear: iostream error")

    monkeypatch.setattr(train_module, "write_model_file", full)
    out = tmp_path / "run"
    with pytest.raises(
        files.NoSpace,
        match=r"no space left on the disk of .*run/model.pt \(1 MB "
        r"free\) while writing the model file: free space there and rerun",
    ):
        train(dict(tiny_spec, train={**tiny_spec["train"], "checkpoint_every": 2}), out)
    assert (out / "ckpt").is_dir() and (out / "spec.json").is_file()  # kept for the rerun
    with pytest.raises(OSError) as err, files.space_for(tmp_path, "x"):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert isinstance(err.value, files.NoSpace)
    with pytest.raises(RuntimeError, match="CUDA out of memory"), files.space_for(tmp_path, "x"):
        raise RuntimeError("CUDA out of memory")  # not a write: itself
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**12, 0, 10**12))
    with pytest.raises(RuntimeError, match="iostream error"), files.space_for(tmp_path, "x"):
        raise RuntimeError("basic_ios::clear: iostream error")  # room enough: not a full disk


def test_a_full_store_or_disk_is_one_line_naming_it_and_its_free_space(
    tmp_path, capfd, monkeypatch
):
    """A write a full SQLite store refuses (SQLite's own "database or disk is full", here by
    capping the file's pages) ended a job in raw tracebacks; a full disk where no checkpoint
    write names it gave Snakemake's bare `[Errno 28]`. Each is now one line (also on
    LENGEN_ERROR_FD: Snakemake's output) naming the store or the file and the free MB, exit 2."""
    import errno
    import os
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.pool import Pool

    from lengen.core import tracking
    from lengen.core.cli import one_line_errors

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cap = {}

    def capped(dbapi, record, proxy):  # every connection MLflow takes from its pool
        if isinstance(dbapi, sqlite3.Connection) and cap:
            dbapi.execute(f"PRAGMA max_page_count = {cap['pages']}")

    event.listen(Pool, "checkout", capped)
    try:
        tracking.prepare_store(uri, ["e"])
        with sqlite3.connect(tmp_path / "mlflow.db") as con:
            cap["pages"] = con.execute("PRAGMA page_count").fetchone()[0]  # no room to grow

        @one_line_errors
        def job():
            tracking.start_run(uri, "e", "r", tmp_path / "mlflow_run_id")
            tracking.log_metrics({f"m{i}_{'x' * 200}": float(i) for i in range(2000)})

        read, write = os.pipe()
        monkeypatch.setenv("LENGEN_ERROR_FD", str(write))
        with pytest.raises(SystemExit) as ended:
            job()
        assert ended.value.code == 2
        shown = os.read(read, 4096).decode()
        assert shown.startswith(f"StoreError: MLflow store {tmp_path / 'mlflow.db'} is full (")
        assert "MB free on its disk): free space there" in shown and shown.count("\n") == 1
        err = capfd.readouterr().err
        assert "Traceback" not in err and shown in err
    finally:
        event.remove(Pool, "checkout", capped)
        tracking.end_run()

    @one_line_errors
    def writes_a_table(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    with pytest.raises(SystemExit):
        writes_a_table(tmp_path / "t" / "table.csv")
    shown = os.read(read, 4096).decode()
    assert shown.startswith(f"NoSpace: [Errno 28] no space left on the disk of {tmp_path}/t/")
    assert shown.endswith(" MB free): free space there and rerun\n")
    os.close(read)
    os.close(write)


def _lock_store(path, seconds: float):
    """Hold an exclusive lock on a SQLite file for `seconds`, in a thread (as `mlflow ui` or a
    copy would); returns the thread."""
    import sqlite3
    import threading
    import time

    ready = threading.Event()

    def hold():
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("BEGIN EXCLUSIVE")
        ready.set()
        time.sleep(seconds)
        con.execute("COMMIT")
        con.close()

    thread = threading.Thread(target=hold)
    thread.start()
    ready.wait()
    return thread


@pytest.mark.slow  # a fault drill: holds the store's lock for 25 s
def test_a_locked_mlflow_store_is_waited_for_then_named(tmp_path, monkeypatch):
    """A store locked for 25 s (sqlite3 gives up after 5 s; training died after ~20 s): the
    metric is logged once the lock goes. A lock longer than twice the busy timeout is a
    StoreError naming the store and what holds such locks."""
    import time

    import mlflow

    from lengen.core import tracking

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking.prepare_store(uri, ["e"])
    run = tracking.start_run(uri, "e", "r", tmp_path / "mlflow_run_id")
    locked = _lock_store(tmp_path / "mlflow.db", 25)
    t0 = time.time()
    tracking.log_metrics({"loss": 1.0})
    assert time.time() - t0 > 20  # it waited for the lock
    locked.join()
    tracking.end_run()
    history = mlflow.tracking.MlflowClient(uri).get_metric_history(run.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 1.0)]
    # still locked after the wait and its retry: one error naming the store (MLflow's own
    # retries and the 2 x 120 s wait are simulated: the write fails as a locked store's does)
    tracking.start_run(uri, "e", "r", tmp_path / "mlflow_run_id")
    calls = []

    def locked_write(*args, **kwargs):
        calls.append(1)
        raise mlflow.exceptions.MlflowException("(sqlite3.OperationalError) database is locked")

    monkeypatch.setattr(mlflow, "log_metrics", locked_write)
    with pytest.raises(tracking.StoreError, match=r"mlflow.db stayed locked for 2 x 120 s"):
        tracking.log_metrics({"loss": 2.0})
    assert len(calls) == 2
    tracking.end_run()


def test_a_group_stopped_while_its_runs_open_leaves_none_running(tiny_spec, tmp_path, monkeypatch):
    """The slow SIGTERM test above once found a fused group's second member RUNNING on a loaded
    machine: the signal came while the group was still opening its members' MLflow runs. A stop
    there (SystemExit, as the SIGTERM handler raises) closes every run opened so far KILLED."""
    from mlflow.tracking import MlflowClient

    from lengen.core import tracking
    from lengen.train import group

    second = dict(tiny_spec, seed=1, run_name=tiny_spec["run_name"] + "-b")
    outs = [tmp_path / "a", tmp_path / "b"]
    calls = []
    real = tracking.set_tags

    def stop_on_the_second(tags):
        calls.append(tags)
        if len(calls) == 2:
            raise SystemExit(143)
        return real(tags)

    monkeypatch.setattr(tracking, "set_tags", stop_on_the_second)
    with pytest.raises(SystemExit):
        group.train_group([tiny_spec, second], outs)
    client = MlflowClient(tracking_uri=tiny_spec["tracking"]["uri"])
    for out in outs:
        assert client.get_run((out / "mlflow_run_id").read_text()).info.status == "KILLED"


def test_a_known_error_ends_a_tool_in_one_line_on_stderr_and_snakemakes_descriptor(
    capfd, monkeypatch
):
    """Issue 66: a known error (lengen.core.cli.KnownError: the pipeline's own, whose message
    names the file and the fix) ended a tool as the last line of a 16-20-line traceback. It is
    now the one line on stderr, also written to LENGEN_ERROR_FD (the workflow's jobs: Snakemake's
    own stderr), exit 2; any other error keeps its traceback."""
    import os

    from lengen.core.cli import one_line_errors
    from lengen.core.files import NoSpace, UnreadableState

    @one_line_errors
    def tool(err):
        raise err

    read, write = os.pipe()
    monkeypatch.setenv("LENGEN_ERROR_FD", str(write))
    for err in (
        UnreadableState("/r/spec.json: empty (the spec);\n  delete it"),
        NoSpace("no space left on /r (3 MB free)"),
    ):
        with pytest.raises(SystemExit) as ended:
            tool(err)
        assert ended.value.code == 2
        line = f"{type(err).__name__}: {' '.join(str(err).split())}"
        assert capfd.readouterr().err == line + "\n"
        assert os.read(read, 4096).decode() == line + "\n"
    os.close(write)
    with pytest.raises(ValueError, match="a bug"):  # not a known error: raised as it was
        tool(ValueError("a bug"))
    os.close(read)
    monkeypatch.setenv("LENGEN_ERROR_FD", str(write))  # a closed descriptor: stderr still has it
    with pytest.raises(SystemExit):
        tool(NoSpace("no space left on /r"))
    assert capfd.readouterr().err == "NoSpace: no space left on /r\n"
    # the job's log on a full disk (its stderr's write fails): the line still reaches Snakemake
    import errno
    import sys

    class FullDisk:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

    read, write = os.pipe()
    monkeypatch.setenv("LENGEN_ERROR_FD", str(write))
    monkeypatch.setattr(sys, "stderr", FullDisk())
    with pytest.raises(SystemExit) as ended:
        tool(NoSpace("no space left on /r (0 MB free)"))
    monkeypatch.undo()
    assert ended.value.code == 2
    assert os.read(read, 4096).decode() == "NoSpace: no space left on /r (0 MB free)\n"
    os.close(read)
    os.close(write)


def test_a_store_deleted_under_a_running_job_is_named_so_not_as_a_full_disk(tmp_path, monkeypatch):
    """SQLite answers a write to a store deleted under it with "readonly database": the job's
    line said the store "is not writable ... free space there"; it now says it was deleted or
    moved, and that a rerun makes a new one. A store still there keeps the writable advice."""
    import mlflow

    from lengen.core import tracking

    store = tmp_path / "mlflow.db"
    monkeypatch.setattr(mlflow, "get_tracking_uri", lambda: f"sqlite:///{store}")
    err = RuntimeError("(sqlite3.OperationalError) attempt to write a readonly database")
    said = str(tracking.store_fault(err))
    assert "was deleted or moved while this job wrote to it: rerun" in said
    store.write_bytes(b"")
    assert "is not writable" in str(tracking.store_fault(err))
