"""A reference run's time, from its sittings' log (tools/reference_run.sh --time): each sitting's
wall time, the jobs it finished and their own CPU time (Snakemake's benchmark files), and the run's
totals.

    python tools/run_time.py .runs/default-<commit>.log \
        --benchmarks .runs/ref-<commit>/results/default/benchmarks

A sitting starts at its "=== start" line and ends at its "=== end" line, or, stopped without one
(a kill, a session's end), at the last timestamp Snakemake logged. The wall time measures whatever
else the machine ran meanwhile too; the jobs' CPU time does not. So a sitting's *packing*, its wall
time over its jobs' CPU time spread on the cores, is 1.0 when the jobs kept every core busy and
grows with other work beside them, with jobs waiting on each other, and with work a sitting did on
a job it did not finish (a resumed job's benchmark covers its last sitting only). The jobs' CPU
time over the cores bounds the run from below: no sitting on that many cores could be shorter.
"""

from __future__ import annotations

import argparse
import csv
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

START = re.compile(r"^=== start (\S+)", re.M)
END = re.compile(r"^=== end rc=\d+ (\S+)", re.M)
STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]", re.M)
# a job's block names its id and its benchmark (either order); "Finished jobid: N" ends the job
JOB = re.compile(
    r"^\s+benchmark: (\S+)\n(?:^\s+\w+: .*\n)*?^\s+jobid: (\d+)|"
    r"^\s+jobid: (\d+)\n(?:^\s+\w+: .*\n)*?^\s+benchmark: (\S+)",
    re.M,
)
FINISHED = re.compile(r"^Finished jobid: (\d+)", re.M)
DONE = re.compile(r"(\d+) of (\d+) steps \(\d+%\) done")


@dataclass
class Sitting:
    start: datetime
    stop: datetime
    ended: bool  # an "=== end" line, else interrupted
    benchmarks: list[str] = field(default_factory=list)  # of the jobs it finished

    @property
    def hours(self) -> float:
        return (self.stop - self.start).total_seconds() / 3600


def _utc(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def sittings(text: str) -> list[Sitting]:
    """Each sitting of a reference run's log, with the benchmark files of the jobs it finished."""
    out = []
    for part in re.split(r"^(?==== start )", text, flags=re.M)[1:]:
        start = _utc(START.match(part)[1])
        if end := END.search(part):
            stop, ended = _utc(end[1]), True
        else:
            stamps = STAMP.findall(part)
            stop = (
                datetime.strptime(stamps[-1], "%a %b %d %H:%M:%S %Y").replace(tzinfo=UTC)
                if stamps
                else start
            )
            ended = False
        bench = {}
        for m in JOB.finditer(part):
            path, jobid = (m[1], m[2]) if m[1] else (m[4], m[3])
            bench[jobid] = path
        done = [bench[j] for j in FINISHED.findall(part) if j in bench]
        out.append(Sitting(start, stop, ended, done))
    return out


def jobs_done(text: str) -> tuple[int, int]:
    """(done, whole): the first sitting's count is the run's whole plan ("5 of 146 steps"), and
    what is done is that less what the last sitting still had left."""
    counts = DONE.findall(text)
    if not counts:
        return 0, 0
    whole = int(counts[0][1])
    return whole - (int(counts[-1][1]) - int(counts[-1][0])), whole


def cpu_seconds(benchmark: Path) -> float | None:
    """A Snakemake benchmark file's CPU time (its last repeat), or None if it has none."""
    if not benchmark.is_file():
        return None
    rows = list(csv.DictReader(benchmark.open(), delimiter="\t"))
    value = rows[-1].get("cpu_time") if rows else None
    return float(value) if value not in (None, "", "NA") else None


def main(argv: list[str] | None = None) -> list[Sitting]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="the run's .runs/<tier>-<commit>.log")
    parser.add_argument(
        "--benchmarks",
        type=Path,
        help="the run's results/<tier>/benchmarks, whose paths the log names relative to the run",
    )
    parser.add_argument("--cores", type=int, default=2, help="the cores the run had (2)")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        parser.error(
            f"{args.log}: no such log (tools/reference_run.sh writes it at a sitting's start)"
        )
    text = args.log.read_text()
    run = sittings(text)
    root = args.benchmarks.parents[2] if args.benchmarks else None  # results/<tier>/benchmarks
    total_cpu = 0.0
    for s in run:
        how = "ended" if s.ended else "interrupted"
        line = f"{s.start:%F %T} -> {s.stop:%F %T}: {s.hours:.2f} h ({how})"
        if root is not None:
            cpu = [c for b in s.benchmarks if (c := cpu_seconds(root / b)) is not None]
            total_cpu += sum(cpu)
            spread = sum(cpu) / 3600 / args.cores
            packing = f"{s.hours / spread:.2f}" if spread else "-"
            line += (
                f"; {len(s.benchmarks)} jobs finished, their CPU {sum(cpu) / 3600:.2f} h, "
                f"packing {packing}"
            )
        print(line)
    done, whole = jobs_done(text)
    total = sum(s.hours for s in run)
    print(f"{len(run)} sittings, {total:.2f} h; jobs done: {done}/{whole}")
    if root is not None:
        print(
            f"the finished jobs' CPU time: {total_cpu / 3600:.2f} h, at least "
            f"{total_cpu / 3600 / args.cores:.2f} h on {args.cores} cores"
        )
    return run


if __name__ == "__main__":
    main()
