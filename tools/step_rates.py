"""Seconds per training step as a run's own logs measured them, against the single-job step times
its estimate was made from (a benchmarks/step_time.py JSON): how much slower the run's jobs step
than that measurement, e.g. two jobs side by side on 2 cores (docs/results.md).

    python tools/step_rates.py results/default/logs \
        benchmarks/measured/2026-11-25-cpu/step_time_default_3runs.json

A training log holds the trainer's progress bar (`seed0:  75%|...| 17993/24000 [30:06<09:14, ...]`).
Each sitting of a job (a resume restarts the bar's clock) gives steps run over seconds elapsed
between its first and last bar; a job's rate sums its sittings. The early-stop checks inside
training are part of the seconds, as they are part of the job.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

BAR = re.compile(r"(\d+)/\d+ \[(?:(\d+):)?(\d+):(\d+)<")


def sittings(text: str) -> list[tuple[int, float]]:
    """(steps, seconds) of each sitting in a training log's progress bars."""
    out, first, last = [], None, None
    for line in re.split(r"[\r\n]", text):
        m = BAR.search(line)
        if not m:
            continue
        step, (h, mins, s) = int(m[1]), m.groups()[1:]
        t = int(h or 0) * 3600 + int(mins) * 60 + int(s)
        if last is not None and t < last[1]:  # the clock restarted: a resumed sitting
            out.append((last[0] - first[0], last[1] - first[1]))
            first = None
        first = first or (step, t)
        last = (step, t)
    if last is not None:
        out.append((last[0] - first[0], last[1] - first[1]))
    return [(n, t) for n, t in out if n > 0 and t > 0]


def kind_of(log: Path, kinds: list[str]) -> str | None:
    """The estimate's job kind of `<logs>/<experiment>/train_<variant>_<setting>_seed<k>.log`:
    the longest kind whose variant (and setting) the file name starts with."""
    rest = log.stem.removeprefix("train_") + "_"
    found = [
        k
        for k in kinds
        if k.split("/")[0] == log.parent.name and rest.startswith("_".join(k.split("/")[1:]) + "_")
    ]
    return max(found, key=len, default=None)


def rates(logs: Path, estimate: dict) -> list[dict]:
    """One row per training log with a measured sitting: its kind, steps, seconds per step, the
    estimate's seconds per step and their ratio."""
    per_step = {k["kind"]: k["s_per_step"] for k in estimate["kinds"]}
    rows = []
    for log in sorted(logs.glob("*/train_*.log")):
        kind = kind_of(log, list(per_step))
        done = sittings(log.read_text(errors="replace"))
        if kind is None or not done:
            continue
        steps, seconds = sum(n for n, _ in done), sum(t for _, t in done)
        rows.append(
            {
                "job": f"{log.parent.name}/{log.stem}",
                "kind": kind,
                "steps": steps,
                "s_per_step": seconds / steps,
                "estimate_s_per_step": per_step[kind],
                "ratio": seconds / steps / per_step[kind],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, help="a run's results/<tier>/logs")
    parser.add_argument("estimate", type=Path, help="the benchmarks/step_time.py JSON")
    args = parser.parse_args(argv)
    rows = rates(args.logs, json.loads(args.estimate.read_text()))
    print(f"{'job':45s} {'steps':>7s} {'s/step':>8s} {'estimate':>8s} {'ratio':>6s}")
    for r in rows:
        print(
            f"{r['job']:45s} {r['steps']:7d} {r['s_per_step']:8.4f} "
            f"{r['estimate_s_per_step']:8.4f} {r['ratio']:6.2f}"
        )
    if rows:
        steps = sum(r["steps"] for r in rows)
        measured = sum(r["s_per_step"] * r["steps"] for r in rows)
        estimated = sum(r["estimate_s_per_step"] * r["steps"] for r in rows)
        print(
            f"all: {steps} steps, {measured / 3600:.2f} h measured against "
            f"{estimated / 3600:.2f} h estimated: {measured / estimated:.2f}x"
        )
    return rows


if __name__ == "__main__":
    main()
