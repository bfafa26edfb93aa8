"""Before submitting a tier to SLURM: does each of its jobs fit the partition (a node's CPUs,
memory and GPUs; the partition's MaxTime, each job's minutes from its own steps:
lengen.config.plan.job_minutes), its checkpoints the disk of results_dir (`jobs.<kind>.disk_mb`),
can the cluster give GPUs the way the SLURM plugin asks for them (--gpus needs
SelectType=select/cons_tres), and can the executor plugin read job states (`sacct` needs
accounting, slurmdbd; without it use workflow/profiles/slurm-squeue)? Prints one line per job and
limit that will not do, saying what to change, and exits 1 when something will not run.

    python -m lengen.config.cluster --configfile config/paper.yaml [--partition gpu]
        [--profile workflow/profiles/slurm]

It reads the profile it is given: its `cores` (the workflow stops at start when a job asks more
CPUs than that: this says so first), its `retries`, and its partition (default-resources
slurm_partition; --partition overrides it). Each job is judged against whole node types of the
partition (a node that has its CPUs, its memory and its GPUs at once), never against the most
CPUs of one type and the most GPUs of another; a partition sinfo does not list is refused.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from lengen import tasks
from lengen.config import plan
from lengen.config.config import disk_mb, load
from lengen.core.cli import KnownError, command_parser, one_line_errors

NO_ACCOUNTING = "accounting storage is disabled"


def run(*cmd: str) -> str:
    """A SLURM command's stdout and stderr together ('' if it is not installed)."""
    if shutil.which(cmd[0]) is None:
        return ""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr


@dataclass(frozen=True)
class Partition:
    """One node type of a partition, as sinfo lists it: its name, a node's CPUs, memory (MB) and
    GPUs, and the partition's MaxTime in minutes (None: infinite)."""

    name: str
    cpus: int
    mem_mb: int
    max_minutes: int | None
    gpus: int


def minutes(limit: str) -> int | None:
    """A SLURM time limit (`infinite`, `MM`, `MM:SS`, `HH:MM:SS`, `D-HH[:MM[:SS]]`) in minutes."""
    if limit in ("infinite", "UNLIMITED", "n/a"):
        return None
    days, _, rest = limit.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if not days and len(parts) <= 2:  # MM or MM:SS
        h, m, sec = 0, parts[0], parts[1] if len(parts) == 2 else 0
    else:
        h, m, sec = (parts + [0, 0])[:3]
    return int(days or 0) * 1440 + h * 60 + m + math.ceil(sec / 60)


def gres_gpus(gres: str) -> int:
    """The GPUs of a node from sinfo's %G (`gpu:8`, `gpu:h100:4(S:0-1)`, `(null)`)."""
    found = re.findall(r"gpu(?::[^:,(]+)?:(\d+)", gres)
    return sum(int(n) for n in found)


class UnknownPartition(KnownError):
    """The partition the profile (or --partition) names is not one sinfo lists."""


def partitions(partition: str | None) -> list[Partition]:
    """Each node type of the partition (all partitions if None): sinfo. A named partition that
    sinfo lists no node of is refused (UnknownPartition), naming the ones it lists."""
    args = ["sinfo", "--noheader", "--format=%P|%c|%m|%l|%G"] + (
        ["--partition", partition] if partition else []
    )
    found = []
    for line in run(*args).splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5:
            continue
        name, cpus, mem, limit, gres = fields
        found.append(
            Partition(
                name.rstrip("*"),
                int(cpus.rstrip("+")),
                int(mem.rstrip("+")),
                minutes(limit),
                gres_gpus(gres),
            )
        )
    if partition and not found:
        known = sorted({p.name for p in partitions(None)})
        raise UnknownPartition(
            f"partition {partition!r}: sinfo lists no node in it (partitions here: "
            f"{', '.join(known) or 'none'}): set the profile's default-resources slurm_partition "
            "(or --partition) to one of them"
        )
    return found


def select_type() -> str:
    """The cluster's SelectType (`scontrol show config`), '' where it cannot be read."""
    m = re.search(r"^SelectType\s*=\s*(\S+)", run("scontrol", "show", "config"), re.M)
    return m[1] if m else ""


@dataclass(frozen=True)
class Submission:
    """What one SLURM job of the tier asks for (its largest), and what the work needs."""

    label: str  # the jobs kind(s) it is made of, as the tier's keys
    fix: str  # the key that sets its minutes
    minutes: int  # asked per submission
    need: int  # the whole work's minutes (more than `minutes` where a training is resumed)
    gpus: int
    gpus_key: str
    cpus: int = 1
    mem_mb: int = 0
    kinds: tuple[str, ...] = ()  # the `jobs` kinds it is made of

    def holds(self, node: Partition) -> bool:
        """Whether one node of this type has this job's CPUs, memory and GPUs at once."""
        return self.cpus <= node.cpus and self.mem_mb <= node.mem_mb and self.gpus <= node.gpus


def submissions(cfg: dict) -> list[Submission]:
    """The kinds of SLURM job the profile submits, each at its largest: a model's training and
    evaluation in one job (the profile's `model` group), a language model's training, its
    evaluations, the data, the small jobs."""
    jobs = cfg.get("jobs", {})
    if not jobs:
        return []
    steps = training_steps(cfg)
    found = []
    train, ev = jobs["train"], jobs["eval"]
    if steps.get("train"):
        found.append(
            Submission(
                "jobs.train + jobs.eval (a model's training and evaluation, one job)",
                "jobs.train.max_runtime" if "step_s" in train else "jobs.train.runtime",
                plan.job_minutes(train, steps["train"]) + plan.job_minutes(ev),
                plan.job_minutes(train, steps["train"], capped=False) + plan.job_minutes(ev),
                cfg["runtime"]["gpus_per_job"],
                "runtime.gpus_per_job",
                max(train["cpus"], ev["cpus"]),
                max(train["mem_mb"], ev["mem_mb"]),
                ("train", "eval"),
            )
        )
    if steps.get("natural_language_train"):
        nl, n = jobs["natural_language_train"], steps["natural_language_train"]
        key = "natural_language.gpus_per_job"  # (the runtime's where the section sets none)
        gpus = plan.gpus_per_job(cfg)[key]
        found.append(
            Submission(
                "jobs.natural_language_train",
                "jobs.natural_language_train.max_runtime"
                if "step_s" in nl
                else "jobs.natural_language_train.runtime",
                plan.job_minutes(nl, n),
                plan.job_minutes(nl, n, capped=False),
                gpus,
                key,
                nl["cpus"],
                nl["mem_mb"],
                ("natural_language_train",),
            )
        )
    for kind, gpus in (
        ("natural_language_eval", plan.eval_gpus(cfg)),
        ("natural_language_data", 0),
        ("small", 0),
    ):
        if kind.startswith("natural_language") and "natural_language" not in cfg:
            continue
        m = plan.job_minutes(jobs[kind])
        found.append(
            Submission(
                f"jobs.{kind}",
                f"jobs.{kind}.runtime",
                m,
                m,
                gpus,
                "runtime.gpus_per_job",
                jobs[kind]["cpus"],
                jobs[kind]["mem_mb"],
                (kind,),
            )
        )
    return found


def _node(p: Partition) -> str:
    return f"{p.cpus} CPUs / {p.mem_mb} MB / {p.gpus} GPU(s)"


def training_steps(cfg: dict) -> dict[str, int]:
    """The most steps one training job of each kind trains (synthetic: every run's; language:
    h_short's and h_long's)."""
    synthetic = [
        run.spec(cfg)["train"]["steps"]
        for exp in plan.experiments(cfg)
        for v in plan.variants(cfg, exp)
        for run in plan.runs(cfg, exp, v)
    ]
    out = {"train": max(synthetic, default=0)}
    if "natural_language" in cfg:
        nl = tasks.get("natural_language")
        out["natural_language_train"] = max(
            nl.train_spec(cfg, w)["train"]["steps"] for w in ("short", "long")
        )
    return out


def over_limits(
    cfg: dict, parts: list[Partition], select: str = "", retries: int | None = None
) -> list[str]:
    """A line per kind of SLURM job and limit it exceeds: the partition's MaxTime (its minutes
    from its own steps), the GPUs of its nodes, the resubmissions a cut training needs (the
    profile's retries), and GPUs asked with --gpus where SelectType is not select/cons_tres."""
    found = []
    subs = submissions(cfg)
    for sub in subs if parts else []:
        holding = [p for p in parts if sub.holds(p)]  # whole node types, each a node's all
        if not holding:
            types = "; ".join(f"{p.name}: {_node(p)}" for p in dict.fromkeys(parts))
            keys = ", ".join(f"jobs.{k}.cpus / mem_mb" for k in sub.kinds)
            found.append(
                f"{sub.label} asks {sub.cpus} CPUs / {sub.mem_mb} MB / {sub.gpus} GPU(s) "
                f"({sub.gpus_key}) of one node; no node type holds them all ({types}): lower "
                f"{keys} or {sub.gpus_key} (the batch stays, accumulated), or name a partition "
                "whose nodes hold it (it would stay PENDING)"
            )
            continue
        longest = max(holding, key=lambda p: p.max_minutes if p.max_minutes is not None else 10**9)
        if longest.max_minutes is not None and sub.minutes > longest.max_minutes:
            found.append(
                f"{sub.label} asks {sub.minutes:,} min; partition {longest.name} allows "
                f"{longest.max_minutes:,} (MaxTime): set {sub.fix} lower (a training cut "
                "at its limit resumes from its checkpoints when retried), or name a partition "
                "with a longer MaxTime"
            )
    for sub in subs:
        if retries is not None and sub.need > sub.minutes:
            times = math.ceil(sub.need / sub.minutes)
            if times - 1 > retries:
                found.append(
                    f"{sub.label} needs ~{sub.need:,} min, {sub.minutes:,} a submission: "
                    f"{times} submissions, but the profile's retries is {retries}: set "
                    f"retries: {times - 1} (each resumes from the last checkpoint)"
                )
    if select and select != "select/cons_tres" and any(s.gpus for s in subs):
        found.append(
            f"SelectType is {select}: the SLURM plugin asks for GPUs with --gpus, which needs "
            "select/cons_tres (scontrol show config); ask the cluster's admins, or run the GPU "
            "jobs on one machine (snakemake --cores all)"
        )
    return found


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


def used_mb(folder: str | Path) -> float:
    """What `folder` holds already, MB (0 if it does not exist); a file with several names (a
    finished model's hard link, lengen.train.lifecycle.keep_finished) counted once."""
    path = Path(folder)
    if not path.is_dir():
        return 0.0
    sizes = {
        (st.st_dev, st.st_ino): st.st_size
        for f in path.rglob("*")
        if f.is_file() and (st := f.stat())
    }
    return sum(sizes.values()) / 2**20


def disk_short(cfg: dict, jobs_at_once: int, free: int | None = None) -> str | None:
    """One line when results_dir's disk cannot hold what the tier will write there (its model
    files, token files and `jobs_at_once` training jobs' checkpoints: config.disk_mb) beyond what
    is there already; None when it can. Checked before the first job (workflow onstart)."""
    need = disk_mb(cfg, jobs_at_once)
    free = free_mb(cfg["results_dir"]) if free is None else free
    more = need["total"] - used_mb(cfg["results_dir"])
    if more <= free:
        return None
    return (
        f"{cfg['results_dir']}: the tier writes ~{need['total'] / 1024:,.1f} GB there (model files "
        f"{need['models'] / 1024:,.1f}, token files {need['data'] / 1024:,.1f}, checkpoints of "
        f"{jobs_at_once} training job(s) at once {need['checkpoints'] / 1024:,.1f}), "
        f"~{more / 1024:,.1f} GB more than it holds, but its disk has {free / 1024:,.1f} GB free: "
        "free space, point results_dir at a larger disk, or run fewer jobs at once "
        "(LENGEN_DISK_CHECK=0 skips this check)"
    )


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


def at_start(cfg: dict, cores: int) -> list[str]:
    """What the workflow refuses at start on a cluster (workflow/rules/common.smk, onstart): a
    job kind asking more CPUs than the profile's `cores`, the CPUs it states of one node."""
    return too_large(
        cfg,
        cores,
        node="a node (the profile's `cores`)",
        fix="set the profile's `cores` to your nodes' CPUs",
    )


def problems(
    cfg: dict,
    parts: list[Partition],
    sacct: str,
    free: int | None = None,
    select: str = "",
    retries: int | None = None,
    cores: int | None = None,
) -> list[str]:
    """What will not run: a job the profile's `cores` refuses at start; a SLURM job no node type
    of the partition holds whole (CPUs, memory and GPUs of one node), past its MaxTime, or
    needing more resubmissions than the profile's retries; GPUs the cluster cannot give as
    asked; a job kind whose checkpoints the results_dir's disk cannot hold (`free` MB there,
    where known); job states sacct cannot report. `parts`: the partition's node types."""
    found = at_start(cfg, cores) if cores is not None else []
    found += over_limits(cfg, parts, select, retries)
    if free is not None:
        found += short_of_disk(cfg, free)
    if NO_ACCOUNTING in sacct.lower():
        found.append(
            "sacct: Slurm accounting storage is disabled: use --profile "
            "workflow/profiles/slurm-squeue (job states from squeue; MinJobAge >= 120 s)"
        )
    return found


class ProfileError(KnownError):
    """The SLURM profile cannot be read."""


def read_profile(folder: Path) -> dict:
    """What the preflight takes from a Snakemake profile folder: `cores`, `retries` (0 when
    unset, as Snakemake) and default-resources' slurm_partition (None when unset)."""
    path = Path(folder) / "config.yaml"
    try:
        profile = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ProfileError(
            f"{path}: cannot read the profile ({err}); give --profile the folder you submit with"
        ) from None
    resources = profile.get("default-resources") or {}
    if isinstance(resources, list):  # `- slurm_partition=gpu` form
        resources = dict(r.split("=", 1) for r in resources if "=" in r)
    partition = resources.get("slurm_partition")
    cores = profile.get("cores")
    return {
        "cores": int(cores) if str(cores).isdigit() else None,
        "retries": int(profile.get("retries", 0) or 0),
        "partition": str(partition).strip("'\"") if partition else None,
    }


# pragma: no mutate block  (CLI wiring)
@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: check a tier against the cluster this runs on."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument("--configfile", type=Path, required=True)
    which = "the partition to check (default: the profile's slurm_partition)"
    parser.add_argument("--partition", default=None, help=which)
    parser.add_argument(
        "--profile",
        type=Path,
        default=Path("workflow/profiles/slurm"),
        help="the profile you submit with (its cores, retries, partition; "
        "default workflow/profiles/slurm)",
    )
    args = parser.parse_args(argv)
    cfg = load(args.configfile)  # the config's own errors first, wherever this runs
    if shutil.which("sinfo") is None:
        raise SystemExit("no SLURM here (sinfo not found): run this on the submit host")
    profile = read_profile(args.profile)
    partition = args.partition or profile["partition"]
    sacct = run("sacct", "--noheader", "-X", "--starttime", "now")
    found = problems(
        cfg,
        partitions(partition),
        sacct,
        free_mb(cfg["results_dir"]),
        select_type(),
        profile["retries"],
        profile["cores"],
    )
    for line in found:
        print(line, file=sys.stderr)
    if found:
        raise SystemExit(1)
    print(
        f"{args.configfile}: every job fits; sacct reports job states: use workflow/profiles/slurm"
    )


if __name__ == "__main__":
    main()
