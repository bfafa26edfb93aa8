"""What a job pays before it works: each job module's import time in a fresh interpreter, the
heavy libraries it pulls in, and each of those libraries' own import time alone (the baseline
of the same run), best of `--repeat`:

    python benchmarks/startup.py [--repeat 3] [--out FILE.json]

A job module here is one a workflow rule runs (`python -m ...`). A library a job imports but
never uses is start-up it could skip; which library each job needs is read from what it does
(training and evaluation log to MLflow; the table and test-set jobs do not).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

JOBS = (
    "lengen.train.train",
    "lengen.train.group",
    "lengen.analysis.evaluate",
    "lengen.analysis.tables",
    "lengen.analysis.perplexity",
    "lengen.analysis.influence",
    "lengen.analysis.attention",
    "lengen.analysis.theory_cases",
    "lengen.data.corpus",
    "lengen.data.tokens",
    "lengen.report.figures",
    "lengen.report.report",
    "lengen.core.tracking",
    "lengen.core.gpus",
)
HEAVY = ("torch", "mlflow", "deepspeed", "transformers", "matplotlib", "seaborn", "pandas")
PROBE = """
import importlib, sys, time
t = time.perf_counter(); importlib.import_module(sys.argv[1]); dt = time.perf_counter() - t
print("STARTUP", dt, " ".join(m for m in sys.argv[2:] if m in sys.modules))
"""


def timed(module: str) -> tuple[float, list[str]]:
    """Seconds to import `module` in a fresh interpreter, and the heavy libraries it loaded."""
    text = subprocess.run(
        [sys.executable, "-c", PROBE, module, *HEAVY], capture_output=True, text=True, check=True
    ).stdout
    out = next(x for x in text.splitlines() if x.startswith("STARTUP ")).split()[1:]
    return float(out[0]), out[1:]


def best(module: str, repeat: int) -> tuple[float, list[str]]:
    runs = [timed(module) for _ in range(repeat)]
    return min(t for t, _ in runs), runs[0][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    libs = {lib: best(lib, args.repeat)[0] for lib in HEAVY}
    print(f"{'library alone':34s} {'s':>6s}")
    for lib, s in libs.items():
        print(f"{lib:34s} {s:6.2f}")
    rows = []
    print(f"\n{'job module':34s} {'s':>6s}  heavy libraries it loads")
    for job in JOBS:
        s, loaded = best(job, args.repeat)
        rows.append({"module": job, "import_s": round(s, 3), "loads": loaded})
        print(f"{job:34s} {s:6.2f}  {' '.join(loaded) or '-'}")
    result = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "repeat": args.repeat,
        "libraries_s": {k: round(v, 3) for k, v in libs.items()},
        "jobs": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
