"""A tier's disk, measured: run it from scratch in an empty folder and sample what its results and
reports folders hold every few seconds, so the peak (checkpoints included, while they live) and
what the run leaves are measured, not estimated. The config's own estimate
(`lengen.config.config.disk_mb`: model files, token files, checkpoints; a lower bound that leaves
out the MLflow store, its artifacts, the reports and the logs) is printed beside it.

    python benchmarks/disk.py --configfile config/smoke.yaml --json OUT.json

The JSON holds the peak and final MB of the whole run and, at the end, each top-level part
(models and tables under results/<tier>/<experiment>, mlflow.db, mlartifacts, logs, benchmarks,
reports/<tier>: report.html and the rest). README's smoke row states the peak
(tests/test_gpus.py reads it from benchmarks/measured/).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def used_bytes(folder: Path) -> int:
    """Bytes the files under `folder` hold, each file once (hard links counted once)."""
    seen = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:  # removed while walked (a checkpoint rotated)
                continue
            seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


def parts(results: Path, reports: Path) -> dict[str, float]:
    """MB of each top-level entry of the results folder, and of the reports folder's report.html
    and its other files."""
    found = {}
    for entry in sorted(results.iterdir()) if results.is_dir() else []:
        size = used_bytes(entry) if entry.is_dir() else entry.stat().st_size
        found[f"results/{entry.name}"] = size / 2**20
    html = reports / "report.html"
    found["reports/report.html"] = (html.stat().st_size if html.is_file() else 0) / 2**20
    found["reports/other"] = used_bytes(reports) / 2**20 - found["reports/report.html"]
    return {k: round(v, 3) for k, v in found.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", type=Path, default=ROOT / "config" / "smoke.yaml")
    parser.add_argument("--json", type=Path, required=True, help="where the measurement goes")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--cores", default="all", help="snakemake --cores (default all)")
    args = parser.parse_args(argv)
    from lengen.config.config import disk_mb, load

    cfg = load(args.configfile)
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        results, reports = work / cfg["results_dir"], work / cfg["reports_dir"]
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(ROOT / "Snakefile"),
            "--directory",
            str(work),
            "--cores",
            args.cores,
            "--configfile",
            str(args.configfile.resolve()),
            "-q",
        ]
        t0, peak = time.monotonic(), 0
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while proc.poll() is None:
            peak = max(peak, used_bytes(results) + used_bytes(reports))
            time.sleep(args.every)
        err = proc.stderr.read()
        if proc.returncode != 0:
            raise SystemExit(f"the tier failed (exit {proc.returncode}):\n{err[-3000:]}")
        final = used_bytes(results) + used_bytes(reports)
        row = {
            "config": str(args.configfile.resolve().relative_to(ROOT)),
            "tier": cfg["tier"],
            "wall_s": round(time.monotonic() - t0, 1),
            "peak_mb": round(max(peak, final) / 2**20, 2),
            "final_mb": round(final / 2**20, 2),
            "parts_mb": parts(results, reports),
            "estimate_mb": {k: round(v, 3) for k, v in disk_mb(cfg).items()},
            "sample_every_s": args.every,
        }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(row, indent=2) + "\n")
    print(
        f"{row['tier']}: peak {row['peak_mb']} MB, {row['final_mb']} MB left at the end "
        f"(the config's estimate of models, data and checkpoints: "
        f"{row['estimate_mb']['total']} MB); {args.json}"
    )


if __name__ == "__main__":
    main()
