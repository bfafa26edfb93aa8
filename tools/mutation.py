"""Mutation score of the scientific core, per module (issue: tests that catch the bugs that matter).

    python tools/mutation.py                      # the whole core, from scratch, table at the end
    python tools/mutation.py lengen.analysis.decode lengen.tasks.sparse_parity   # some modules only
    python tools/mutation.py --retest             # only the last run's survivors, again
    python tools/mutation.py --report             # the table of the last run (mutants/)

mutmut (configured in pyproject.toml, [tool.mutmut]) plants one small change at a time in the core
modules (an operator, a constant, a comparison, a returned value...) and runs the tests that execute
the changed function; a mutant is *killed* when a test fails. The score per module is
killed / (mutants - equivalents); a surviving mutant is either a missing test or an *equivalent*
mutant (same behaviour, e.g. `device=None` on a CPU-only machine, a progress bar's label). The
equivalents are rules in tools/mutation_equivalent.yaml, each with its reason: a mutant name
pattern and a regular expression on the mutated line (`mutmut show NAME`), so that they survive
renumbering. The table is written to reference/mutation_score.csv and every survivor is listed,
with its rule's reason or as a missing test.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shutil
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
LINE = re.compile(r"^\s*(?P<name>[\w.ǁ]+__mutmut_\d+): (?P<status>.+?)\s*$")


def module_of(name: str) -> str:
    """lengen.report.report.x_ps_rule__mutmut_3 -> lengen.report.report (methods:
    xǁClassǁmethod__mutmut_N)."""
    return name.split("__mutmut_")[0].rsplit(".", 1)[0]


def read_results() -> dict[str, str]:
    """Mutant name -> status from `mutmut results --all true`."""
    out = subprocess.run(["mutmut", "results", "--all", "true"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    return {m["name"]: m["status"] for m in map(LINE.match, out.splitlines()) if m}


def mutated_lines(name: str) -> str:
    """The '+' lines of a mutant's diff."""
    out = subprocess.run(["mutmut", "show", name], cwd=ROOT, capture_output=True, text=True)
    return "\n".join(line for line in out.stdout.splitlines() if line.startswith("+ "))


def equivalents(results: dict[str, str], rules: list[dict]) -> dict[str, str]:
    """Survivor -> the reason of the first rule it matches (name pattern and mutated line)."""
    found = {}
    for name, status in results.items():
        if status == "killed":
            continue
        lines = None
        for rule in rules:
            if not fnmatch.fnmatch(name, rule.get("name", "*")):
                continue
            lines = mutated_lines(name) if lines is None else lines
            if re.search(rule["added"], lines):
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
        rows.append({
            "module": module, "mutants": len(names), "killed": status["killed"],
            "survived": status["survived"] - eq, "no_tests": status["no tests"],
            "equivalent": eq,
            "other": ", ".join(f"{k} {v}" for k, v in sorted(status.items())
                               if k not in ("killed", "survived", "no tests")),
        })  # fmt: skip
    table = pd.DataFrame(rows)
    total = {c: int(table[c].sum()) for c in ("mutants", "killed", "survived", "no_tests",
                                              "equivalent")}  # fmt: skip
    table.loc[len(table)] = {"module": "core (all)", **total, "other": ""}
    table["score"] = table.killed / (table.mutants - table.equivalent).clip(lower=1)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="only these modules (default: the whole core)")
    parser.add_argument("--report", action="store_true", help="only tabulate the last run")
    parser.add_argument(
        "--retest",
        action="store_true",
        help="run the last run's surviving mutants again (after adding tests)",
    )
    parser.add_argument("--keep", action="store_true",
                        help="reuse the last run's results for unchanged functions")  # fmt: skip
    parser.add_argument("--children", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    if not args.report:
        if not args.keep and not args.modules and not args.retest:
            shutil.rmtree(ROOT / "mutants", ignore_errors=True)  # a score from scratch
        start = time.time()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        names = [f"{m}.*" for m in args.modules]
        if args.retest:
            names = [n for n, st in read_results().items() if st != "killed"]
        subprocess.run(["mutmut", "run", "--max-children", str(args.children), *names], cwd=ROOT,
                       env=env, check=True)  # fmt: skip
        print(f"mutation run: {(time.time() - start) / 60:.1f} min")
    results = read_results()
    if args.modules:
        results = {n: st for n, st in results.items() if module_of(n) in args.modules}
    if not results:
        print("no mutmut results: run without --report first", file=sys.stderr)
        return 1
    rules = yaml.safe_load(EQUIVALENT.read_text()) or [] if EQUIVALENT.exists() else []
    equivalent = equivalents(results, rules)
    table = score_table(results, equivalent)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT, index=False)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    for reason, n in Counter(equivalent.values()).most_common():
        print(f"\nequivalent ({n}): {reason}")
    survivors = sorted(n for n, st in results.items() if st != "killed" and n not in equivalent)
    if survivors:
        print(f"\n{len(survivors)} survivors without a reason (inspect: mutmut show NAME):")
        print("\n".join(f"  {n}: {results[n]}" for n in survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
