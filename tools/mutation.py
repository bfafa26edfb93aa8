"""Mutation score of the scientific core, per module (issue: tests that catch the bugs that matter).

    python tools/mutation.py                      # the whole core, from scratch, table at the end
    python tools/mutation.py lengen.analysis.decode lengen.tasks.sparse_parity   # some modules only
    python tools/mutation.py --retest             # only the last run's survivors, again
    python tools/mutation.py --report             # the table of the last run (mutants/)
    python tools/mutation.py --shard report       # one shard (SHARDS), resumable, < 2 h on 2 cores
    python tools/mutation.py --shards             # each shard's progress

mutmut (configured in pyproject.toml, [tool.mutmut]) plants one small change at a time in the core
modules (an operator, a constant, a comparison, a returned value...) and runs the tests that execute
the changed function; a mutant is *killed* when a test fails. The score per module is
killed / (mutants - equivalents); a surviving mutant is either a missing test or an *equivalent*
mutant (same behaviour, e.g. `device=None` on a CPU-only machine, a progress bar's label). The
equivalents are rules in tools/mutation_equivalent.yaml, each with its reason: a mutant name
pattern and a regular expression on the mutated line (`mutmut show NAME`), so that they survive
renumbering. The table is written to reference/mutation_score.csv and every survivor is listed,
with its rule's reason or as a missing test.

Shards. A whole score is ~6,000 mutants, more than one sitting of 2 cores; `--shard NAME` runs one
of SHARDS (module groups that together are the core, tested) and can be stopped at any time: run
again, it tests only that shard's mutants not yet checked. Results accumulate in mutants/; the
committed table is written only once every mutant of the core is checked (before that the table
goes to mutants/partial_score.csv), with each shard's minutes in reference/mutation_shards.csv.
Start a new score with `--fresh` (deletes mutants/).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fnmatch
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "tools" / "mutation_equivalent.yaml"
OUT = ROOT / "reference" / "mutation_score.csv"
SHARD_TIMES = ROOT / "reference" / "mutation_shards.csv"
PARTIAL = ROOT / "mutants" / "partial_score.csv"
SITTINGS = ROOT / "mutants" / "shard_sittings.json"
# module groups, each meant to take under 2 h on 2 cores (measured: reference/mutation_shards.csv
# once a whole score is done); together they are pyproject's only_mutate (tested)
SHARDS = {
    "report": ["lengen.report.*"],
    "tasks": ["lengen.tasks.*"],
    "analysis": ["lengen.analysis.*", "lengen.core.*"],
}
TO_DO = {"not checked", "check was interrupted by user"}
LINE = re.compile(r"^\s*(?P<name>[\w.ǁ]+__mutmut_\d+): (?P<status>.+?)\s*$")


def module_of(name: str) -> str:
    """lengen.report.report.x_ps_rule__mutmut_3 -> lengen.report.report (methods:
    xǁClassǁmethod__mutmut_N)."""
    return name.split("__mutmut_")[0].rsplit(".", 1)[0]


def in_modules(name: str, modules: list[str]) -> bool:
    """Whether a mutant is in one of these modules or packages (all of them when none)."""
    module = module_of(name)
    return not modules or any(module == m or module.startswith(m + ".") for m in modules)


def read_results() -> dict[str, str]:
    """Mutant name -> status from `mutmut results --all true` (none before a first run)."""
    if not (ROOT / "mutants").exists():
        return {}
    out = subprocess.run(
        ["mutmut", "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return {m["name"]: m["status"] for m in map(LINE.match, out.splitlines()) if m}


def shard_of(name: str) -> str:
    """The shard a mutant (or a module) belongs to."""
    for shard, patterns in SHARDS.items():
        if any(fnmatch.fnmatch(name, p) for p in patterns):
            return shard
    raise KeyError(f"{name} is in no shard of tools/mutation.py's SHARDS")


def shard_selection(shard: str, results: dict[str, str]) -> list[str]:
    """What `mutmut run` is given for a shard: its module patterns when none of its mutants has a
    result yet (mutmut then generates them), else only its mutants still to check (a resumed shard
    never retests what it checked; mutmut retests every mutant it is named)."""
    mine = {n: st for n, st in results.items() if shard_of(n) == shard}
    if not mine or all(st in TO_DO for st in mine.values()):
        return list(SHARDS[shard])
    return sorted(n for n, st in mine.items() if st in TO_DO)


def shard_progress(results: dict[str, str]) -> pd.DataFrame:
    """Checked / mutants per shard (a shard never generated has 0 mutants)."""
    rows = []
    for shard in SHARDS:
        mine = [st for n, st in results.items() if shard_of(n) == shard]
        rows.append(
            {"shard": shard, "mutants": len(mine), "checked": sum(st not in TO_DO for st in mine)}
        )
    return pd.DataFrame(rows)


def sync_tests(root: Path = ROOT) -> bool:
    """Copy today's tests into an existing mutants/ (mutmut copies a file there only once, so a
    resumed shard or a --retest would otherwise run the tests of the sitting that created it;
    mutmut then collects the new tests' coverage itself). False when there is no mutants/."""
    if not (root / "mutants").is_dir():
        return False
    shutil.copytree(root / "tests", root / "mutants" / "tests", dirs_exist_ok=True)
    return True


def unfinished(progress: pd.DataFrame) -> list[str]:
    """The shards not generated yet or with mutants still to check."""
    return progress[(progress.mutants == 0) | (progress.checked < progress.mutants)].shard.tolist()


def complete(results: dict[str, str]) -> bool:
    """Every shard generated and every mutant checked: the table is a whole score."""
    return not unfinished(shard_progress(results))


def survived(status: str) -> bool:
    """A mutant checked and not killed (survived, no test reaches it, timeout...): a missing
    test or an equivalent; one still to check is neither."""
    return status != "killed" and status not in TO_DO


@functools.cache
def mutated_lines(name: str) -> dict[str, str]:
    """The '+' (added) and '-' (removed) lines of a mutant's diff (`mutmut show`, ~0.5 s each;
    kept for the process: a retest matches the rules before its run and again for its table)."""
    out = subprocess.run(["mutmut", "show", name], cwd=ROOT, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    return {
        side: "\n".join(line for line in lines if line.startswith(mark))
        for side, mark in (("added", "+ "), ("removed", "- "))
    }


def read_rules() -> list[dict]:
    """tools/mutation_equivalent.yaml's rules (none without the file)."""
    return (yaml.safe_load(EQUIVALENT.read_text()) or []) if EQUIVALENT.exists() else []


def equivalents(results: dict[str, str], rules: list[dict]) -> dict[str, str]:
    """Survivor -> the reason of the first rule it matches (name pattern and mutated line)."""
    found = {}
    for name, status in results.items():
        if not survived(status):
            continue
        lines = None
        for rule in rules:
            if not fnmatch.fnmatch(name, rule.get("name", "*")):
                continue
            lines = mutated_lines(name) if lines is None else lines
            sides = [side for side in ("added", "removed") if side in rule]
            if sides and all(re.search(rule[side], lines[side]) for side in sides):
                found[name] = rule["reason"]
                break
    return found


def score_table(results: dict[str, str], equivalent: dict[str, str]) -> pd.DataFrame:
    """Counts and score per module. Every mutant not killed counts against the score (survived,
    no test reaches it, timeout...) except the listed equivalents, left out of the denominator."""
    rows = []
    for module in sorted({module_of(n) for n in results}):
        names = [n for n in results if module_of(n) == module]
        status = Counter(results[n] for n in names)
        eq = sum(1 for n in names if results[n] != "killed" and n in equivalent)
        rows.append(
            {
                "module": module,
                "mutants": len(names),
                "killed": status["killed"],
                "survived": status["survived"] - eq,
                "no_tests": status["no tests"],
                "equivalent": eq,
                "other": ", ".join(
                    f"{k} {v}"
                    for k, v in sorted(status.items())
                    if k not in ("killed", "survived", "no tests")
                ),
            }
        )
    table = pd.DataFrame(rows)
    total = {
        c: int(table[c].sum()) for c in ("mutants", "killed", "survived", "no_tests", "equivalent")
    }
    table.loc[len(table)] = {"module": "core (all)", **total, "other": ""}
    table["score"] = table.killed / (table.mutants - table.equivalent).clip(lower=1)
    return table


def commit() -> str:
    out = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=7"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "unknown"


def log_sitting(
    shard: str, before: dict[str, str], after: dict[str, str], minutes: float, started_at: str
) -> None:
    """Append one sitting of a shard (minutes, mutants checked in it, the commit it started
    at: the code mutmut mutated and the tests it copied) to mutants/."""
    sittings = json.loads(SITTINGS.read_text()) if SITTINGS.exists() else []
    new = [
        n for n, st in after.items() if st not in TO_DO and before.get(n, "not checked") in TO_DO
    ]
    checked = sum(shard_of(n) == shard for n in new)
    sittings.append(
        {
            "shard": shard,
            "minutes": round(minutes, 1),
            "checked": checked,
            "commit": started_at,
            "date": datetime.date.today().isoformat(),
        }
    )
    SITTINGS.parent.mkdir(parents=True, exist_ok=True)
    SITTINGS.write_text(json.dumps(sittings, indent=1))


def shard_times(sittings: list[dict], results: dict[str, str]) -> pd.DataFrame:
    """Per shard: its mutants, its minutes over its timed sittings, how many sittings, the
    mutants checked in sittings nobody timed (minutes null: a sitting killed before this script
    logged interrupted ones; its minutes are then a lower bound), the commits."""
    progress = shard_progress(results).set_index("shard")
    rows = []
    for shard in SHARDS:
        mine = [s for s in sittings if s["shard"] == shard]
        timed = [s for s in mine if s["minutes"] is not None]
        rows.append(
            {
                "shard": shard,
                "mutants": int(progress.loc[shard, "mutants"]),
                "minutes": round(sum(s["minutes"] for s in timed), 1),
                "sittings": len(mine),
                "untimed_checked": sum(s["checked"] for s in mine if s["minutes"] is None),
                "commits": " ".join(sorted({s["commit"] for s in mine})),
            }
        )
    return pd.DataFrame(rows)


def run_mutmut(names: list[str], children: int) -> bool:
    """`mutmut run` on these names; True when it was interrupted (Ctrl-C, or SIGTERM as a job
    scheduler or `kill` sends it), so that the sitting is still logged (mutmut has saved each
    mutant it finished) and the shard resumes where it stopped."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    def default_sigint():  # started by `nohup ... &`, this script ignores SIGINT, and so would
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # mutmut, which the stop below interrupts

    proc = subprocess.Popen(
        ["mutmut", "run", "--max-children", str(children), *names],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        preexec_fn=default_sigint,
    )

    def stop(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        # a signal can reach another thread than the main one, whose blocking wait it then does
        # not interrupt: wait in short slices, so that the handler runs within one
        while proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, "mutmut run")
        return False
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGINT)  # mutmut records its running mutants as interrupted
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:  # then whatever of its group is left (workers that ignored SIGINT)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        return True
    finally:
        signal.signal(signal.SIGTERM, previous)


DOC = ROOT / "docs" / "testing.md"
DOC_BLOCK = re.compile(
    r"<!-- mutation:score begin \(tools/mutation.py --write-docs\) -->.*?"
    r"<!-- mutation:score end -->",
    re.S,
)


def docs_block(score: pd.DataFrame, shards: pd.DataFrame) -> str:
    """docs/testing.md's account of the committed score, rendered from the two committed tables
    (held equal to them by tests/test_docs.py): the score per module, then each shard's time."""
    lines = [
        "| module | mutants | killed | survived | no test | equivalent | score |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in score.itertuples():
        name = row.module.removeprefix("lengen.")
        lines.append(
            f"| {'**' + name + '**' if name == 'core (all)' else name} | {row.mutants} "
            f"| {row.killed} | {row.survived} | {row.no_tests} | {row.equivalent} "
            f"| {row.score:.2f} |"
        )
    lines += [
        "",
        "| shard | mutants | minutes on 2 cores | sittings | checked in untimed "
        "sittings | commits |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in shards.itertuples():
        lines.append(
            f"| {row.shard} | {row.mutants} | {row.minutes:.1f} | {row.sittings} "
            f"| {row.untimed_checked} | {row.commits} |"
        )
    lowest = score[score.module != "core (all)"].sort_values("score").iloc[0]
    lines += [
        "",
        f"Lowest module: {lowest.module.removeprefix('lengen.')} at "
        f"{lowest.score:.2f}; the whole core at "
        f"{score[score.module == 'core (all)'].score.iloc[0]:.2f}.",
    ]
    return "\n".join(lines)


def write_docs(doc: Path = DOC) -> None:
    """Replace docs/testing.md's score block with the committed tables' rendering."""
    body = docs_block(pd.read_csv(OUT), pd.read_csv(SHARD_TIMES, keep_default_na=False))
    text = doc.read_text()
    if not DOC_BLOCK.search(text):
        raise SystemExit(f"{doc}: no <!-- mutation:score begin ... --> block to fill")
    block = (
        f"<!-- mutation:score begin (tools/mutation.py --write-docs) -->\n{body}\n"
        "<!-- mutation:score end -->"
    )
    doc.write_text(DOC_BLOCK.sub(lambda m: block, text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="only these modules (default: the whole core)")
    parser.add_argument("--report", action="store_true", help="only tabulate the last run")
    parser.add_argument(
        "--retest",
        action="store_true",
        help="run the last run's surviving mutants again (after adding tests); with modules, "
        "only theirs",
    )
    parser.add_argument(
        "--keep", action="store_true", help="reuse the last run's results for unchanged functions"
    )
    parser.add_argument(
        "--shard",
        choices=sorted(SHARDS),
        help="run one shard's mutants not yet checked (resumable)",
    )
    parser.add_argument("--shards", action="store_true", help="print each shard's progress")
    parser.add_argument("--fresh", action="store_true", help="delete mutants/ first (with --shard)")
    parser.add_argument("--children", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="fill docs/testing.md's score block from the committed tables",
    )
    args = parser.parse_args(argv)
    if args.write_docs:
        write_docs()
        return 0
    if args.shards:
        print(shard_progress(read_results()).to_string(index=False))
        return 0
    sitting = None  # (shard, results before, minutes) of a shard run here
    if not args.report:
        whole = not args.keep and not args.modules and not args.retest and not args.shard
        if whole or args.fresh:
            shutil.rmtree(ROOT / "mutants", ignore_errors=True)  # a score from scratch
        start, started_at = time.time(), commit()
        names = [f"{m}.*" for m in args.modules]
        before = read_results()
        if args.retest:  # the survivors of the named modules (packages), or of the whole core,
            # but not the equivalents: they survive by construction and count in no score
            mine = {
                n: st for n, st in before.items() if survived(st) and in_modules(n, args.modules)
            }
            names = sorted(set(mine) - set(equivalents(mine, read_rules())))
            print(f"retest: {len(names)} survivors ({len(mine) - len(names)} equivalents left out)")
        if args.shard:
            names = shard_selection(args.shard, before)
            what = "patterns" if names == SHARDS[args.shard] else "mutants to check"
            print(f"shard {args.shard}: {len(names)} {what}")
        if args.shard and not names:
            print(f"shard {args.shard}: every mutant is checked")  # `mutmut run` alone runs all
        else:
            sync_tests()
            interrupted = run_mutmut(names, args.children)
            minutes = (time.time() - start) / 60
            print(f"mutation run: {minutes:.1f} min" + (" (interrupted)" if interrupted else ""))
            if args.shard:
                sitting = (args.shard, before, minutes, started_at)
    results = read_results()
    if sitting:
        shard, before, minutes, started_at = sitting
        log_sitting(shard, before, results, minutes, started_at)
    if not results:
        print("no mutmut results: run without --report first", file=sys.stderr)
        return 1
    left = unfinished(shard_progress(results))
    if args.modules:
        results = {n: st for n, st in results.items() if in_modules(n, args.modules)}
    equivalent = equivalents(results, read_rules())
    table = score_table(results, equivalent)
    out = OUT if not left and not args.modules else PARTIAL
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    if out == OUT and SITTINGS.exists():
        shard_times(json.loads(SITTINGS.read_text()), results).to_csv(SHARD_TIMES, index=False)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    if out == PARTIAL:
        where = f"written to {out.relative_to(ROOT)}, not {OUT.relative_to(ROOT)}"
        print(
            f"\nnot a whole score (shards not finished: {', '.join(left) or 'none'}; "
            f"or only some modules): {where}"
        )
    for reason, n in Counter(equivalent.values()).most_common():
        print(f"\nequivalent ({n}): {reason}")
    survivors = sorted(n for n, st in results.items() if survived(st) and n not in equivalent)
    if survivors:
        print(f"\n{len(survivors)} survivors without a reason (inspect: mutmut show NAME):")
        print("\n".join(f"  {n}: {results[n]}" for n in survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
