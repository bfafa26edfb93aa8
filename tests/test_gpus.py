"""Each job its own GPUs on one machine (lengen.core.gpus): simulated device lists (LENGEN_GPUS)
on CPU, the real Snakemake scheduler and the real DeepSpeed launcher."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from lengen.config.config import read_tier as load_tier
from lengen.core import gpus

from .conftest import ROOT
from .helpers import as_second_user, shared_folder, snakemake_cmd


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
    holder = subprocess.Popen(
        [sys.executable, "-m", "lengen.core.gpus", "1", "--", "sleep", "30"], env=env
    )
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
    slurm = {"SLURM_JOB_ID": "12", "CUDA_VISIBLE_DEVICES": "3,5", gpus.POOL: "0,1,2"}
    assert gpus.pool(slurm) == ["3", "5"]  # the allocation's devices, not the machine's list
    with pytest.raises(gpus.NoGpus, match=r"asks for 3 GPU\(s\) but this machine lends 2"):
        gpus.claim(3, ["0", "1"], "/nonexistent")
    out = subprocess.run(
        [sys.executable, "-m", "lengen.core.gpus", "2", "--", "true"],
        env={**os.environ, gpus.POOL: "0"},
        capture_output=True,
        text=True,
    )
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
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent("""
        N = {f"j{i}": 1 + i % 2 for i in range(10)}
        rule all:
            input: [f"{j}.json" for j in N]
        rule job:
            output: "{j}.json"
            resources: gpu=lambda w: N[w.j]
            shell: "python -m lengen.core.gpus {resources.gpu} -- python record.py {wildcards.j} 1"
    """)
    )
    env = {**os.environ, gpus.POOL: "0,1,2,3", gpus.LOCKS: str(tmp_path / "locks")}
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "all", "--resources", "gpu=4", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
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


GPU_TIERS = sorted(
    p.stem for p in (ROOT / "config").glob("*.yaml") if load_tier(p)["runtime"]["device"] == "cuda"
)


@functools.cache
def dry_run_commands(tier: str) -> tuple[str, ...]:
    """The shell commands of a tier's dry run (`snakemake -n -p`) on 8 simulated devices."""
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "--configfile", f"config/{tier}.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, gpus.POOL: ",".join(map(str, range(8)))},
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return tuple(
        line.removeprefix("Shell command: ")
        for line in out.stdout.splitlines()
        if line.startswith("Shell command: ")
    )


def test_the_gpu_tier_starts_every_model_job_on_its_own_devices():
    """Every job of the gpu and paper tiers that loads a model runs through lengen.core.gpus with
    its rule's GPU count, and the multi-GPU training through a deepspeed launcher that takes its
    devices from CUDA_VISIBLE_DEVICES (no --num_gpus, which would take devices 0..N-1); a job
    asking more GPUs than the pool or `--resources gpu=` allows is refused at start; a CPU
    tier's commands start as before."""
    for tier, nl_gpus in (("gpu", 1), ("paper", 8)):
        commands = dry_run_commands(tier)
        model_jobs = [
            c
            for c in commands
            if any(
                m in c
                for m in (
                    "lengen.train.train",
                    "lengen.train.group",
                    "evaluate run",
                    "evaluate generate",
                    "analysis.attention",
                    "analysis.perplexity",
                    "analysis.influence",
                )
            )
        ]
        assert model_jobs
        for command in model_jobs:
            nl_train = "natural_language/h_" in command and "train.train" in command
            expected = nl_gpus if nl_train else 1
            assert command.startswith(f"python -m lengen.core.gpus {expected} -- "), command
        assert not any("--num_gpus" in c for c in commands)
        deepspeed = any("deepspeed --module lengen.train.train" in c for c in commands)
        assert deepspeed == (nl_gpus > 1)
    few = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", "config/paper.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, gpus.POOL: "0,1"},
        timeout=600,
    )
    assert few.returncode != 0
    assert "natural_language.gpus_per_job is 8, but this machine lends 2 GPU(s)" in few.stdout
    eight = {**os.environ, gpus.POOL: ",".join(map(str, range(8)))}
    capped = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--configfile",
            "config/paper.yaml",
            "--resources",
            "gpu=4",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=eight,
    )
    assert capped.returncode != 0  # Snakemake would have run the 8-GPU job on 4, saying nothing
    assert "gpus_per_job is 8, but --resources gpu=4 lets 4 GPU(s) run at once" in capped.stdout
    cpu = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "--configfile", "config/smoke.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
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
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "2,3",
        "LOCAL_SIZE": "4",
        "PYTHONPATH": str(tmp_path),
        "OMP_NUM_THREADS": "1",
    }
    out = subprocess.run(
        [first, "--master_port", "29531", *rest, "show_devices"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
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
            "python -m lengen.core.gpus 1 --"
        )
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
        v for k, v in one.items() if k != "total"
    )
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
    cmd = snakemake_cmd(
        tmp_path,
        "--cores",
        "1",
        "--configfile",
        str(tmp_path / "huge.yaml"),
        "--until",
        "mlflow_store",
    )
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode != 0
    said = [x for x in (out.stdout + out.stderr).splitlines() if "the tier writes ~" in x]
    assert len(said) == 1 and "LENGEN_DISK_CHECK=0" in said[0], out.stderr[-3000:]
    assert not (tmp_path / "results" / "mlflow.ready").exists()


def test_the_readme_states_each_tiers_peak_disk_as_the_code_estimates_it():
    """README's Tiers table: each tier's peak disk cell is lengen.config.config.disk_mb's, as
    `python -m lengen.config.config` prints it (the total, and a training job's checkpoints where
    a tier runs several); the smoke tier's also states its measured whole run
    (benchmarks/disk.py: the MLflow store and the reports beside the models)."""
    import re

    from lengen.config.config import disk_mb, gb, load

    rows = {
        m[1]: m[2]
        for m in re.finditer(
            r"^\| ([\w-]+) \| `(config/[\w-]+\.yaml)` \|", (ROOT / "README.md").read_text(), re.M
        )
    }
    assert set(rows) == {"smoke", "default", "gpu", "gpu-smoke", "paper"}
    text = (ROOT / "README.md").read_text()
    for tier, path in rows.items():
        disk = disk_mb(load(ROOT / path))
        row = next(x for x in text.splitlines() if x.startswith(f"| {tier} | `{path}` |"))
        cell = row.split(" | ")[3]
        assert cell.startswith(f"~{gb(disk['total'])}"), (tier, cell)
        if disk["checkpoints"] >= 1024:
            assert f"+{gb(disk['checkpoints'])} a training job beside the first" in cell
    measured = json.loads(
        (ROOT / "benchmarks" / "measured" / "2026-12-06-cpu-disk" / "smoke_disk.json").read_text()
    )
    smoke = next(x for x in text.splitlines() if x.startswith("| smoke | "))
    assert f"{measured['peak_mb']:.1f} MB measured with the store and reports" in smoke


def test_the_wrapper_reads_its_options_wherever_they_stand(tmp_path):
    """`N --share K -- COMMAND`, `--share K N -- COMMAND`: both run COMMAND (argparse's REMAINDER
    once took `--share 4 -- ...` for the command and exec'd `--share`); a line without `--` or
    without a command is refused in one usage line."""
    env = {**os.environ, gpus.POOL: "0", gpus.LOCKS: str(tmp_path)}
    show = [sys.executable, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"]
    for head in (["1", "--share", "4"], ["--share", "4", "1"], ["--share=4", "1"], ["1"]):
        out = subprocess.run(
            [sys.executable, "-m", "lengen.core.gpus", *head, "--", *show],
            env=env,
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0 and out.stdout.strip() == "0", (head, out.stderr)
    for bad in (["1", "--share", "4", "true"], ["1", "--"], ["-1", "--", "true"]):
        out = subprocess.run(
            [sys.executable, "-m", "lengen.core.gpus", *bad],
            env=env,
            capture_output=True,
            text=True,
        )
        assert out.returncode == 2 and "then -- and the command" in out.stderr, (bad, out.stderr)


STAND_IN = """
import json, os, sys
keys = ("CUDA_VISIBLE_DEVICES", "MASTER_PORT", "LOCAL_RANK", "WORLD_SIZE")
with open(os.environ["STAND_IN_OUT"] + "." + os.environ.get("LOCAL_RANK", "0"), "w") as f:
    json.dump({k: os.environ.get(k) for k in keys}, f)
"""


def test_every_gpu_line_the_workflow_writes_runs_on_a_fake_pool(tmp_path):
    """Each GPU tier's dry run (`snakemake -n -p`): every distinct start of a model job's command
    (lengen.core.gpus with its N and --share, then `python -m` or the DeepSpeed launcher) is run
    here, on 8 simulated devices, with a stand-in module in place of lengen's: it starts, every
    process sees exactly its N devices, and a multi-process launch has a port of its own. A CPU
    tier writes no such line."""
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    starts = set()
    for tier in GPU_TIERS:
        for command in dry_run_commands(tier):
            if "lengen.core.gpus" in command:
                head, rest = command.split(" -- ", 1)
                starts.add((head, " ".join(rest.split()[:2])))
    assert {launcher for _, launcher in starts} == {"python -m", "deepspeed --module"}
    assert any("--share" in head for head, _ in starts)
    for i, (head, launcher) in enumerate(sorted(starts)):
        n = int(head.split()[3 if head.split()[3] != "--share" else 5])
        record = tmp_path / f"job{i}"
        env = {
            **os.environ,
            gpus.POOL: ",".join(map(str, range(8))),
            "LOCAL_SIZE": "8",
            gpus.LOCKS: str(tmp_path / "locks"),
            "PYTHONPATH": str(tmp_path),
            "STAND_IN_OUT": str(record),
            "OMP_NUM_THREADS": "1",
        }
        out = subprocess.run(
            f"{head} -- {launcher} stand_in",
            shell=True,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, (head, launcher, out.stderr[-3000:])
        ranks = [json.loads(p.read_text()) for p in tmp_path.glob(f"job{i}.*")]
        assert len(ranks) == (n if launcher.startswith("deepspeed") else 1), (head, launcher)
        for rank in ranks:
            assert len(rank["CUDA_VISIBLE_DEVICES"].split(",")) == n, (head, rank)
            assert (rank["MASTER_PORT"] is not None) == (n > 1), (head, rank)


def test_inside_one_allocation_jobs_take_its_devices_and_two_allocations_never_wait(tmp_path):
    """Under SLURM (a fake SLURM_JOB_ID, CUDA_VISIBLE_DEVICES as the allocation names them):
    two claims in one allocation get disjoint devices of its own, LENGEN_GPUS left aside; a
    second allocation on the node naming the same indices (its cgroup's) claims at once."""
    first = {
        "SLURM_JOB_ID": "101",
        "CUDA_VISIBLE_DEVICES": "0,1,2",
        gpus.POOL: "5,6,7",
        gpus.LOCKS: str(tmp_path),
    }
    a_env, a_fds = gpus.environment(2, first)
    b_env, b_fds = gpus.environment(1, first)
    a, b = a_env["CUDA_VISIBLE_DEVICES"].split(","), b_env["CUDA_VISIBLE_DEVICES"].split(",")
    assert len(a) == 2 and len(b) == 1 and not set(a) & set(b) and set(a + b) == {"0", "1", "2"}
    assert gpus.POOL not in a_env
    assert gpus.try_claim(["0", "1", "2"], 1, gpus.lock_folder(first)) is None  # all held
    second = {**first, "SLURM_JOB_ID": "102"}
    c_env, _ = gpus.environment(3, second)  # the same indices, another allocation: no wait
    assert c_env["CUDA_VISIBLE_DEVICES"] == "0,1,2"
    assert gpus.lock_folder(first) != gpus.lock_folder(second)


def test_another_user_takes_the_lock_files_and_folder_a_first_one_made(request):
    """Root's job makes the lock folder and files under umask 022; a job of a second user
    (nobody, in a forked child) then claims a free device, waits on a held one, and takes it
    once freed. Runs as root only (it switches user)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as a second user")
    folder = str(shared_folder(request) / "locks")
    old = os.umask(0o022)
    try:
        held, fds = gpus.claim(1, ["0"], folder)
        gpus.claim_port(folder)  # the port folder too
    finally:
        os.umask(old)

    def claims():
        got = gpus.try_claim(["0", "1"], 2, folder)
        one = gpus.try_claim(["0", "1"], 1, folder)
        return got is None, one[0] if one else None, gpus.claim_port(folder)[0] > 0

    assert as_second_user(claims) == "(True, ['1'], True)"
    for fd in fds:
        os.close(fd)
    assert as_second_user(lambda: gpus.try_claim(["0"], 1, folder)[0]) == "['0']"


RENDEZVOUS = """
import json, os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
time.sleep(3)  # both jobs hold their port at once
t = __import__("torch").ones(1)
dist.all_reduce(t)
with open(os.environ["STAND_IN_OUT"] + "." + os.environ["LOCAL_RANK"], "w") as f:
    json.dump({"port": os.environ["MASTER_PORT"], "sum": t.item()}, f)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_two_multi_process_jobs_at_once_each_rendezvous_on_a_port_of_its_own(tmp_path):
    """The paper tier's own line for a two-GPU training (lengen.config.plan: devices, then the
    DeepSpeed launcher), twice at once on one machine of four simulated devices: both finish,
    each rank of a job met its peer, and the two jobs used different ports (both on the
    launcher's default 29500 the second died: address already in use)."""
    from lengen.config import plan
    from lengen.config.config import load

    paper = load(ROOT / "config" / "paper.yaml")
    line = f"{plan.devices(paper, 2)} {plan.launcher(paper, 2)} rendezvous"
    (tmp_path / "rendezvous.py").write_text(RENDEZVOUS)
    jobs = []
    for j in ("a", "b"):
        env = {
            **os.environ,
            gpus.POOL: "0,1,2,3",
            gpus.LOCKS: str(tmp_path / "locks"),
            "PYTHONPATH": str(tmp_path),
            "STAND_IN_OUT": str(tmp_path / j),
            "LOCAL_SIZE": "4",
            "OMP_NUM_THREADS": "1",
        }
        jobs.append(
            subprocess.Popen(
                line,
                shell=True,
                cwd=tmp_path,
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        )
    for job in jobs:
        out, _ = job.communicate(timeout=300)
        assert job.returncode == 0, out[-3000:]
    ports = {}
    for j in ("a", "b"):
        ranks = [json.loads((tmp_path / f"{j}.{r}").read_text()) for r in (0, 1)]
        assert [r["sum"] for r in ranks] == [2.0, 2.0]
        ports[j] = {r["port"] for r in ranks}
    assert len(ports["a"]) == len(ports["b"]) == 1 and ports["a"] != ports["b"]


def test_a_job_that_must_run_on_cuda_and_cannot_says_why_in_one_line(monkeypatch):
    """lengen.core.device.require_cuda: the reason a torch sees no GPU, with its fix, for each
    case a GPU user meets (a CPU build, no driver, a driver too old for the build's CUDA, no
    device among those named); an evaluation given GPUs by lengen.core.gpus refuses too, rather
    than shrinking to a CPU run."""
    import torch

    from lengen.core import device

    assert "built without CUDA" in device.unusable_reason(None, "580.65.06", "2.13.0+cpu", "0")
    assert "finds no NVIDIA driver" in device.unusable_reason("13.0", None, "2.13.0", "0")
    old = device.unusable_reason("13.0", "535.104.05", "2.13.0", "0")
    assert "needs driver 580.65.6 or later; this machine's driver is 535.104.05" in old
    assert "GPU stack" in old
    assert "sees no GPU among" in device.unusable_reason("12.6", "550.54.15", "2.13.0", "7")
    if torch.cuda.is_available():
        return  # a machine with a GPU: nothing to refuse
    monkeypatch.setenv(device.JOB_GPUS, "1")
    with pytest.raises(device.NoUsableGpu, match=r"^this job \(given 1 GPU\(s\)"):
        device.eval_device()
    monkeypatch.setenv(device.JOB_GPUS, "0")
    assert device.eval_device() == "cpu"  # a job that asked for none runs where it can


def test_a_cuda_tier_runs_on_a_cpu_up_to_its_first_gpu_job_which_stops_in_one_line(tmp_path):
    """The gpu-smoke tier through Snakemake on this CPU with one simulated device: every job that
    needs no GPU runs (test sets, corpus), and its first GPU job starts through the tier's own
    line (lengen.core.gpus with --share) and stops in one line, on Snakemake's output, naming the
    installed torch and the fix: no traceback, no exec of an option."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a machine with a GPU runs the tier (benchmarks/gpu_acceptance.sh)")
    env = {**os.environ, gpus.POOL: "0", gpus.LOCKS: str(tmp_path / "locks")}
    tier = str(ROOT / "config" / "gpu-smoke.yaml")
    cmd = snakemake_cmd(tmp_path, "--cores", "2", "--configfile", tier)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode != 0
    said = [x for x in out.stderr.splitlines() if x.startswith("NoUsableGpu: ")]
    start = (
        f"NoUsableGpu: runtime.device asks for CUDA, but the installed torch {torch.__version__}"
    )
    assert said and said[0].startswith(start), out.stderr[-3000:]
    assert "Traceback" not in out.stderr and "FileNotFoundError" not in out.stderr
    logs = list((tmp_path / "results" / "gpu-smoke" / "logs").rglob("train_*.log"))
    assert any(log.read_text().strip() == said[0] for log in logs)
    made = tmp_path / "results" / "gpu-smoke"
    assert (made / "sparse_parity" / "testset.npz").is_file(), "no CPU job ran"
