"""A training job's start-up, phase by phase: one training job of a tier (sparse parity's first
run, the job the DAG starts first), run as its workflow rule runs it (`lengen.train.train`'s
main in a fresh interpreter), with a timer around each phase of its life:

    python benchmarks/job_phases.py [--tier smoke] [--repeat 3] [--out FILE.json]

- start: the interpreter's own start (`python -c pass`'s wall time, measured in the same run);
- imports: `import lengen.train.train` (torch, MLflow, the tasks and the model);
- distributed: runtime.setup (the process group of one);
- model: build_model (the task's model, initialised from the seed);
- engine: make_engine (DeepSpeed imported and its engine built around the model);
- MLflow: every call into lengen.core.tracking and the run bookkeeping (lifecycle.Runs: the
  store opened, the run started and its parameters logged, every metric logged);
- first step, later steps: the trainee's first optimizer step, and all the others;
- the rest: everything else (data worker, checkpoints, the model file, the held-out checks);
- exit: what the process takes after main returns (the job's wall time less the rest: the
  interpreter's shutdown, its libraries' exit handlers and threads; and this script's few
  standard-library imports).

A phase's time counts once: a timed call made inside another timed phase counts for the outer
one. Each repeat trains from scratch in a fresh folder against a fresh MLflow store (prepared
before the clock starts, as the DAG's store job does once per tier). The median of `--repeat`
per phase is printed beside the job's wall time, as a share of it.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

T0 = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
PHASES = (
    "start",
    "imports",
    "distributed",
    "model",
    "engine",
    "MLflow",
    "first step",
    "later steps",
    "the rest",
    "exit",
)


class Clock:
    """Seconds per phase; a call inside a timed call counts for the outer phase only."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.depth = 0

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def wrap(self, owner, name: str, phase) -> None:
        """Replace owner.name by a timed call; phase: a name, or a function of the call count."""
        inner, calls = getattr(owner, name), [0]

        @functools.wraps(inner)
        def timed(*args, **kwargs):
            if self.depth:
                return inner(*args, **kwargs)
            self.depth += 1
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.depth -= 1
                self.add(phase(calls[0]) if callable(phase) else phase, time.perf_counter() - start)
                calls[0] += 1

        setattr(owner, name, timed)


def child(spec: Path, out: Path, result: Path) -> None:
    """One training job, timed by phase (in the fresh interpreter this script was started as)."""
    clock = Clock()
    start = time.perf_counter()
    import lengen.train.train as train  # noqa: PLC0415 - timed: this is the imports phase

    clock.add("imports", time.perf_counter() - start)
    from lengen.core import tracking  # noqa: PLC0415 - already imported by train
    from lengen.train import lifecycle, runtime  # noqa: PLC0415

    clock.wrap(runtime, "setup", "distributed")
    clock.wrap(train, "build_model", "model")
    clock.wrap(train, "make_engine", "engine")
    for name in dir(tracking):
        if not name.startswith("_") and callable(getattr(tracking, name)):
            if getattr(getattr(tracking, name), "__module__", "") == tracking.__name__:
                clock.wrap(tracking, name, "MLflow")
    clock.wrap(lifecycle.Runs, "__init__", "MLflow")
    for name in ("log", "finish", "fail"):
        clock.wrap(lifecycle.Runs, name, "MLflow")
    clock.wrap(train.Alone, "step", lambda n: "first step" if n == 0 else "later steps")
    train.main(["--spec", str(spec), "--out", str(out)])
    total = time.perf_counter() - T0
    clock.add("the rest", total - sum(clock.seconds.values()))
    result.write_text(json.dumps({"in_process_s": total, "phases_s": clock.seconds}))
    sys.stdout.flush()


def one_job(spec: dict, folder: Path) -> dict:
    """The job once, from scratch: a fresh store, a fresh output folder, a fresh interpreter."""
    from lengen.core import tracking

    spec = {**spec, "tracking": {**spec["tracking"], "uri": f"sqlite:///{folder}/mlflow.db"}}
    tracking.prepare_store(spec["tracking"]["uri"], [spec["tracking"]["experiment"]])
    (folder / "spec.json").write_text(json.dumps(spec))
    cmd = [
        sys.executable,
        __file__,
        "--child",
        str(folder / "spec.json"),
        str(folder / "out"),
        str(folder / "phases.json"),
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=folder)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"the training job failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    timed = json.loads((folder / "phases.json").read_text())
    timed["wall_s"] = wall
    return timed


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(*map(Path, sys.argv[2:]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tier", default="smoke", help="config/<tier>.yaml (default smoke)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from lengen.config import plan
    from lengen.config.config import load

    cfg = load(ROOT / "config" / f"{args.tier}.yaml")
    variant = plan.variants(cfg, "sparse_parity")[0]
    run = plan.runs(cfg, "sparse_parity", variant)[0]
    spec = run.spec(cfg)
    bare = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - start)
    jobs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            jobs.append(one_job(spec, Path(tmp)))
        print(f"job {i + 1}/{args.repeat}: {jobs[-1]['wall_s']:.2f} s", file=sys.stderr)
    start = statistics.median(bare)
    for job in jobs:
        job["phases_s"]["start"] = start
        job["phases_s"]["exit"] = job["wall_s"] - job["in_process_s"] - start
    per_phase = {p: statistics.median(j["phases_s"].get(p, 0.0) for j in jobs) for p in PHASES}
    wall = statistics.median(j["wall_s"] for j in jobs)
    steps = spec["train"]["steps"]
    print(
        f"{args.tier} tier, {run.experiment}/{run.variant}/{run.setting}/seed{run.run}, "
        f"{steps} steps, median of {args.repeat}: wall {wall:.2f} s"
    )
    for phase, s in per_phase.items():
        print(f"  {phase:12s} {s:6.2f} s  {s / wall:6.1%}")
    result = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "tier": args.tier,
        "run": f"{run.experiment}/{run.variant}/{run.setting}/seed{run.run}",
        "steps": steps,
        "repeat": args.repeat,
        "wall_s": round(wall, 3),
        "phases_s": {k: round(v, 3) for k, v in per_phase.items()},
        "jobs": jobs,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
