"""Every measured time of the project, from committed data: benchmarks/measured/times.yaml (a
measurement in seconds, with its date, machine and method, or an estimate computed from a
committed benchmarks/step_time.py JSON and a tier's config as it is now).

    python tools/times.py           # the table: each time, its date, machine and how

Docs quote a time with its date and point here; nothing writes it into them."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from schedule import job_kinds, job_table, training_hours  # noqa: E402  (benchmarks/, no torch)

from lengen.config import plan  # noqa: E402
from lengen.config.config import load as load_config  # noqa: E402

TIMES = "benchmarks/measured/times.yaml"


def load(root: Path = ROOT) -> dict[str, dict]:
    """The registry: key -> entry."""
    return yaml.safe_load((root / TIMES).read_text())


def hours(entry: dict, root: Path = ROOT) -> float:
    """An estimate's hours: every job kind of the benchmark JSON, its measured step time (or the
    `step_times` file's, for the kinds it matches) x its configured steps, scheduled on
    `node_gpus` devices; `field` picks one_device_h or node_h."""
    bench = json.loads((root / entry["estimate"]).read_text())
    step = {k["kind"]: k["s_per_step"] for k in bench["kinds"]}
    if "step_times" in entry:
        other = json.loads((root / entry["step_times"]["file"]).read_text())
        match = re.compile(entry["step_times"]["kinds"])
        step |= {k["kind"]: k["s_per_step"] for k in other["kinds"] if match.search(k["kind"])}
    if "fused" in entry:
        step |= fused_steps(entry["fused"], root)
    if "trainer_fused" in entry:
        step |= trainer_steps(entry["trainer_fused"], load_config(root / entry["config"]), root)
    jobs = tier_jobs(entry, bench, root)
    if missing := sorted(jobs.keys() - step.keys()):
        raise KeyError(f"{TIMES}: {missing} have no measured step time in {entry['estimate']}")
    return training_hours(jobs, step, entry["node_gpus"])[entry["field"]] * slowdown(entry, root)


def slowdown(entry: dict, root: Path = ROOT) -> float:
    """How much slower than the single-job step times the tier's jobs step where they share the
    machine: the overall ratio (`all: ... 1.50x`, the last line) of the tools/step_rates.py output
    an entry's `slowdown_from` names, measured over a real run's training logs; 1 without one."""
    if "slowdown_from" not in entry:
        return 1.0
    path = root / entry["slowdown_from"]
    found = re.search(r"^all: .* ([\d.]+)x$", path.read_text(), re.M)
    if not found:
        raise ValueError(f"{path}: no 'all: ... N.NNx' line (tools/step_rates.py's last line)")
    return float(found[1])


def tokens_per_step(path: str, root: Path = ROOT) -> dict[str, float]:
    """Each job kind's tokens per optimizer step in a step_time.py JSON (batch x accumulation x
    mean sequence length): what a fused entry's `tokens_from` names."""
    kinds = json.loads((root / path).read_text())["kinds"]
    return {k["kind"]: k["batch"] * k["accum"] * k["seq_len"] for k in kinds}


def fused_steps(fused: dict, root: Path = ROOT) -> dict[str, float]:
    """Seconds per run-step of each synthetic kind trained in a fused group (an entry's `fused`):
    the bare fused step per token of benchmarks/fused.py at `runs` runs (a GPU's measurement),
    times the kind's tokens per step (`tokens_from`: a step_time.py JSON's batch x seq_len), times
    the trainer's measured overhead: a fused group that trained (`trainer`: its steps in seconds,
    `runs_per_kind` runs of each of its kinds) over what the bare step predicts for it (padding
    to the group's longest sequence, data, the engine's bookkeeping)."""
    bench = json.loads((root / fused["file"]).read_text())
    row = next(r for r in bench["rows"] if r["runs"] == fused["runs"])
    setup = bench["setup"]
    per_token = row["fused_s"] / fused["runs"] / (setup["batch"] * setup["length"])
    tokens = tokens_per_step(fused["tokens_from"], root)
    trainer = fused["trainer"]
    predicted = per_token * trainer["runs_per_kind"] * sum(tokens[k] for k in trainer["kinds"])
    overhead = trainer["seconds"] / trainer["steps"] / predicted
    match = re.compile(fused["kinds"])
    return {k: per_token * n * overhead for k, n in tokens.items() if match.search(k)}


def trainer_steps(fused: dict, cfg: dict, root: Path = ROOT) -> dict[str, float]:
    """Seconds per run-step of each synthetic kind that the tier `cfg` trains in fused groups
    (lengen.config.plan.fused), from the trainer's own fused step (an entry's `trainer_fused`:
    benchmarks/group_step.py's JSON, measured on a GPU): the seconds per real token of the group
    `groups` names for the kind's experiment (its group name and R), times the kind's real
    tokens per step (`tokens_from`: a step_time.py JSON's batch x seq_len). Kinds trained one by
    one keep their own measured step."""
    bench = json.loads((root / fused["file"]).read_text())
    mode = fused.get("compile", "none")
    per_token = {
        (r["group"], r["runs"]): r["ms_per_step"] / 1e3 / r["real_tokens_per_step"]
        for r in bench["rows"]
        if r["compile"] == mode
    }
    out = {}
    for kind, tokens in tokens_per_step(fused["tokens_from"], root).items():
        experiment, variant = kind.split("/")[:2]
        if experiment in fused["groups"] and plan.fused(cfg, experiment, variant):
            group, runs = fused["groups"][experiment]
            out[kind] = per_token[group, runs] * tokens
    return out


def tier_jobs(entry: dict, bench: dict, root: Path = ROOT) -> dict[str, dict]:
    """Kind -> {jobs, steps, gpus}: the tier config's own runs when the entry names a `config`
    (the measurement then times each kind's step, the config says how many and how long), else
    the jobs the benchmark JSON recorded at measurement time; an `experiment` keeps that one
    branch's kinds. Runs count one by one: a fused group's step is not measured (its time would
    come from benchmarks/fused.py on the GPU)."""
    jobs = bench["jobs"]
    if "config" in entry:
        jobs = job_table(job_kinds(load_config(root / entry["config"])))
    if "experiment" in entry:  # one branch of the tier: its experiment's kinds only
        jobs = {k: j for k, j in jobs.items() if k.split("/")[0] == entry["experiment"]}
        if not jobs:
            raise KeyError(f"{TIMES}: experiment {entry['experiment']!r} has no job kind")
    return jobs


def text(entry: dict, root: Path = ROOT) -> str:
    """How the docs write an entry: `~2 min` (also an estimate under an hour), `14 min 54 s`,
    `9.7 h` (also a measurement >= 2 h)."""
    if "seconds" not in entry:
        h = hours(entry, root)
        if h < 1:
            return f"~{round(h * 60)} min"
        return f"{h:.0f} h" if h >= 100 else f"{h:.1f} h"
    s = int(entry["seconds"])
    if s >= 7200:  # a tier's run: hours read better than `312 min 41 s`
        return f"{s / 3600:.1f} h"
    if entry.get("approx"):
        return f"~{round(s / 60)} min"
    m, s = divmod(s, 60)
    return f"{m} min {s} s" if m else f"{s} s"


def texts(root: Path = ROOT) -> dict[str, str]:
    return {key: text(entry, root) for key, entry in load(root).items()}


def table(root: Path = ROOT) -> str:
    """Every time, its date, machine and how it was measured, as a markdown table."""
    lines = ["| time | value | date | machine | how |", "| --- | --- | --- | --- | --- |"]
    for key, entry in load(root).items():
        how = entry["how"] if "seconds" in entry else f"{entry['how']} (`{entry['estimate']}`)"
        if "slowdown_from" in entry:  # the ratio from its file, not typed beside it
            how += f"; x {slowdown(entry, root):.2f} (`{entry['slowdown_from']}`)"
        lines.append(
            f"| `{key}` | {text(entry, root)} | {entry['date']} | {entry['machine']} | {how} |"
        )
    return "\n".join(lines)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    print(table())


if __name__ == "__main__":
    main()
