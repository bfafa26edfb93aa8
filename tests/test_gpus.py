"""Each job its own GPUs on one machine (lengen.core.gpus): simulated device lists (LENGEN_GPUS)
on CPU, the real Snakemake scheduler and the real DeepSpeed launcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from lengen.core import gpus

from .conftest import ROOT


def test_two_claims_never_share_a_device_and_a_closed_one_frees_its_own(tmp_path):
    a_devices, a_fds = gpus.claim(2, ["0", "1", "2"], str(tmp_path))
    b_devices, b_fds = gpus.claim(1, ["0", "1", "2"], str(tmp_path))
    assert len(a_devices) == 2 and not set(a_devices) & set(b_devices)
    assert gpus.try_claim(["0", "1", "2"], 1, str(tmp_path)) is None  # all three held
    for fd in a_fds:
        os.close(fd)  # what the end of a job does, however it ends
    c_devices, _ = gpus.claim(2, ["0", "1", "2"], str(tmp_path))
    assert sorted(c_devices) == sorted(a_devices)


def test_a_lock_held_by_a_killed_job_is_free_and_a_live_one_is_waited_for(tmp_path):
    """The lock is the open file of the job's process: kill -9 frees it; while the holder lives,
    a claim waits, saying so once."""
    env = {**os.environ, gpus.POOL: "7", gpus.LOCKS: str(tmp_path)}
    holder = subprocess.Popen([sys.executable, "-m", "lengen.core.gpus", "1", "--", "sleep", "30"],
                              env=env)  # fmt: skip
    try:
        for _ in range(600):  # until it holds the device
            got = gpus.try_claim(["7"], 1, str(tmp_path))
            if got is None:
                break
            os.close(got[1][0])
            time.sleep(0.05)
        said = []
        with pytest.raises(TimeoutError):
            def say(line):
                said.append(line)
                raise TimeoutError

            gpus.claim(1, ["7"], str(tmp_path), wait_s=0.01, say=say)
        assert "waiting for 1 free GPU(s) of 7" in said[0] and "--resources gpu=" in said[0]
    finally:
        holder.kill()
        holder.wait()
    devices, _ = gpus.claim(1, ["7"], str(tmp_path), wait_s=0.01)
    assert devices == ["7"]


def test_the_pool_the_command_and_the_refusals():
    assert gpus.pool({gpus.POOL: "0, 2,3", "CUDA_VISIBLE_DEVICES": "5"}) == ["0", "2", "3"]
    assert gpus.pool({"CUDA_VISIBLE_DEVICES": "5,6"}) == ["5", "6"]
    env, fds = gpus.environment(0, {gpus.POOL: "0,1"})
    assert env["CUDA_VISIBLE_DEVICES"] == "" and fds == []  # asked none: sees none
    slurm = {"SLURM_JOB_ID": "12", "CUDA_VISIBLE_DEVICES": "3"}
    assert gpus.environment(2, slurm) == (slurm, [])  # the allocation's devices, untouched
    with pytest.raises(gpus.NoGpus, match=r"asks for 3 GPU\(s\) but this machine lends 2"):
        gpus.claim(3, ["0", "1"], "/nonexistent")
    out = subprocess.run([sys.executable, "-m", "lengen.core.gpus", "2", "--", "true"],
                         env={**os.environ, gpus.POOL: "0"}, capture_output=True,
                         text=True)  # fmt: skip
    assert out.returncode == 2 and out.stderr.strip().startswith("NoGpus: a job asks for 2")
    assert len(out.stderr.strip().splitlines()) == 1


RECORD = """
import json, os, sys, time
start = time.time(); time.sleep(float(sys.argv[2]))
json.dump({"job": sys.argv[1], "devices": os.environ["CUDA_VISIBLE_DEVICES"], "start": start,
           "end": time.time()}, open(sys.argv[1] + ".json", "w"))
"""


def test_under_snakemake_no_two_running_jobs_share_a_device(tmp_path):
    """`snakemake --cores all --resources gpu=4` on a machine of 4 (LENGEN_GPUS simulates them):
    ten jobs of 1 and 2 GPUs, each through lengen.core.gpus as the workflow's rules start them;
    every job gets exactly its count, jobs that overlap in time hold disjoint devices, and at
    most 4 devices are held at once."""
    (tmp_path / "record.py").write_text(RECORD)
    (tmp_path / "Snakefile").write_text(textwrap.dedent("""
        N = {f"j{i}": 1 + i % 2 for i in range(10)}
        rule all:
            input: [f"{j}.json" for j in N]
        rule job:
            output: "{j}.json"
            resources: gpu=lambda w: N[w.j]
            shell: "python -m lengen.core.gpus {resources.gpu} -- python record.py {wildcards.j} 1"
    """))
    env = {**os.environ, gpus.POOL: "0,1,2,3", gpus.LOCKS: str(tmp_path / "locks")}
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "all", "--resources",
                          "gpu=4", "-q"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = [json.loads((tmp_path / f"j{i}.json").read_text()) for i in range(10)]
    for job in jobs:
        devices = job["devices"].split(",")
        assert len(devices) == 1 + int(job["job"][1:]) % 2 and set(devices) <= set("0123")
    for a in jobs:
        for b in jobs:
            if a is not b and a["start"] < b["end"] and b["start"] < a["end"]:
                assert not set(a["devices"].split(",")) & set(b["devices"].split(",")), (a, b)
    for t in sorted(j["start"] for j in jobs):
        held = sum(len(j["devices"].split(",")) for j in jobs if j["start"] <= t < j["end"])
        assert held <= 4


def test_the_gpu_tier_starts_every_model_job_on_its_own_devices():
    """Every job of the gpu and paper tiers that loads a model runs through lengen.core.gpus with
    its rule's GPU count, and the multi-GPU training through a deepspeed launcher that takes its
    devices from CUDA_VISIBLE_DEVICES (no --num_gpus, which would take devices 0..N-1); a CPU
    tier's commands start as before."""
    for tier, nl_gpus in (("gpu", 1), ("paper", 8)):
        out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--configfile",
                              f"config/{tier}.yaml"], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, gpus.POOL: ",".join(map(str, range(8)))},
                             timeout=600)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        commands = [line.removeprefix("Shell command: ") for line in out.stdout.splitlines()
                    if line.startswith("Shell command: ")]  # fmt: skip
        model_jobs = [c for c in commands if any(m in c for m in (
            "lengen.train.train", "lengen.train.group", "evaluate run", "evaluate generate",
            "analysis.attention", "analysis.perplexity", "analysis.influence"))]  # fmt: skip
        assert model_jobs
        for command in model_jobs:
            nl_train = "natural_language/h_" in command and "train.train" in command
            expected = nl_gpus if nl_train else 1
            assert command.startswith(f"python -m lengen.core.gpus {expected} -- "), command
        assert "--num_gpus" not in out.stdout
        assert ("deepspeed --module lengen.train.train" in out.stdout) == (nl_gpus > 1)
    few = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile",
                          "config/paper.yaml"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, gpus.POOL: "0,1"}, timeout=600)  # fmt: skip
    assert few.returncode != 0
    assert "natural_language.gpus_per_job is 8, but this machine lends 2 GPU(s)" in few.stdout
    cpu = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--configfile",
                          "config/smoke.yaml"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert cpu.returncode == 0 and "lengen.core.gpus" not in cpu.stdout


def test_the_deepspeed_launcher_takes_the_jobs_devices(tmp_path):
    """The launcher line of a multi-GPU job (lengen.config.plan.launcher), given the devices
    CUDA_VISIBLE_DEVICES names (here 2 and 3 of 4, on DeepSpeed's CPU accelerator), starts one rank
    per device and hands each the job's devices, not devices 0..N-1."""
    from lengen.config import plan
    from lengen.config.config import load

    line = plan.launcher(load(ROOT / "config" / "paper.yaml"), 2)
    assert line == "deepspeed --module"
    (tmp_path / "show_devices.py").write_text(
        "import json, os, sys\nkeys = ('CUDA_VISIBLE_DEVICES', 'LOCAL_RANK', 'WORLD_SIZE')\n"
        "with open(os.path.join(sys.path[0] or '.', 'rank' + os.environ['LOCAL_RANK']), 'w') as f:"
        "\n    json.dump({k: os.environ.get(k) for k in keys}, f)\n"
    )
    first, *rest = line.split()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "2,3", "LOCAL_SIZE": "4",
           "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}  # fmt: skip
    out = subprocess.run([first, "--master_port", "29531", *rest, "show_devices"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    ranks = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*"))]
    assert [r["LOCAL_RANK"] for r in ranks] == ["0", "1"]
    assert {r["CUDA_VISIBLE_DEVICES"] for r in ranks} == {"2,3"}
    assert {r["WORLD_SIZE"] for r in ranks} == {"2"}


def test_a_shared_device_takes_its_share_of_jobs_and_no_more(tmp_path):
    """jobs_per_gpu (--share K), on purpose for small models: each device takes up to K jobs at
    once, a job of N GPUs gets N distinct devices, and the K+1-th job on a device waits."""
    held = [gpus.claim(1, ["0", "1"], str(tmp_path), share=2) for _ in range(4)]
    assert sorted(d for devices, _ in held for d in devices) == ["0", "0", "1", "1"]
    assert gpus.try_claim(["0", "1"], 1, str(tmp_path), share=2) is None
    for fd in held[0][1]:
        os.close(fd)
    two, _ = gpus.claim(1, ["0", "1"], str(tmp_path), share=2)
    assert two == held[0][0]
    fresh = tmp_path / "fresh"
    pair, _ = gpus.claim(2, ["0", "1"], str(fresh), share=3)
    assert sorted(pair) == ["0", "1"]  # distinct devices, not two slots of one


def test_the_gpu_smoke_tier_shares_its_gpu_on_purpose_and_no_tier_by_accident():
    """Only the gpu-smoke tier (small groups, one GPU) shares a device, 4 jobs to one; every other
    GPU tier gives a job its devices alone. Scheduling, not science: outside the config hash."""
    from lengen.config import artifacts, plan
    from lengen.config.config import load

    smoke = load(ROOT / "config" / "gpu-smoke.yaml")
    assert plan.devices(smoke, 1) == "python -m lengen.core.gpus 1 --share 4 --"
    for tier in ("gpu", "paper"):
        assert plan.devices(load(ROOT / "config" / f"{tier}.yaml"), 1) == (
            "python -m lengen.core.gpus 1 --")
    assert "jobs_per_gpu" not in artifacts.report_config(smoke)


def test_a_tier_that_cannot_fit_results_dirs_disk_is_refused_before_its_first_job(tmp_path):
    """The tier's peak disk (its model files, token files and the checkpoints of the training jobs
    that can run at once: lengen.config.config.disk_mb) against results_dir's free space, before
    any job runs: one line naming the folder, the sizes and what to do; LENGEN_DISK_CHECK=0
    skips it. Through Snakemake, with a model too large for any disk."""
    from lengen.config import cluster
    from lengen.config.config import disk_mb, load

    gpu = load(ROOT / "config" / "gpu.yaml")
    one, two = disk_mb(gpu, 1), disk_mb(gpu, 2)
    assert 80 * 1024 < one["models"] < 90 * 1024  # 145 models of 151 M parameters (layers)
    assert two["checkpoints"] == 2 * one["checkpoints"] and one["total"] == sum(
        v for k, v in one.items() if k != "total")
    assert cluster.disk_short(gpu, 1, free=10**9) is None
    line = cluster.disk_short(gpu, 2, free=50 * 1024)
    assert line.startswith(f"{gpu['results_dir']}: the tier writes ~138.2 GB there")
    assert "checkpoints of 2 training job(s) at once" in line and "50.0 GB free" in line
    (tmp_path / "huge.yaml").write_text(
        f"extends: {ROOT / 'config' / 'gpu-smoke.yaml'}\nresults_dir: {tmp_path / 'results'}\n"
        f"reports_dir: {tmp_path / 'reports'}\n"
        "sparse_parity: {model: {n_layer: 48, n_head: 16, d_model: 16384}}\n"
        "jobs: {train: {cpus: 4, mem_mb: 32000, disk_mb: 10000000}}\n"
    )
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
           str(tmp_path), "--cores", "1", "--configfile", str(tmp_path / "huge.yaml"), "--until",
           "mlflow_store"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode != 0
    said = [x for x in (out.stdout + out.stderr).splitlines() if "the tier writes ~" in x]
    assert len(said) == 1 and "LENGEN_DISK_CHECK=0" in said[0], out.stderr[-3000:]
    assert not (tmp_path / "results" / "mlflow.ready").exists()


def test_the_readme_states_each_tiers_peak_disk_as_the_code_estimates_it():
    """README's Tiers table: each tier's peak disk cell is lengen.config.config.disk_mb's, as
    `python -m lengen.config.config` prints it (the total, and a training job's checkpoints where
    a tier runs several)."""
    import re

    from lengen.config.config import disk_mb, gb, load

    rows = {m[1]: m[2] for m in re.finditer(r"^\| ([\w-]+) \| `(config/[\w-]+\.yaml)` \|",
                                            (ROOT / "README.md").read_text(), re.M)}  # fmt: skip
    assert set(rows) == {"smoke", "default", "gpu", "gpu-smoke", "paper"}
    text = (ROOT / "README.md").read_text()
    for tier, path in rows.items():
        disk = disk_mb(load(ROOT / path))
        row = next(x for x in text.splitlines() if x.startswith(f"| {tier} | `{path}` |"))
        cell = row.split(" | ")[3]
        assert cell.startswith(f"~{gb(disk['total'])}"), (tier, cell)
        if disk["checkpoints"] >= 1024:
            assert f"+{gb(disk['checkpoints'])} a training job beside the first" in cell
