"""The jobs a tier's DAG plans from scratch, as data: a dry run (`snakemake -n -p --forceall`) of
the project's Snakefile, each job as its inputs, outputs, log, benchmark, resources and shell
command (machine paths replaced by <root> and <workdir>), sorted by output. Rule names are left
out on purpose: they are how the Snakefile is written, not what it runs (issue 62 folded sparse
parity's training rules into the shared ones without changing a job).

    python tools/planned_jobs.py --write        # tests/golden/plans/<tier>.json, every tier

tests/test_plan.py holds every tier's plan equal to its golden file. Write them again only for a
change that is meant to change what runs, and read the diff.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "plans"
TIERS = ("smoke", "config", "gpu", "gpu-smoke", "paper")
FIELDS = ("input", "output", "log", "benchmark", "resources")
KEPT_RESOURCES = ("cpus_per_task", "mem_mb", "runtime", "gpu")  # not the machine's tmpdir


def _job(block: list[str], root: str, workdir: str) -> dict:
    """One job of the dry run's output: its fields and shell command."""
    job, relative = {}, os.path.relpath(root, workdir)  # the project as the workdir reaches it
    for line in block:
        text = line.strip().replace(workdir, "<workdir>").replace(relative, "<root>")
        text = text.replace(root, "<root>")
        key, _, value = text.partition(": ")
        if key in FIELDS:
            job[key] = sorted(value.split(", ")) if key != "resources" else value
        elif key == "Shell command":
            job["shell"] = value
    if "resources" in job:
        pairs = (part.split("=", 1) for part in job["resources"].split(", "))
        job["resources"] = {k: v for k, v in pairs if k in KEPT_RESOURCES}
    return job


def planned_jobs(tier: str, workdir: Path) -> list[dict]:
    """Every job of `config/<tier>.yaml`'s DAG, from scratch, in workdir."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        "-n",
        "-p",
        "--forceall",
        "--cores",
        "2",
        "--configfile",
        str(ROOT / "config" / f"{tier}.yaml"),
    ]
    # a machine of 8 GPUs, whatever this one has (lengen.core.gpus: the GPU tiers' pool)
    env = {**os.environ, "LENGEN_GPUS": ",".join(map(str, range(8)))}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"dry run of {tier} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    jobs, block = [], None
    for line in proc.stdout.splitlines():
        if line.startswith(("rule ", "localrule ")):
            block = []
            jobs.append(block)
        elif block is not None and line.strip():
            block.append(line)
        elif block is not None:
            block = None
    parsed = [_job(b, str(ROOT), str(Path(workdir).resolve())) for b in jobs]
    return sorted((j for j in parsed if j.get("output")), key=lambda j: j["output"])


def main(argv: list[str] | None = None) -> None:
    """CLI: print one tier's plan as JSON, or --write every tier's golden file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", choices=TIERS, default="smoke")
    parser.add_argument("--write", action="store_true", help="write every tier's golden file")
    args = parser.parse_args(argv)
    for tier in TIERS if args.write else (args.tier,):
        with tempfile.TemporaryDirectory() as tmp:
            jobs = planned_jobs(tier, Path(tmp))
        text = json.dumps(jobs, indent=1, sort_keys=True) + "\n"
        if args.write:
            GOLDEN.mkdir(parents=True, exist_ok=True)
            (GOLDEN / f"{tier}.json").write_text(text)
            print(f"{GOLDEN / f'{tier}.json'}: {len(jobs)} jobs")
        else:
            print(text)


if __name__ == "__main__":
    main()
