"""Before submitting a tier to SLURM: does each of its jobs fit a node of the partition and its
checkpoints the disk of results_dir (`jobs.<kind>.disk_mb`), and can the executor plugin read job
states (`sacct` needs accounting, slurmdbd; without it use
workflow/profiles/slurm-squeue)? Prints what to change and exits 1 when something will not run.

    python -m lengen.config.cluster --configfile config/smoke.yaml [--partition gpu]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from lengen.config.config import load
from lengen.core.cli import command_parser, one_line_errors

NO_ACCOUNTING = "accounting storage is disabled"


def run(*cmd: str) -> str:
    """A SLURM command's stdout and stderr together ('' if it is not installed)."""
    if shutil.which(cmd[0]) is None:
        return ""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr


def node_sizes(partition: str | None) -> list[tuple[int, int]]:
    """(CPUs, memory MB) of each node type of the partition (all partitions if None): sinfo."""
    args = ["sinfo", "--noheader", "--format=%c %m"] + (
        ["--partition", partition] if partition else []
    )
    sizes = []
    for line in run(*args).splitlines():
        cpus, mem = line.split()[:2]
        sizes.append((int(cpus.rstrip("+")), int(mem.rstrip("+"))))
    return sizes


def too_large(
    cfg: dict,
    cpus: int,
    mem_mb: int | None = None,
    node: str = "the largest node",
    fix: str = "name a partition whose nodes hold it",
) -> list[str]:
    """A line per job kind of the tier's `jobs` that a node of `cpus` CPUs (and `mem_mb` MB, where
    known) cannot hold: on SLURM it would stay PENDING (Reason=PartitionConfig) for ever."""
    found = []
    for kind, job in cfg.get("jobs", {}).items():
        if job["cpus"] > cpus or (mem_mb is not None and job["mem_mb"] > mem_mb):
            has = f"{cpus} CPUs" + (f" / {mem_mb} MB" if mem_mb is not None else "")
            found.append(
                f"jobs.{kind} asks {job['cpus']} CPUs / {job['mem_mb']} MB; {node} has {has}: "
                f"lower it in the tier's `jobs`, or {fix} (it would stay PENDING)"
            )
    return found


def free_mb(folder: str | Path) -> int:
    """Free space, MB, on the disk that holds `folder` (its nearest existing parent)."""
    path = Path(folder).resolve()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free // 2**20


def short_of_disk(cfg: dict, free: int) -> list[str]:
    """A line per job kind whose stated disk_mb (its checkpoints and model files under
    results_dir) is more than the free space there: it would stop on a full disk mid-run."""
    return [
        f"jobs.{kind}.disk_mb is {job['disk_mb']} MB, but {cfg['results_dir']} has {free} MB "
        "free: free space there or point results_dir at a larger disk (every job that runs at "
        "once needs its own)"
        for kind, job in cfg.get("jobs", {}).items()
        if job.get("disk_mb", 0) > free
    ]


def problems(cfg: dict, sizes: list[tuple[int, int]], sacct: str,
             free: int | None = None) -> list[str]:  # fmt: skip
    """What will not run: a job kind no node can hold; a job kind whose checkpoints the
    results_dir's disk cannot hold (`free` MB there, where known); job states sacct cannot
    report."""
    found = []
    if sizes:
        found += too_large(cfg, max(c for c, _ in sizes), max(m for _, m in sizes))
    if free is not None:
        found += short_of_disk(cfg, free)
    if NO_ACCOUNTING in sacct.lower():
        found.append(
            "sacct: Slurm accounting storage is disabled: use --profile "
            "workflow/profiles/slurm-squeue (job states from squeue; MinJobAge >= 120 s)"
        )
    return found


# pragma: no mutate block  (CLI wiring)
@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: check a tier against the cluster this runs on."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument("--configfile", type=Path, required=True)
    parser.add_argument("--partition", default=None, help="the partition the profile names")
    args = parser.parse_args(argv)
    cfg = load(args.configfile)  # the config's own errors first, wherever this runs
    if shutil.which("sinfo") is None:
        raise SystemExit("no SLURM here (sinfo not found): run this on the submit host")
    sizes = node_sizes(args.partition)
    sacct = run("sacct", "--noheader", "-X", "--starttime", "now")
    found = problems(cfg, sizes, sacct, free_mb(cfg["results_dir"]))
    for line in found:
        print(line, file=sys.stderr)
    if found:
        raise SystemExit(1)
    print(
        f"{args.configfile}: every job fits; sacct reports job states: use workflow/profiles/slurm"
    )


if __name__ == "__main__":
    main()
