"""docs/results.md's tables, from the committed default reference (reference/default/): for each
tidy accuracy table the report reads, the mean accuracy over runs at every tested length, with
the lowest and highest run where there are several; Table 1's perplexities; and the reference's
verdict rows of each experiment, as verdicts.csv has them; and every number the prose quotes.

    python tools/results_tables.py           # print every block
    python tools/results_tables.py --write   # rewrite docs/results.md's blocks and quotes

A block sits between `<!-- results:NAME begin (tools/results_tables.py) -->` and
`<!-- results:NAME end -->`. A number of the prose is a *quote*, a query over one table of the
reference written in the span around it:

    <!-- ref:sparse_parity_accuracy variant=neox k_train=8 k_test=8 length=500 -->0.49<!-- /ref -->

Quotes may stand in README.md and every page of docs/ (the reference's commit, for one:
`<!-- ref:sparse_parity_accuracy col=git_commit stat=value fmt=.7 -->`); the blocks are
docs/results.md's.

`ref:TABLE` names reference/default/TABLE.csv; each `column=value` keeps the rows whose column
reads that value (quote a value with spaces: `id="SP-1 [loglen]"`); `col=` is the column read
(default accuracy), `stat=` what is made of it: mean (default), min, max, median, sum, `value`
(the one value the rows share, for text such as a verdict), `runs` (how many distinct runs) or
`rows`; `fmt=` a Python format spec (default .2f; `.1%` for a percentage, `,.0f` for counts; on
`stat=value` text only where given: `.7` keeps a commit's first 7 characters).
tests/test_docs.py fails when a quote (README.md, docs/) or a block of docs/results.md differs
from what the reference gives, when a quote matches no row or names an unknown column, or when
a table of the reference has no block: a new reference rewrites them all, or the test names what
went stale."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pandas as pd
from spans import ROOT, documents  # this folder's (python tools/results_tables.py)

DOC = "docs/results.md"
REFERENCE = "reference/default"
# columns that are not a model's setting: what was measured, and each row's provenance
MEASURES = {"accuracy", "n", "length", "seed", "run", "steps_run", "stop_reason", "experiment",
            "scheme", "scratchpad", "config_hash", "git_commit", "versions"}  # fmt: skip
ACCURACY_TABLES = ("sparse_parity_accuracy", "parity_scratchpad_accuracy",
                   "variable_assignment_accuracy", "majority_accuracy")  # fmt: skip
BLOCK = re.compile(r"<!-- results:(\w+) begin \(tools/results_tables.py\) -->.*?"
                   r"<!-- results:\1 end -->", re.S)  # fmt: skip
QUOTE = re.compile(r"<!-- ref:(?P<query>[^>]*?) -->(?P<text>.*?)<!-- /ref -->", re.S)
STATS = {"mean", "min", "max", "median", "sum", "value", "runs", "rows"}


def _cell(values: pd.Series) -> str:
    """Mean over runs; with several runs, their range; - where the length has none."""
    if values.empty:
        return "-"
    if len(values) == 1:
        return f"{values.iloc[0]:.2f}"
    return f"{values.mean():.2f} ({values.min():.2f}-{values.max():.2f})"


def accuracy(table: pd.DataFrame) -> str:
    """One row per model setting (variant, K_train / jump / depth / training length, k_test):
    its runs, the steps they trained (where the table has them), and the accuracy at every
    tested length (mean over runs, range)."""
    settings = [c for c in table.columns if c not in MEASURES]
    lengths = sorted(table["length"].unique())
    rows = []
    for key, group in table.groupby(settings, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        runs = [str(group["run"].nunique())]
        if "steps_run" in group:  # the steps each run trained (early and plateau stops)
            steps = sorted(set(group["steps_run"].astype(int)))
            runs.append(f"{steps[0]:,}" if len(steps) == 1 else f"{steps[0]:,}-{steps[-1]:,}")
        cells = [_cell(group[group["length"] == n]["accuracy"]) for n in lengths]
        rows.append([*map(str, key), *runs, *cells])
    counts = ["runs", "steps"] if "steps_run" in table else ["runs"]
    head = [*settings, *counts, *map(str, lengths)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def perplexity(table: pd.DataFrame) -> str:
    keep = ["model", "train_context", "pose", "eval_length", "perplexity", "paper_perplexity"]
    out = table[keep].copy()
    out["perplexity"] = out["perplexity"].map("{:.2f}".format)
    return out.to_markdown(index=False)


def verdicts(table: pd.DataFrame, prefix: str) -> str:
    rows = table[table["id"].str.startswith(prefix)]
    return rows[["id", "paper", "measured", "rule", "verdict"]].to_markdown(index=False)


def provenance(table: pd.DataFrame) -> str:
    commits = sorted({str(c)[:12] for c in table["git_commit"] if str(c) not in ("", "nan")})
    return f"Commit{'s' if len(commits) > 1 else ''} {', '.join(f'`{c}`' for c in commits)}."


def blocks(root: Path = ROOT) -> dict[str, str]:
    """Every block, by name: each accuracy table, Table 1, each experiment's verdicts."""
    ref = root / REFERENCE
    out = {}
    for name in ACCURACY_TABLES:
        path = ref / f"{name}.csv"
        if path.is_file():
            table = pd.read_csv(path, keep_default_na=False)
            out[name] = f"{accuracy(table)}\n\n{provenance(table)}"
    path = ref / "table1_perplexity.csv"
    if path.is_file():
        table = pd.read_csv(path, keep_default_na=False)
        out["table1_perplexity"] = f"{perplexity(table)}\n\n{provenance(table)}"
    table = pd.read_csv(ref / "verdicts.csv", keep_default_na=False, dtype=str)
    for prefix in ("SP", "PS", "VA", "MJ", "NL"):
        out[f"verdicts_{prefix.lower()}"] = verdicts(table, f"{prefix}-")
    return out


def quote(query: str, root: Path = ROOT, tables: dict[Path, pd.DataFrame] | None = None) -> str:
    """What a quote's query reads in the reference (the module docstring's grammar); a ValueError
    names what is wrong with the query. `tables` keeps each CSV read once across a document's
    quotes."""
    words = shlex.split(query)
    if not words:
        raise ValueError("empty quote: <!-- ref:TABLE column=value ... -->")
    defaults = {"col": "accuracy", "stat": "mean", "fmt": ".2f"}
    name, options, filters = words[0], {}, {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if not eq:
            raise ValueError(f"ref:{query}: '{word}' is not column=value")
        (options if key in defaults else filters)[key] = value
    given, options = set(options), defaults | options
    path = root / REFERENCE / f"{name}.csv"
    if not path.is_file():
        raise ValueError(f"ref:{query}: no table {REFERENCE}/{name}.csv")
    tables = {} if tables is None else tables
    if path not in tables:
        tables[path] = pd.read_csv(path, keep_default_na=False, dtype=str)
    table = tables[path]
    stat, col = options["stat"], options["col"]
    if stat not in STATS:
        raise ValueError(f"ref:{query}: stat={stat} is none of {sorted(STATS)}")
    unknown = [c for c in [*filters, col] if c not in table.columns]
    if unknown:
        raise ValueError(f"ref:{query}: {path.name} has no column {', '.join(unknown)}")
    for key, value in filters.items():
        table = table[table[key] == value]
    if table.empty:
        raise ValueError(f"ref:{query}: no row of {path.name} matches")
    if stat == "rows":
        return f"{len(table):,}"
    if stat == "runs":
        return f"{table['run'].nunique():,}"
    if stat == "value":
        values = sorted(set(table[col]))
        if len(values) != 1:
            raise ValueError(f"ref:{query}: {len(values)} different {col} values {values[:4]}")
        return format(values[0], options["fmt"]) if "fmt" in given else values[0]
    number = getattr(pd.to_numeric(table[col], errors="raise"), stat)()
    return format(float(number), options["fmt"])


def quotes(doc: str, root: Path = ROOT) -> tuple[str, list[str]]:
    """The document with every quote rewritten from the reference, and each query's error."""
    errors, tables = [], {}

    def one(match: re.Match) -> str:
        try:
            text = quote(match["query"], root, tables)
        except ValueError as err:
            errors.append(f"line {doc.count(chr(10), 0, match.start()) + 1}: {err}")
            return match[0]
        return f"<!-- ref:{match['query']} -->{text}<!-- /ref -->"

    return QUOTE.sub(one, doc), errors


def wrapped(name: str, body: str) -> str:
    return (f"<!-- results:{name} begin (tools/results_tables.py) -->\n{body}\n"
            f"<!-- results:{name} end -->")  # fmt: skip


def stale_quotes(path: Path, root: Path = ROOT) -> list[str]:
    """The quotes of one document that differ from the reference, or cannot be read."""
    name = path.relative_to(root).as_posix()
    doc = path.read_text()
    rewritten, errors = quotes(doc, root)
    out = [f"{name}: {e}" for e in errors]
    # a quote that cannot be read stays as it is, so old and new quotes pair up in order
    for was, now in zip(QUOTE.finditer(doc), QUOTE.finditer(rewritten), strict=True):
        if was["text"] != now["text"]:
            line = doc.count("\n", 0, was.start()) + 1
            out.append(f"{name}:{line}: ref:{was['query']} reads {was['text']!r}, the reference "
                       f"gives {now['text']!r}")  # fmt: skip
    return out


def problems(root: Path = ROOT) -> list[str]:
    """Quotes of README.md and docs/ that differ from the reference or cannot be read, blocks of
    docs/results.md that differ, and tables with no block."""
    out = [p for path in documents(root) if path.is_file() for p in stale_quotes(path, root)]
    doc = (root / DOC).read_text()
    found = {m[1]: m[0] for m in BLOCK.finditer(doc)}
    expected = blocks(root)
    for name, body in expected.items():
        if name not in found:
            out.append(f"{DOC}: no block results:{name}")
        elif found[name] != wrapped(name, body):
            out.append(f"{DOC}: block results:{name} differs from {REFERENCE}")
    # a table the reference no longer has (a refresh with ALLOW_REMOVAL) takes its block along
    out += [f"{DOC}: block results:{name} has no table in {REFERENCE} (delete the block)"
            for name in found if name not in expected]  # fmt: skip
    return out


def write(root: Path = ROOT) -> None:
    """Replace every block docs/results.md has (a new table's block is placed by hand) and every
    quote of README.md and docs/; a quote that cannot be read stops it, naming the query, before
    any document is written."""
    new, errors, docs = blocks(root), [], {}
    for path in documents(root):
        if not path.is_file():
            continue
        doc = path.read_text()
        if path == root / DOC:
            doc = BLOCK.sub(lambda m: wrapped(m[1], new[m[1]]) if m[1] in new else m[0], doc)
        docs[path], bad = quotes(doc, root)
        errors += [f"{path.relative_to(root).as_posix()}: {e}" for e in bad]
    if errors:
        raise SystemExit("\n".join(errors))
    for path, doc in docs.items():
        path.write_text(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the blocks and quotes")
    if parser.parse_args().write:
        write()
    else:
        for name, body in blocks().items():
            print(wrapped(name, body), end="\n\n")


if __name__ == "__main__":
    main()
