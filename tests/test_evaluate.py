"""Fixed test sets and the length-sweep evaluator."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from lengen.analysis.tables import TableError, read_eval_table
from lengen.core.provenance import config_hash
from lengen.model.model import GPTNeoX, ModelConfig
from lengen.tasks import parse_spec
from lengen.tasks import sparse_parity as sp
from lengen.tasks.sparse_parity import final_token_accuracy, read_testset, write_testset
from tests.helpers import make_spec

EVAL = {"lengths": [8, 20], "k_test": [1, 3, 6], "n_examples": 10, "batch_size": 4}


def test_testset_is_fixed_by_the_seed_and_covers_the_grid(tmp_path):
    from lengen.tasks.sparse_parity import testset_config

    write_testset(EVAL, 20, 5, tmp_path / "new" / "dir" / "t.npz")  # creates its folder
    assert testset_config(tmp_path / "new" / "dir" / "t.npz") == {"eval": EVAL, "n": 20, "seed": 5}
    write_testset(EVAL, 20, 5, tmp_path / "a.npz")
    write_testset(EVAL, 20, 5, tmp_path / "b.npz")
    write_testset(EVAL, 20, 6, tmp_path / "c.npz")
    a, b, c = (read_testset(tmp_path / f"{x}.npz") for x in "abc")
    assert sorted(a) == [(8, 1), (8, 3), (20, 1), (20, 3), (20, 6)]  # k < l only
    for key in a:
        assert a[key].shape == (10, key[0] + 3)
        np.testing.assert_array_equal(a[key], b[key])
        flagged = ((a[key][:, 1:-2:2] - 3) <= 10).sum(axis=1)
        assert (flagged == key[1]).all()
    assert any((a[key] != c[key]).any() for key in a)


def test_final_token_accuracy_matches_a_direct_computation():
    torch.manual_seed(0)
    model = GPTNeoX(ModelConfig(vocab_size=24, n_layer=1, n_head=2, d_model=16)).eval()
    tokens = sp.sample(np.random.default_rng(0), 13, 10, 2, 20).tokens
    acc = final_token_accuracy(model, tokens, batch_size=4)  # batches of 4, 4, 4, 1
    inputs = sp.test_example(sp.Batch(tokens, tokens * 0, None, None)).model_inputs()
    with torch.no_grad():
        pred = model(inputs["input_ids"], inputs["position_ids"])[:, -1].argmax(-1).numpy()
    assert acc == (pred == tokens[:, -1]).mean()


class ParityOracle(torch.nn.Module):
    """Sparse parity answered by rule (Eq. (20)): the XOR of the bits whose J <= N/2, read from
    the input; wrong_k flips the answer for examples with that many flagged J's."""

    def __init__(self, n: int, wrong_k: int | None = None):
        super().__init__()
        self.n, self.wrong_k = n, wrong_k
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x, ids):
        assert (ids == torch.arange(1, x.shape[1] + 1)).all()  # true IDs at test time
        j, bits = x[:, 1:-1:2] - 3, x[:, 2:-1:2] - sp.T0
        flagged = j <= self.n // 2
        label = (bits * flagged).sum(1) % 2
        if self.wrong_k is not None:
            label = torch.where(flagged.sum(1) == self.wrong_k, 1 - label, label)
        logits = torch.zeros(*x.shape, 4 + self.n)
        logits[torch.arange(len(x)), -1, sp.T0 + label] = 1.0
        return logits


def test_sparse_parity_evaluate_known_answers(tmp_path, monkeypatch):
    from lengen.analysis import evaluate as ev

    write_testset(EVAL, 20, 5, tmp_path / "test.npz")
    spec = make_spec("sparse_parity", task={"k_train": 3}, run_name="r", seed=7).source
    saved = {"spec": spec, "steps_run": 40, "stop_reason": "early stop"}  # no variant: GPT-NeoX

    def read(path, device):
        assert path == tmp_path / "m.pt" and device == "cpu"
        return saved

    monkeypatch.setattr(ev, "read_model_file", read)
    for wrong_k, expect in ((None, {1: 1.0, 3: 1.0, 6: 1.0}), (3, {1: 1.0, 3: 0.0, 6: 1.0})):

        def build(got, device, w=wrong_k):
            assert got is saved and device == "cpu"
            return ParityOracle(20, w)

        monkeypatch.setattr(ev, "model_from_saved", build)
        table = ev.evaluate(tmp_path / "m.pt", tmp_path / "test.npz", 4, tmp_path / "eval.csv")
        assert list(table.columns[:9]) == [
            "experiment",
            "variant",
            "run",
            "k_train",
            "seed",
            "length",
            "k_test",
            "n",
            "accuracy",
        ]
        assert set(table.experiment) == {"sparse_parity"}
        setup = {"spec": spec, "testset": sp.testset_config(tmp_path / "test.npz"), "batch_size": 4}
        assert set(table.config_hash) == {config_hash(setup)}
        assert table[["length", "k_test"]].values.tolist() == [
            [8, 1],
            [8, 3],
            [20, 1],
            [20, 3],
            [20, 6],
        ]
        assert table.accuracy.tolist() == [expect[k] for k in table.k_test]
        assert (table.n == 10).all() and (table.k_train == 3).all() and (table.seed == 7).all()
        assert set(table.variant) == {"neox"} and set(table.run) == {"r"}
        assert set(table.steps_run) == {40} and set(table.stop_reason) == {"early stop"}
        written = read_eval_table(tmp_path / "eval.csv")
        assert written.accuracy.tolist() == table.accuracy.tolist()
    # beside a model with an MLflow run, the accuracies go to that run (the spec's store)
    calls = []
    fake = type(
        "Tracking",
        (),
        {
            name: staticmethod(lambda *a, n=name: calls.append((n, a)))
            for name in ("resume_run", "log_metrics", "log_artifact", "end_run")
        },
    )
    monkeypatch.setattr(ev, "tracking", fake)
    (tmp_path / "mlflow_run_id").write_text("abc")
    ev.evaluate(tmp_path / "m.pt", tmp_path / "test.npz", 4, tmp_path / "eval.csv")
    assert calls[0] == ("resume_run", (spec["tracking"]["uri"], tmp_path / "mlflow_run_id"))
    assert calls[1][0] == "log_metrics" and calls[1][1][0]["acc_len20_k6"] == 1.0
    assert [c[0] for c in calls[2:]] == ["log_artifact", "end_run"]


def test_generation_evaluate_known_answers(tmp_path, monkeypatch):
    from lengen.analysis import evaluate as ev
    from tests.test_scratchpad import Oracle

    eval_cfg = {"lengths": [10, 16], "n_examples": 6, "batch_size": 4}
    for experiment, task in (
        ("parity_scratchpad", {"jump": 2, "scheme": "ppc"}),
        ("variable_assignment", {"depth": 2, "n_vars": 20, "scratchpad": True, "scheme": "ppc"}),
        (
            "variable_assignment",
            {"depth": 2, "n_vars": 20, "scratchpad": False, "scheme": "rope_pose"},
        ),
    ):
        spec = make_spec(experiment, task=task, variant="v", run_name="r", seed=1).source
        testset = ev.scratchpad_testset(parse_spec(spec), eval_cfg, 3)
        assert all(
            getattr(b, "scratchpad", True) is task.get("scratchpad", True) for b in testset.values()
        )
        examples = [(b.test_example(task["scheme"]), b.prompt_len) for b in testset.values()]
        p16 = testset[16].prompt_len
        stopped = task["scheme"] != "ppc"  # an early-stopped run, and one that ran all steps
        saved = {
            "spec": spec,
            **(
                {"steps_run": 60, "stop_reason": "did not learn in 60 steps"}
                if stopped
                else {"steps_run": 100, "stop_reason": "steps"}
            ),
        }

        def read(path, device, s=saved):
            assert path == tmp_path / "m.pt" and device == "cpu"
            return s

        oracle = Oracle(examples, ppc=task["scheme"] == "ppc", wrong_tokens=[(p16, 4, 0)])

        def build(got, device, s=saved, o=oracle):
            assert got is s and device == "cpu"
            return o

        monkeypatch.setattr(ev, "read_model_file", read)
        monkeypatch.setattr(ev, "model_from_saved", build)
        table = ev.evaluate_scratchpad(tmp_path / "m.pt", eval_cfg, 3, tmp_path / "e.csv")
        param = "jump" if experiment == "parity_scratchpad" else "depth"
        assert list(table.columns[:12]) == [
            "experiment",
            "variant",
            "run",
            "scheme",
            "scratchpad",
            param,
            "seed",
            "length",
            "n",
            "accuracy",
            "steps_run",
            "stop_reason",
        ]
        ids = table[["experiment", "variant", "run", "seed"]].drop_duplicates().values.tolist()
        assert ids == [[experiment, "v", "r", 1]]
        assert set(table.scratchpad) == {task.get("scratchpad", True)}
        assert table.length.tolist() == [10, 16]
        assert table.accuracy.tolist() == [1.0, 5 / 6], experiment  # one wrong token at 16
        assert (table.n == 6).all()
        assert set(table.steps_run) == {60 if stopped else 100}  # as saved
        assert set(table.stop_reason) == {"did not learn in 60 steps" if stopped else "steps"}
        setup = {"spec": spec, "eval": eval_cfg, "test_seed": 3}
        assert set(table.config_hash) == {config_hash(setup)}
        assert set(table.scheme) == {task["scheme"]}
        assert set(table[param]) == {task[param]}


def test_combine_sorts_by_setting_seed_length(tmp_path):
    from lengen.analysis.tables import combine

    paths = []
    for variant, jump, seed in (("ppc", 2, 1), ("absolute", 1, 0), ("ppc", 1, 1), ("ppc", 1, 0)):
        rows = [
            dict(
                experiment="parity_scratchpad",
                variant=variant,
                jump=jump,
                seed=seed,
                length=n,
                n=8,
                accuracy=0.5,
            )
            for n in (30, 10)
        ]
        paths.append(tmp_path / f"{variant}{jump}{seed}.csv")
        pd.DataFrame(rows).to_csv(paths[-1], index=False)
    out = combine(paths, tmp_path / "all" / "table.csv")
    assert list(zip(out.variant, out.jump, out.seed, out.length, strict=True)) == [
        ("absolute", 1, 0, 10),
        ("absolute", 1, 0, 30),
        ("ppc", 1, 0, 10),
        ("ppc", 1, 0, 30),
        ("ppc", 1, 1, 10),
        ("ppc", 1, 1, 30),
        ("ppc", 2, 1, 10),
        ("ppc", 2, 1, 30),
    ]
    assert out.index.tolist() == list(range(8))
    assert pd.read_csv(tmp_path / "all" / "table.csv").equals(out)
    # sparse parity: the grid is (length, k_test); a table missing one k_test is named
    sp_paths = []
    for k_train, ks in ((4, (1, 3)), (2, (1, 3)), (3, (1,))):
        rows = [
            dict(
                experiment="sparse_parity",
                variant="neox",
                k_train=k_train,
                seed=0,
                length=20,
                k_test=k,
                n=8,
                accuracy=0.5,
            )
            for k in ks
        ]
        sp_paths.append(tmp_path / f"sp{k_train}.csv")
        pd.DataFrame(rows).to_csv(sp_paths[-1], index=False)
    out = combine(sp_paths[:2], tmp_path / "sp.csv")
    assert list(zip(out.k_train, out.k_test, strict=True)) == [(2, 1), (2, 3), (4, 1), (4, 3)]
    with pytest.raises(
        TableError, match="sp3.csv: 1 test points where the other tables of its variant have 2"
    ):
        combine(sp_paths, tmp_path / "sp.csv")
    # a variant with its own eval lengths (variants.<v>.section.eval) joins the table
    own = tmp_path / "equal.csv"
    rows = [
        dict(
            experiment="parity_scratchpad",
            variant="ppc_equal",
            jump=1,
            seed=0,
            length=n,
            n=8,
            accuracy=0.5,
        )
        for n in (6, 12, 18)
    ]
    pd.DataFrame(rows).to_csv(own, index=False)
    out = combine([*paths, own], tmp_path / "with_equal.csv")
    assert sorted(out[out.variant == "ppc_equal"].length) == [6, 12, 18]


def test_a_fused_groups_evaluation_equals_each_model_alone(tmp_path, smoke_config, monkeypatch):
    """`evaluate generate` with a fused group's models (lengen.analysis.evaluate: its members
    that share a test set decode it as one model) writes each member the table it gets alone:
    PPC parity at jump 1 with two seeds (one fused pass) and jump 2 (its own test set). Scoring
    is swapped for a hash of what each run generated, so every accuracy depends on the run's own
    tokens (untrained models would score 0 everywhere and prove nothing)."""
    import pandas as pd

    from lengen import tasks
    from lengen.analysis import evaluate
    from lengen.model.modelfile import write_model_file
    from lengen.tasks import parse_spec
    from lengen.train.train import build_model

    def content(gen, tokens, ids, check_positions):  # a row "passes" by what it generated
        return (gen.tokens.sum(-1) + gen.position_ids.sum(-1) + tokens.sum(-1)) % 3 == 0

    monkeypatch.setattr(evaluate, "exact_match", content)
    paths = []
    for jump, run in ((1, 0), (1, 1), (2, 0)):
        spec = tasks.generation_spec(smoke_config, "parity_scratchpad", "ppc", jump, run)
        spec = parse_spec(spec)
        folder = tmp_path / f"k{jump}" / f"seed{run}"
        folder.mkdir(parents=True)
        write_model_file(build_model(spec), spec, folder / "model.pt", 7, "steps")
        paths.append(folder / "model.pt")
    eval_cfg = {**smoke_config["parity_scratchpad"]["eval"], "n_examples": 24, "batch_size": 10}
    alone = [evaluate.evaluate_scratchpad(p, eval_cfg, 0, p.parent / "alone.csv") for p in paths]
    outs = [p.parent / "fused.csv" for p in paths]
    evaluate.main(
        [
            "generate",
            "--model",
            *map(str, paths),
            "--eval",
            json.dumps(eval_cfg),
            "--seed",
            "0",
            "--out",
            *map(str, outs),
        ]
    )
    for want, out in zip(alone, outs, strict=True):
        pd.testing.assert_frame_equal(pd.read_csv(out), pd.read_csv(out.parent / "alone.csv"))
        assert len(want) == len(eval_cfg["lengths"])
    # the two runs decoded in one pass generated different things: a swap would show
    assert list(alone[0]["accuracy"]) != list(alone[1]["accuracy"])


def test_check_lengths_holds_each_variant_to_its_grid(tmp_path):
    """A table is held to the grid the config asks for, variant by variant: the same lengths pass;
    a missing or an extra length, or a variant the config does not score, is a TableError
    naming the file, the lengths and the fix; a table without variants is held to ''."""
    from lengen.analysis.tables import check_lengths

    path = tmp_path / "eval.csv"
    table = pd.DataFrame({"variant": ["a", "a", "b"], "length": [10, 20, 10]})
    check_lengths(table, {"a": [20, 10], "b": [10], "c": [5]}, path, "FIX")
    cut = (
        rf"{path}: a scored at lengths \[10, 20\], the config asks for \[10, 20, 30\] "
        r"\(missing \[30\], not asked \[\]: cut off, or an older config's\?\); FIX$"
    )
    with pytest.raises(TableError, match=cut):
        check_lengths(table, {"a": [10, 20, 30], "b": [10]}, path, "FIX")
    extra = r"b scored at lengths \[10\], the config asks for \[\] \(missing \[\], not asked \[10\]"
    with pytest.raises(TableError, match=extra):
        check_lengths(table, {"a": [10, 20], "b": []}, path, "FIX")
    unknown = rf"{path}: variant 'b' is not one the config scores \(\['a'\]\); FIX$"
    with pytest.raises(TableError, match=unknown):
        check_lengths(table, {"a": [10, 20]}, path, "FIX")
    plain = pd.DataFrame({"length": [4, 8]})
    check_lengths(plain, {"": [8, 4]}, path, "FIX")
    no_variant = r"csv: scored at lengths \[4, 8\], the config asks for \[4\]"
    with pytest.raises(TableError, match=no_variant):
        check_lengths(plain, {"": [4]}, path, "FIX")


def _sp_rows(**over) -> pd.DataFrame:
    """A sparse-parity eval table: one model (K_train 4, seed 0), lengths 20, 40, k_test 1, 3."""
    rows = [
        dict(
            experiment="sparse_parity",
            variant="neox",
            k_train=4,
            seed=0,
            length=n,
            k_test=k,
            n=8,
            accuracy=0.5,
        )
        for n in (20, 40)
        for k in (1, 3)
    ]
    return pd.DataFrame(rows).assign(**over)


def test_read_eval_table_names_each_defect_and_its_column(tmp_path):
    """read_eval_table: an unreadable file names its parser error; no rows or no experiment; NaN
    and non-integral values name every such key column (the last one, `n`, too); an accuracy
    outside [0, 1] names 'accuracy'; integral floats come back int64; with `lengths`, the grid
    is checked naming the file and its fix."""
    from lengen.analysis.tables import read_eval_table

    path = tmp_path / "eval.csv"
    fix = f"delete {path} and rerun its eval rule"

    def refused(table: pd.DataFrame | str) -> str:
        path.write_text(table) if isinstance(table, str) else table.to_csv(path, index=False)
        with pytest.raises(TableError) as err:
            read_eval_table(path)
        assert str(err.value).startswith(f"{path}: ") and str(err.value).endswith(fix)
        return str(err.value)

    assert "unreadable (EmptyDataError: " in refused("")
    no_experiment = _sp_rows().drop(columns="experiment")
    assert f"no rows or no 'experiment' column; {fix}" in refused(no_experiment)
    nan_and_half = _sp_rows(seed=[0, 0, 0, None], length=[20, 20, 40.5, 40])
    assert "values in ['seed', 'length'] (a file cut mid-line?)" in refused(nan_and_half)
    assert "values in ['n'] " in refused(_sp_rows(n=[8, 8, 8, 8.5]))
    assert "values in ['k_train'] " in refused(_sp_rows(k_train=[4, 4, 4.5, 4]))
    assert "values in ['accuracy'] " in refused(_sp_rows(accuracy=[0.5, 0.5, 0.5, 1.5]))
    assert "values in ['accuracy'] " in refused(_sp_rows(accuracy=[0.5, -0.1, 0.5, 0.5]))
    _sp_rows(n=8.0, length=[20.0, 20.0, 40.0, 40.0]).to_csv(path, index=False)
    table = read_eval_table(path)
    assert (table.dtypes[["k_train", "seed", "length", "k_test", "n"]] == "int64").all()
    assert read_eval_table(path, {"neox": [40, 20]}).equals(table)
    with pytest.raises(
        TableError,
        match=rf"^{path}: neox scored at lengths \[20, 40\], the "
        rf"config asks for \[20\] .*; {fix}$",
    ):
        read_eval_table(path, {"neox": [20]})


def test_combine_checks_the_grid_per_variant_and_writes_where_asked(tmp_path):
    """combine: with `lengths`, each table is held to the config's grid; of a variant's tables
    the one with fewer test points is named, whichever comes first (grids that do not nest
    included); tables without a variant column and a single row combine; the output folder is
    made, however deep."""
    from lengen.analysis.tables import combine

    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    _sp_rows().to_csv(a, index=False)
    _sp_rows(seed=1).to_csv(b, index=False)
    out = tmp_path / "x" / "y" / "all.csv"
    assert len(combine([a, b], out, {"neox": [20, 40]})) == 8 and out.exists()
    with pytest.raises(TableError, match=r"a.csv: neox scored at lengths \[20, 40\]"):
        combine([a, b], out, {"neox": [20, 40, 60]})
    # grids that do not nest: a has (20, 40) x (1, 3); c has (20, 60, 80) x (1, 3) -> a is short
    c = tmp_path / "c.csv"
    rows = [
        dict(
            experiment="sparse_parity",
            variant="neox",
            k_train=4,
            seed=2,
            length=n,
            k_test=k,
            n=8,
            accuracy=0.5,
        )
        for n in (20, 60, 80)
        for k in (1, 3)
    ]
    pd.DataFrame(rows).to_csv(c, index=False)
    with pytest.raises(
        TableError,
        match=r"a.csv: 4 test points where the other tables of its "
        r"variant have 6",
    ):
        combine([a, c], out)
    plain = [tmp_path / "p0.csv", tmp_path / "p1.csv"]
    for seed, path in enumerate(plain):
        _sp_rows(seed=seed).drop(columns="variant").to_csv(path, index=False)
    assert combine(plain, out)["seed"].tolist() == [0] * 4 + [1] * 4
    one = tmp_path / "one.csv"
    _sp_rows().iloc[:1].to_csv(one, index=False)
    assert len(combine([one], out)) == 1


def test_an_evaluation_rerun_logs_only_what_changed(tmp_path):
    """Issue 66: every rerun of an evaluation logged its metrics again (MLflow held each twice).
    Values the run holds are skipped; a changed value is logged as its metric's next step, so
    MLflow shows the newest and keeps the earlier as history."""
    from mlflow.tracking import MlflowClient

    from lengen.core import tracking

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking.prepare_store(uri, ["e"])
    run_id = tracking.start_run(uri, "e", "r", tmp_path / "mlflow_run_id").info.run_id
    tracking.end_run()
    for metrics in ({"a": 1.0, "b": 0.5}, {"a": 1.0, "b": 0.5}, {"a": 1.0, "b": 0.75, "c": 2.0}):
        tracking.resume_run(uri, tmp_path / "mlflow_run_id")
        tracking.log_metrics(metrics)
        tracking.end_run()
    client = MlflowClient(uri)
    history = {k: [(m.step, m.value) for m in client.get_metric_history(run_id, k)] for k in "abc"}
    assert history == {"a": [(0, 1.0)], "b": [(0, 0.5), (1, 0.75)], "c": [(0, 2.0)]}
    assert client.get_run(run_id).data.metrics == {"a": 1.0, "b": 0.75, "c": 2.0}


def test_a_model_file_copied_from_another_run_is_refused(tmp_path, smoke_config):
    """Issue 77's drill: K1's model.pt copied over K2's. The model file is bound to its run: where
    its folder holds training's spec.json, a model.pt saved for another spec is refused, one line
    naming both runs; its own folder's model reads; a folder without spec.json is not checked."""
    from lengen import tasks
    from lengen.model.modelfile import ModelFileError, read_model_file, write_model_file
    from lengen.train.train import build_model

    folders = {}
    for jump in (1, 2):
        spec = parse_spec(tasks.generation_spec(smoke_config, "parity_scratchpad", "ppc", jump, 0))
        folder = tmp_path / "ppc" / f"k{jump}" / "seed0"
        folder.mkdir(parents=True)
        write_model_file(build_model(spec), spec, folder / "model.pt", 7, "steps")
        (folder / "spec.json").write_text(json.dumps(spec.source, indent=2, sort_keys=True))
        folders[jump] = folder
    assert read_model_file(folders[2] / "model.pt")["spec"]["run_name"].endswith("seed0")
    (folders[2] / "model.pt").write_bytes((folders[1] / "model.pt").read_bytes())
    with pytest.raises(ModelFileError) as refused:
        read_model_file(folders[2] / "model.pt")
    line = str(refused.value)
    assert "\n" not in line and str(folders[2] / "model.pt") in line
    k1, k2 = (json.loads((f / "spec.json").read_text())["run_name"] for f in folders.values())
    assert k1 != k2 and f"trained for {k1}" in line and f"spec.json is {k2}" in line
    (folders[2] / "spec.json").unlink()  # a model directory of one's own: not checked
    assert read_model_file(folders[2] / "model.pt")["spec"]["run_name"] == k1
    # spec.json edited by hand (train.lr), the model its own: the line says so and never
    # advises deleting the valid model; its advice (delete spec.json) reads the model again
    edited = json.loads((folders[1] / "spec.json").read_text())
    edited["train"]["lr"] *= 2
    (folders[1] / "spec.json").write_text(json.dumps(edited))
    with pytest.raises(ModelFileError) as refused:
        read_model_file(folders[1] / "model.pt")
    line = str(refused.value)
    assert "differs in train.lr" in line and f"delete {folders[1] / 'spec.json'}" in line
    assert f"delete {folders[1] / 'model.pt'}" not in line
    (folders[1] / "spec.json").unlink()
    assert read_model_file(folders[1] / "model.pt")["spec"]["run_name"] == k1


def test_a_table_refuses_another_folders_run_and_a_run_twice(tmp_path):
    """combine(): an eval.csv whose rows name another run than its folder (an evaluation of a
    copied model file) or a run another table holds is refused, naming the file and both runs."""
    from lengen.analysis.tables import check_runs

    def table(run):
        return pd.DataFrame({"run": [run, run], "length": [10, 20]})

    a = tmp_path / "neox" / "K1" / "seed0" / "eval.csv"
    b = tmp_path / "neox" / "K2" / "seed0" / "eval.csv"
    check_runs([a, b], [table("neox/K1/seed0"), table("neox/K2/seed0")])
    with pytest.raises(
        TableError,
        match=r"K2/seed0/eval.csv: holds run neox/K1/seed0, its folder "
        r"is run neox/K2/seed0",
    ):
        check_runs([a, b], [table("neox/K1/seed0"), table("neox/K1/seed0")])
    other = tmp_path / "elsewhere.csv"  # not a run's folder: only duplicates are checked
    with pytest.raises(TableError, match="run neox/K1/seed0 is already in"):
        check_runs([a, other], [table("neox/K1/seed0"), table("neox/K1/seed0")])
