"""The SLURM profile on a real cluster (opt-in: `pytest --slurm -m slurm`, as root on Debian):
tools/slurm_cluster.sh starts a one-node cluster (munge, slurmctld, slurmd; with accounting also
MariaDB and slurmdbd), the smoke tier runs through workflow/profiles/slurm (sacct) or
workflow/profiles/slurm-squeue (no accounting), and its tables and REPORT.md must equal the
committed smoke reference, which a local run reproduces (test_workflow.py), with one SLURM job per
group job the DAG plans; before that, a run interrupted with Ctrl-C must leave no job queued.
Wall times: benchmarks/measured/2026-11-25-cpu/README.md."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lengen.core.floats import portable

from .conftest import ROOT
from .helpers import planned_submissions, snakemake_cmd
from .test_workflow import assert_same_as_the_smoke_reference, job_stats

pytestmark = pytest.mark.slurm
CLUSTER = ROOT / "tools" / "slurm_cluster.sh"


@pytest.fixture(params=["accounting", "none"])
def cluster(request):
    """A one-node cluster, with or without accounting; the environment that reaches it."""
    if os.geteuid() != 0:
        pytest.skip("tools/slurm_cluster.sh starts daemons as root")
    state = f"/tmp/lengen-slurm-test-{request.param}"
    env = {**os.environ, **portable(), "LENGEN_SLURM_DIR": state}  # floats: as the reference's
    subprocess.run([CLUSTER, "down"], env=env, check=True)
    subprocess.run([CLUSTER, "up", request.param], env=env, check=True, timeout=1800)
    env["SLURM_CONF"] = f"{env['LENGEN_SLURM_DIR']}/slurm.conf"
    yield request.param, env
    subprocess.run([CLUSTER, "down"], env=env, check=True)


def _snakemake(workdir: Path, env: dict, profile: str, *args: str) -> str:
    cmd = snakemake_cmd(
        workdir,
        "--profile",
        str(ROOT / "workflow" / "profiles" / profile),
        "--default-resources",
        "slurm_partition=local",
        "--cores",
        str(os.cpu_count()),
        "--configfile",
        str(ROOT / "config" / "smoke.yaml"),
        *args,
    )
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3 * 3600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out


def _default_sigint() -> None:
    """In the child: Ctrl-C as in a terminal (a shell's background job, e.g. under nohup, starts
    with SIGINT ignored, and Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted_run_cancels_its_jobs(workdir: Path, env: dict, profile: str) -> None:
    """Ctrl-C (SIGINT) on Snakemake while its first jobs are queued or running: Snakemake stops
    without finishing the DAG and the plugin scancels every job it submitted, so none is left
    PENDING or RUNNING, and those not yet done are CANCELLED."""
    cmd = snakemake_cmd(
        workdir,
        "--profile",
        str(ROOT / "workflow" / "profiles" / profile),
        "--default-resources",
        "slurm_partition=local",
        "--cores",
        str(os.cpu_count()),
        "--configfile",
        str(ROOT / "config" / "smoke.yaml"),
    )
    log = workdir / "interrupted.log"
    workdir.mkdir(parents=True)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_default_sigint
        )
        deadline = time.monotonic() + 600
        while not re.search(r"submitted with SLURM jobid", log.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
            time.sleep(1)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=600)
    text = log.read_text()
    assert "(100%) done" not in text, text[-3000:]  # it stopped, not finished
    submitted = re.findall(r"submitted with SLURM jobid (\d+)", text)
    queue = subprocess.run(
        ["squeue", "-t", "all", "-h", "-o", "%i %T"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    states = dict(line.split() for line in queue.splitlines() if line.strip())
    left = {j: states[j] for j in submitted if states.get(j) in ("PENDING", "RUNNING")}
    assert submitted and not left, (left, text[-3000:])
    assert "CANCELLED" in {states.get(j) for j in submitted}, (states, text[-3000:])


def test_the_smoke_tier_on_slurm_equals_the_local_run_in_grouped_jobs(cluster, tmp_path):
    mode, env = cluster
    profile = "slurm" if mode == "accounting" else "slurm-squeue"
    _interrupted_run_cancels_its_jobs(tmp_path / "interrupted", env, profile)
    dry = _snakemake(tmp_path, env, profile, "-n")
    plan = job_stats(subprocess.CompletedProcess([], 0, dry, ""))
    # one job per group job the profile forms (a model's training + evaluation, the setup, ...),
    # and one per job outside a group (a language model's training, the report)
    expected, kinds = planned_submissions(dry)
    assert expected > plan["synthetic_train"] + 5  # the models, and the groups beside them
    t = time.perf_counter()
    out = _snakemake(tmp_path, env, profile, "--slurm-init-seconds-before-status-checks", "5")
    wall = time.perf_counter() - t
    submitted = re.findall(r"submitted with SLURM jobid (\d+)", out)
    print(f"\nSLURM ({mode}): {sum(plan.values())} steps in {len(submitted)} jobs, {wall:.0f} s")
    assert len(submitted) == expected, out[-4000:]
    assert_same_as_the_smoke_reference(tmp_path / "reports" / "smoke")
    # the cluster saw those jobs, each finished, each one group or one rule
    if mode == "none":  # the fixture's MinJobAge keeps finished jobs in squeue for an hour
        cmd = ["squeue", "-t", "all", "-h", "-o", "%i %T %k"]
    else:
        cmd = ["sacct", "-X", "-n", "-P", "-o", "JobID,State,Comment"]
    listed = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    rows = [re.split(r"[ |]", line.strip(), maxsplit=2) for line in listed.splitlines() if line]
    seen = {job: (state, comment) for job, state, comment in rows}
    assert set(submitted) <= set(seen)
    assert all(seen[j][0] == "COMPLETED" for j in submitted), seen
    # the plugin's comment: rule_<rule>[_wildcards_...] or rule_<group>_<its rules>
    first = {j: next((k for k in kinds if seen[j][1].startswith(k)), None) for j in submitted}
    assert None not in first.values() and set(first.values()) == kinds, seen


ZERO2_SNAKEFILE = """
rule zero2:
    output: "zero2/model.pt"
    log: "zero2.log"
    resources:
        cpus_per_task=2,
        mem_mb=3000,
        runtime=20,
    shell: "CUDA_VISIBLE_DEVICES=0,1 LOCAL_SIZE=2 OMP_NUM_THREADS=1 {launcher} lengen.train.train"
           " --spec spec.json --out zero2 >> {{log}} 2>&1"
"""


def _run_until(cmd: list[str], env: dict, log: Path, when, then) -> str:
    """Snakemake `cmd` in the background (its output to `log`), `then()` once `when()` holds
    (once; checked every 0.2 s), to its end; its output."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        done = False
        deadline = time.monotonic() + 2400
        while proc.poll() is None:
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            if not done and when():
                then()
                done = True
            time.sleep(0.2)
    return log.read_text()


def test_a_two_process_zero_2_training_stopped_after_a_checkpoint_resumes_on_the_retry(
    cluster, tmp_path, tiny_spec
):
    """The paper tier's language-model job in small: one SLURM job whose command is the
    workflow's deepspeed launcher line (lengen.config.plan.launcher) with two processes (gloo on
    the fixture's CPUs, the job's two devices named as lengen.core.gpus or SLURM names them),
    ZeRO-2 with the paper's buckets, submitted through the profile. The test cancels it by its
    own clock, once its first checkpoint is whole (scancel's SIGTERM, as a partition's MaxTime or
    a preemption stops a training; 2,000 steps leave it ~40 checkpoints' time to be cut in,
    whatever the machine's speed); the profile's retry submits it again, and it resumes from its
    checkpoint to one model.pt."""
    import copy
    import json

    from lengen.config import plan
    from lengen.config.config import load
    from lengen.core.specs import read_ds_config

    mode, env = cluster
    env = {**env, "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"}  # the launcher, as in
    profile = "slurm" if mode == "accounting" else "slurm-squeue"  # an activated environment
    paper = load(ROOT / "config" / "paper.yaml")
    nl = paper["natural_language"]
    spec = copy.deepcopy(tiny_spec)
    spec["train"].update(steps=2000, batch_size=8, checkpoint_every=50, log_every=50)
    spec["runtime"].update(
        zero_stage=nl["zero_stage"], ds_config=read_ds_config(ROOT / nl["ds_config"])
    )
    first, *rest = plan.launcher(paper, 2).split()
    launcher = " ".join([first, "--master_port", "29541", *rest])
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "Snakefile").write_text(ZERO2_SNAKEFILE.format(launcher=launcher))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(tmp_path / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--profile",
        str(ROOT / "workflow" / "profiles" / profile),
        "--default-resources",
        "slurm_partition=local",
        "--cores",
        "2",
        "--slurm-init-seconds-before-status-checks",
        "5",
    ]
    ckpt = tmp_path / "zero2" / "ckpt"

    def whole_checkpoint():
        return any(p.name[5:].isdigit() for p in ckpt.glob("step_*"))

    text = _run_until(
        cmd, env, tmp_path / "snakemake.log", whole_checkpoint, lambda: _stop_jobs(env)
    )
    assert "(100%) done" in text, text[-4000:]
    submitted = re.findall(r"submitted with SLURM jobid (\d+)", text)
    assert len(submitted) == 2, text[-4000:]  # stopped once, retried once
    log = (tmp_path / "zero2.log").read_text()  # the retry's (Snakemake clears a job's log)
    assert re.search(r"resumed from zero2/ckpt/step_(\d+)", log), log[-3000:]
    assert sorted(p.name for p in (tmp_path / "zero2").iterdir()) == [
        "finished",
        "mlflow_run_id",
        "model.pt",
        "spec.json",
    ]


CUT_AFTER_MODEL_SNAKEFILE = """
rule train:
    output: "run/model.pt"
    log: "train.log"
    resources:
        cpus_per_task=1,
        mem_mb=2000,
        runtime=20,
    # the first submission trains, then waits (as an evaluation or MLflow's last writes may),
    # and the test stops it there: after its model.pt, whatever the machine's speed
    shell: "OMP_NUM_THREADS=1 python -m lengen.train.train --spec spec.json --out run > {log} 2>&1"
           " && (test -e cut || (sha256sum run/model.pt > first.sha; touch cut; sleep 600))"
"""


def _stop_jobs(env: dict) -> None:
    """SIGTERM to every job and its steps (scancel --signal): it ends FAILED, as a job cut by its
    time limit or a preemption does (a plain scancel leaves sacct's state "CANCELLED by <uid>",
    which the SLURM plugin does not read as an end: it would wait for ever)."""
    jobs = subprocess.run(
        ["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    subprocess.run(["scancel", "--signal=TERM", "--full", *jobs], env=env, check=True)


def test_a_job_stopped_after_its_model_is_finished_on_the_retry_untrained(
    cluster, tmp_path, tiny_spec
):
    """A SLURM job stopped after its training wrote model.pt (the test stops it once it is
    written): Snakemake removes the output and the profile's retry submits the job again, which
    links the finished model back from finished/ instead of training from step 0 (the
    checkpoints were gone): the same file, and the retry's log says so."""
    import copy
    import json

    from lengen.core.provenance import file_sha256

    mode, env = cluster
    env = {**env, "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"}
    profile = "slurm" if mode == "accounting" else "slurm-squeue"
    spec = copy.deepcopy(tiny_spec)
    spec["train"].update(steps=6, checkpoint_every=2)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "Snakefile").write_text(CUT_AFTER_MODEL_SNAKEFILE)
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(tmp_path / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--profile",
        str(ROOT / "workflow" / "profiles" / profile),
        "--default-resources",
        "slurm_partition=local",
        "--cores",
        "1",
        "--slurm-init-seconds-before-status-checks",
        "5",
    ]
    text = _run_until(
        cmd, env, tmp_path / "snakemake.log", (tmp_path / "cut").exists, lambda: _stop_jobs(env)
    )
    assert "(100%) done" in text, text[-4000:]
    assert len(re.findall(r"submitted with SLURM jobid (\d+)", text)) == 2, text[-4000:]
    log = (tmp_path / "train.log").read_text()  # the retry's
    assert "restored from" in log and "resumed from" not in log, log[-3000:]
    model = tmp_path / "run" / "model.pt"
    assert (tmp_path / "first.sha").read_text().split()[0] == file_sha256(model)
