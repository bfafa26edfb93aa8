"""What a Snakefile parse pays before any job: reading and validating a config (the plan's imports:
lengen.tasks, lengen.config) against importing torch and mlflow, which the plan imported before
the stages were layered (docs/extending.md), each in a fresh interpreter, best of --repeat.

    python benchmarks/parse.py [--repeat 3] [--configfile config/config.yaml]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

PLAN = (
    "from lengen import tasks\n"
    "from lengen.config import artifacts\n"
    "from lengen.config.config import load\n"
    "from lengen.core.specs import experiment_name, tracking_uri\n"
    "load({path!r})\n"
)
HEAVY = "import torch, mlflow\n"


def best(code: str, repeat: int) -> float:
    """Best wall time of `python -c code` over `repeat` fresh interpreters."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--configfile", default="config/config.yaml")
    args = parser.parse_args()
    empty = best("pass", args.repeat)
    plan = best(PLAN.format(path=args.configfile), args.repeat)
    heavy = best(HEAVY, args.repeat)
    print(f"interpreter start: {empty:.2f} s")
    print(f"read + validate {args.configfile}: {plan:.2f} s")
    print(f"import torch + mlflow (what the plan paid on top before): {heavy:.2f} s")
    print(f"a parse before / now: {(plan + heavy) / plan:.1f}x")


if __name__ == "__main__":
    main()
