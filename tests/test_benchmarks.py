"""The benchmarks run on the test's device (`pytest --device cuda -m device` on a GPU machine) and
print what the README quotes; the step-time benchmark's wall-time schedule has known answers."""

from __future__ import annotations

import json
import re
import subprocess
import tarfile

import yaml

from .conftest import ROOT
from .helpers import load_script, on_device

BENCH = ROOT / "benchmarks"


def _smoke_on(device: str, tmp_path) -> str:
    """The smoke tier on `device`, in the GPU tiers' bf16 there; its path."""
    cfg = on_device(yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text()), device)
    cfg["results_dir"] = str(tmp_path / "results")
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_step_time_measures_the_trainers_step_for_synthetic_and_language_jobs(tmp_path, device):
    bench = load_script(BENCH / "step_time.py")
    out = tmp_path / "steps.json"
    only = ["sparse_parity/neox", "natural_language/h_long"]
    bench.main(
        [
            "--config",
            _smoke_on(device, tmp_path),
            "--device",
            device,
            "--steps",
            "2",
            "--warmup",
            "1",
            "--only",
            *only,
            "--json",
            str(out),
        ]
    )
    got = json.loads(out.read_text())
    assert [k["kind"] for k in got["kinds"]] == only
    for k in got["kinds"]:
        assert k["s_per_step"] > 0 and k["tokens_per_s"] > 0 and k["tflops"] > 0
        assert (k["peak_gib"] is not None) == (device == "cuda")
    lm = got["kinds"][1]
    assert lm["seq_len"] == 128 and lm["batch"] == 2  # smoke h_long: Lbar tokens fed, batch 2
    assert got["ceiling_tflops"] > 0
    assert got["estimate"] is None  # not every kind measured: no tier total
    sp = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())["sparse_parity"]
    want = {"jobs": len(sp["k_train"]), "steps": sp["train"]["steps"], "gpus": 1}
    assert got["jobs"]["sparse_parity/neox"] == want


def test_wall_time_schedules_single_and_multi_device_jobs():
    bench = load_script(BENCH / "step_time.py")
    kinds = [
        bench.Kind("a", {"train": {"steps": 3600}}, jobs=3),
        bench.Kind("lm", {"train": {"steps": 7200}}, jobs=1, gpus=8),
    ]
    measured = {
        "a": bench.Measured("a", 1, 1, 1, 1.0, 1.0, 1.0, 1.0, None),
        "lm": bench.Measured("lm", 1, 1, 1, 1.0, 4.0, 1.0, 1.0, None),
    }
    # one device: 3 x 1 h + 8 h; a node of 8: the LM job 8 h / 8 on all, then 1 h on three
    assert bench.wall_time(kinds, measured, 8) == {
        "jobs": 4,
        "one_device_h": 11.0,
        "node_h": 2.0,
        "node_gpus": 8,
    }
    assert bench.wall_time(kinds, measured, 2)["node_h"] == 4.0 + 1.0 + 1.0  # 8 h / 2, then 1+1


def test_throughput_prints_tokens_ceiling_and_ratio(tmp_path, device, capsys):
    bench = load_script(BENCH / "throughput.py")
    bench.main(["--config", _smoke_on(device, tmp_path), "--device", device, "--steps", "12"])
    out = capsys.readouterr().out
    for line in ("matmul ceiling", "lengen GPTNeoX", "transformers GPTNeoX", "ratio lengen"):
        assert line in out
    assert ("peak GPU memory" in out) == (device == "cuda")


def test_leave_one_out_benchmark_times_the_batched_forward(device, capsys):
    bench = load_script(BENCH / "loo.py")
    bench.main(
        [
            "--config",
            str(ROOT / "config" / "smoke.yaml"),
            "--device",
            device,
            "--reps",
            "1",
            "--vocab",
            "64",
        ]
    )
    out = capsys.readouterr().out
    assert "63 masks" in out and "batched leave-one-out" in out and "speedup" in out


def test_decode_benchmark_times_both_caches_on_the_same_output(device, capsys, tmp_path):
    bench = load_script(BENCH / "decode.py")
    bench.main(
        [
            "--config",
            _smoke_on(device, tmp_path),
            "--device",
            device,
            "--reps",
            "1",
            "--batch",
            "8",
            "--fused",
            "2",
        ]
    )
    out = capsys.readouterr().out
    assert "growing cache" in out and "preallocated cache" in out and "ratio" in out
    assert "8 prompts" in out
    assert "2 runs one by one" in out and "2 runs as one fused group" in out
    assert "fused = alone, whole sequences: 1.000 (worst run)" in out  # CPU fp32: the same


def test_loss_memory_compares_the_chunked_loss_with_the_one_piece_loss(tmp_path, device):
    bench = load_script(BENCH / "loss_memory.py")
    out = tmp_path / "loss.json"
    bench.main(
        [
            "--device",
            device,
            "--tokens",
            "256",
            "--d-model",
            "16",
            "--vocab",
            "500",
            "--chunks",
            "64",
            "--json",
            str(out),
        ]
    )
    rows = json.loads(out.read_text())["rows"]
    assert [r["chunk"] for r in rows] == [0, 64] and rows[0]["memory_ratio"] == 1.0
    assert abs(rows[1]["loss"] - rows[0]["loss"]) < 1e-5  # the same loss, in chunks
    assert all(r["extra_gib"] > 0 and r["seconds"] > 0 for r in rows)


def test_checkpoint_cost_is_measured_per_experiment_and_set_against_step_time(tmp_path):
    bench = load_script(BENCH / "checkpoint.py")
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps({"kinds": [{"kind": "sparse_parity/neox", "s_per_step": 0.5}]}))
    out = tmp_path / "ckpt.json"
    bench.main(
        [
            "--config",
            _smoke_on("cpu", tmp_path),
            "--dir",
            str(tmp_path / "w"),
            "--repeats",
            "1",
            "--max-params",
            "1e5",
            "--steps-from",
            str(steps),
            "--json",
            str(out),
        ]
    )
    rows = {r["kind"]: r for r in json.loads(out.read_text())["rows"]}
    sp_every = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())["sparse_parity"]
    sp = rows["sparse_parity"]
    assert sp["measured"] and sp["bytes"] > 12 * sp["params"]  # fp32 weights + two moments
    assert sp["overhead"] == sp["save_s"] / (sp_every["train"]["checkpoint_every"] * 0.5)
    assert "parity_scratchpad" in rows and "natural_language/h_short" in rows
    assert not list((tmp_path / "w").iterdir())  # nothing left behind


def test_fused_agreement_scores_trained_members_alone_and_fused(device, capsys, tmp_path):
    """Issue 63, item 5 d: members of a fused group (here untrained, saved as the trainer saves
    them) decoded alone and as one group: on a CPU in fp32 every generation is the same and so
    is each member's exact match; on a GPU the agreement is measured and written."""
    from lengen import tasks
    from lengen.config.config import load
    from lengen.model.modelfile import write_model_file
    from lengen.tasks import parse_spec
    from lengen.train.train import build_model

    bench = load_script(BENCH / "fused_agreement.py")
    config = _smoke_on(device, tmp_path)
    cfg = load(config)
    paths = []
    for run in (0, 1):
        spec = parse_spec(tasks.generation_spec(cfg, "parity_scratchpad", "ppc", 1, run))
        paths.append(tmp_path / f"seed{run}.pt")
        write_model_file(build_model(spec), spec, paths[-1], 4, "steps")
    out = tmp_path / "agreement.json"
    bench.main(
        ["--config", config, "--device", device, "--models", *map(str, paths), "--json", str(out)]
    )
    rows = json.loads(out.read_text())["rows"]
    lengths = cfg["parity_scratchpad"]["eval"]["lengths"]
    assert sorted({r["length"] for r in rows}) == sorted(lengths) and len(rows) == 2 * len(lengths)
    assert {r["run"] for r in rows} == {"ppc/k1/seed0", "ppc/k1/seed1"}
    if device == "cpu":
        assert all(r["same_generation"] == 1.0 for r in rows)
        assert all(r["accuracy_alone"] == r["accuracy_fused"] for r in rows)
    assert "fused = alone, whole generations:" in capsys.readouterr().out
    other = parse_spec(tasks.generation_spec(cfg, "parity_scratchpad", "ppc", 2, 0))
    write_model_file(build_model(other), other, tmp_path / "jump2.pt", 4, "steps")
    import pytest

    with pytest.raises(SystemExit, match="differ in their task"):
        bench.main(["--config", config, "--models", str(paths[0]), str(tmp_path / "jump2.pt")])


def _fused_smoke(tmp_path) -> str:
    """The smoke tier with its runs fused in pairs (the gpu tier's grouping, at smoke size)."""
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg["runtime"]["fuse_runs"] = 2
    path = tmp_path / "fused.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_host_batches_times_every_fused_variants_group_batch(tmp_path, capsys):
    from lengen.config import plan
    from lengen.config.config import load

    bench = load_script(BENCH / "host_batches.py")
    config, out = _fused_smoke(tmp_path), tmp_path / "host.json"
    bench.main(["--config", config, "--steps", "2", "--start", "3", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    cfg = load(config)
    fused = [
        (e, v) for e in plan.experiments(cfg) for v in cfg[e]["variants"] if plan.fused(cfg, e, v)
    ]
    assert [(r["experiment"], r["variant"]) for r in rows] == fused
    assert all(r["ms_per_batch"] > 0 and r["runs"] <= 2 for r in rows)
    assert "one fused group's batch" in capsys.readouterr().out


def test_padding_counts_each_grouping_against_the_runs_own_tokens(tmp_path):
    """benchmarks/padding.py: by setting, every group holds one jump or depth; the tokens fed are
    never fewer than the runs' own, and a group of one run feeds exactly its own."""
    from lengen.config import plan
    from lengen.config.config import load

    bench = load_script(BENCH / "padding.py")
    cfg = load(_fused_smoke(tmp_path))
    runs = plan.runs(cfg, "parity_scratchpad", "ppc")
    assert all(len({r.value for r in g}) == 1 for g in bench.by_setting(runs, 2))
    rows = bench.measure(cfg, 3)
    assert {r["grouping"] for r in rows} == {"planned", "by_setting"}
    assert all(r["fed_over_own"] >= 1 and 0 <= r["padding_share"] < 1 for r in rows)
    single = [r for r in rows if r["runs_per_group"] == "1-1"]
    assert single  # the smoke ablations: one run each
    assert all(r["fed_over_own"] == 1 for r in single)


def test_jagged_linears_equal_the_padded_ones_on_the_real_tokens(tmp_path, device, capsys):
    """benchmarks/jagged.py: a grouped GEMM over each run's own tokens gives the padded batched
    matmul's outputs and weight gradients on the real tokens (fp32 on a CPU: to rounding), and
    the padded way feeds at least the runs' own tokens."""
    bench = load_script(BENCH / "jagged.py")
    out = tmp_path / "jagged.json"
    dtype = "bf16" if device == "cuda" else "fp32"  # the GPU's grouped GEMM wants bf16
    bench.main(
        [
            "--config",
            _fused_smoke(tmp_path),
            "--group",
            "parity_scratchpad/ppc",
            "--device",
            device,
            "--dtype",
            dtype,
            "--samples",
            "3",
            "--json",
            str(out),
        ]
    )
    row = json.loads(out.read_text())
    assert row["runs"] == 2 and row["samples"] == 3
    assert row["tokens_fed_padded"] >= row["tokens_own"] > 0
    assert row["max_rel_difference"] < (2e-2 if dtype == "bf16" else 1e-5)
    assert row["ms_padded"] > 0 and row["ms_grouped"] > 0
    assert "grouped GEMM (each run's own)" in capsys.readouterr().out


def test_gpu_acceptance_packs_its_out_dir_after_every_step(tmp_path):
    """ARCHIVE=FILE: the acceptance run's folder as one archive, made anew after each step and at
    the end, so a host that gives back a few files (or cuts the command) keeps what finished; a
    step not asked for does not run."""
    out, archive = tmp_path / "acc", tmp_path / "acc.tgz"
    env = {"PATH": "/usr/bin:/bin", "ARCHIVE": str(archive), "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(BENCH / "gpu_acceptance.sh"), str(out), "no_such_step"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["acc", "acc/machine.txt"]
    assert not (tmp_path / "acc.tgz.part").exists()


def test_the_lease_call_runs_its_four_steps_in_order_within_its_budget(tmp_path):
    """`gpu_acceptance.sh OUT lease`, the one call of a 15-minute lease: the CUDA tests, the
    trainer's fused step, the gpu-smoke tier with fused_agreement's group first, fused_agreement,
    in that order, each limited to its cap or what LEASE_BUDGET leaves after the later steps'
    caps (the four fill 530 s, counted from the script's first line, each step's kill inside its
    limit: 60 s or more to spare in a 600 s command); with too little budget, a step is not
    started and says so, the run's status 1. It writes the versions it tests beside the lock's.
    A stand-in `python` records each command."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python").write_text(
        '#!/bin/sh\necho "$*" >> "$CALLS"\n'
        '[ "$1" = - ] && echo results/gpu-smoke/parity_scratchpad/ppc/fused0.done\nexit 0\n'
    )
    (shim / "python").chmod(0o755)

    def lease(budget: int):
        out, calls = tmp_path / f"out{budget}", tmp_path / f"calls{budget}"
        env = {
            "PATH": f"{shim}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "CALLS": str(calls),
            "LEASE_BUDGET": str(budget),
            "GPU_SMOKE_DIR": str(tmp_path / "smoke"),
        }
        done = subprocess.run(
            ["bash", str(BENCH / "gpu_acceptance.sh"), str(out), "lease"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        logs = [
            (out / f"{n}.log")
            for n in ("pytest_cuda", "group_step_eager", "gpu_smoke", "fused_agreement")
        ]
        heads = "\n".join(p.read_text().splitlines()[0] for p in logs if p.exists())
        return done, calls.read_text().splitlines(), heads

    done, calls, text = lease(530)
    assert done.returncode == 0, text
    assert any(c.startswith("- ") and c.endswith("versions.txt") for c in calls)
    steps = [c for c in calls if not (c.startswith(("-c ", "- ")) or c == "-")]  # not machine.txt
    assert [c.split()[1 if c.startswith("-m") else 0] for c in steps] == [
        "pytest",
        "benchmarks/group_step.py",
        "snakemake",
        "benchmarks/fused_agreement.py",
    ]
    assert "--device cuda -m device" in steps[0]
    assert "--runs 8" in steps[1] and "--json" in steps[1]
    assert steps[2].endswith("--prioritize results/gpu-smoke/parity_scratchpad/ppc/fused0.done")
    limits = [int(x) for x in re.findall(r"== \w+ \(limit (\d+) s\)", text)]
    # the first step's share is what the budget leaves less the seconds the script has run
    # (under 1 s on an idle machine, a few on a loaded one): budget - later caps - elapsed
    assert 85 <= limits[0] <= 90 and limits[1:] == [75, 320, 45] and sum(limits) <= 530
    done, calls, text = lease(100)
    assert done.returncode == 1
    assert "== pytest_cuda: not started" in text and "== group_step_eager: not started" in text
    smoke, agreement = [int(x) for x in re.findall(r"\(limit (\d+) s\)", text)]
    assert 50 <= smoke <= 55 and agreement == 45  # 100 - 45 kept for the last, less elapsed


def test_launches_counts_the_trainers_fused_step_by_phase(tmp_path, capsys):
    """benchmarks/launches.py: the operators a fused step dispatches, by phase, through the
    trainer's own step. The fused forward is one pass whatever R; each run's loss adds operators;
    the optimizer is the CUDA path's fused AdamW (a few operators for every weight); the phases
    sum to the total; a phase's count is what ran under it."""
    import torch

    bench = load_script(BENCH / "launches.py")
    count = bench.Count()
    a = torch.ones(3)
    with count:
        bench.phased(count, "forward", lambda: a + a)()
        a.view(3, 1).sum().item()  # a view is no launch; .item() reads a value on the host
    assert count.ops == {"forward": 1, "other": 2} and count.syncs == {"other": 1}
    out = tmp_path / "launches.json"
    got = bench.main(
        [
            "--config",
            _fused_smoke(tmp_path),
            "--groups",
            "parity_scratchpad/ppc",
            "--runs",
            "1",
            "2",
            "--steps",
            "1",
            "--precision",
            "fp32",
            "--json",
            str(out),
        ]
    )
    [group] = got["groups"]
    one, two = group["rows"]
    assert (one["runs"], two["runs"]) == (1, 2)
    for row in (one, two):
        ops = row["ops_per_step"]
        assert ops["forward"] > 0 and ops["backward"] > ops["forward"] and ops["clip"] > 0
        assert 0 < ops["optimizer"] <= 10  # fused AdamW, not a loop over the weights
        assert row["total"] == sum(ops.values())
    assert one["ops_per_step"]["forward"] == two["ops_per_step"]["forward"]
    assert group["per_added_run"]["loss"] > 0
    assert json.loads(out.read_text())["groups"][0]["rows"][1]["runs"] == 2
    assert "operators per step" in capsys.readouterr().out


def test_the_disk_benchmark_counts_a_file_once_and_names_its_parts(tmp_path):
    """benchmarks/disk.py: a file with two names (a finished model's hard link) counts once; the
    parts are each top-level entry of the results folder and the reports' report.html apart."""
    import os

    bench = load_script(BENCH / "disk.py")
    results, reports = tmp_path / "results", tmp_path / "reports"
    (results / "run").mkdir(parents=True)
    reports.mkdir()
    (results / "run" / "model.pt").write_bytes(b"x" * 2**20)
    (results / "run" / "finished").mkdir()
    os.link(results / "run" / "model.pt", results / "run" / "finished" / "model.pt")
    (results / "mlflow.db").write_bytes(b"y" * 2**19)
    (reports / "report.html").write_bytes(b"z" * 2**18)
    (reports / "fig.png").write_bytes(b"p" * 2**18)
    assert bench.used_bytes(results) == 2**20 + 2**19
    want = {
        "results/mlflow.db": 0.5,
        "results/run": 1.0,
        "reports/report.html": 0.25,
        "reports/other": 0.25,
    }
    assert bench.parts(results, reports) == want
