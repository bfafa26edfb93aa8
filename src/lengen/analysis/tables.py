"""The evaluation's jobs that need no model, so none imports torch or MLflow: a task's stored
test set, written once for every model (`testset`); each model's eval table, checked against
the config's grid, and all of an experiment's joined into one tidy table (`combine`;
`read_eval_table` for the figure jobs). The scoring itself is lengen.analysis.evaluate.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from lengen import tasks
from lengen.core import provenance
from lengen.core.cli import KnownError, command_parser, one_line_errors


class TableError(KnownError, ValueError):
    """A per-model eval table that its rule did not finish writing."""


def read_eval_table(path: Path, lengths: dict[str, list[int]] | None = None) -> pd.DataFrame:
    """One model's eval.csv, checked: readable, non-empty, the experiment's columns present,
    integer columns integral, accuracy in [0, 1] (a file cut mid-line fails here, naming it);
    with `lengths` (variant -> the config's eval lengths for its models), scored at exactly the
    lengths the config asks for (a table that lost its last rows fails here, also alone)."""
    fix = f"delete {path} and rerun its eval rule"
    if not Path(path).is_file():  # nothing to delete: say what makes it
        raise TableError(f"{path}: missing; its eval rule makes it (snakemake {path})")
    with open(path, "rb") as f:  # a table is written whole, its last line ended
        f.seek(max(0, Path(path).stat().st_size - 1))
        if f.read(1) not in (b"\n", b""):
            raise TableError(
                f"{path}: its last line is cut (no line end: a kill or a full disk "
                f"stopped its writing, perhaps inside a value); {fix}"
            )
    try:
        table = pd.read_csv(path, dtype=provenance.DTYPES)
    except Exception as err:  # noqa: BLE001 - empty file, bad quoting
        raise TableError(f"{path}: unreadable ({type(err).__name__}: {err}); {fix}") from err
    if table.empty or "experiment" not in table:
        raise TableError(f"{path}: no rows or no 'experiment' column; {fix}")
    columns = (*tasks.table_keys(table["experiment"].iloc[0]), "accuracy")
    missing = [c for c in columns if c not in table]
    if missing:
        raise TableError(f"{path}: missing columns {missing}; {fix}")
    bad = [c for c in columns if table[c].isna().any()]
    bad += [c for c in columns[:-1] if c not in bad and (table[c] % 1 != 0).any()]
    bad += [c for c in provenance.COLUMNS if c in table and c not in bad and table[c].isna().any()]
    if bad or not table["accuracy"].between(0, 1).all():
        where = bad or ["accuracy"]
        raise TableError(
            f"{path}: empty, non-integer or out-of-range values in {where} (a file "
            f"cut mid-line?); {fix}"
        )
    table = table.astype({c: "int64" for c in columns[:-1]})
    if lengths is not None:
        check_lengths(table, lengths, path, fix)
    return table


def check_lengths(table: pd.DataFrame, lengths: dict[str, list[int]], path: Path, fix: str):
    """The grid the config asks for: each variant's rows at exactly its eval lengths."""
    for variant, rows in table.groupby("variant") if "variant" in table else [("", table)]:
        if variant not in lengths:
            raise TableError(
                f"{path}: variant {variant!r} is not one the config scores "
                f"({sorted(lengths)}); {fix}"
            )
        got, want = set(rows["length"]), set(lengths[variant])
        if got != want:
            missing, extra = sorted(want - got), sorted(got - want)
            raise TableError(
                f"{path}: {f'{variant} ' if variant else ''}scored at lengths {sorted(got)}, "
                f"the config asks for "
                f"{sorted(want)} (missing {missing}, not asked {extra}: cut off, or an older "
                f"config's?); {fix}"
            )


def check_runs(paths: list[Path], parts: list[pd.DataFrame]) -> None:
    """Each per-model table holds its own run: the run id its rows name is the one its folder
    stands for (results/<task>/<variant>/<setting>/seed<k>/eval.csv -> variant/setting/seed<k>:
    an eval of a model file copied from another folder names the other run), and no two tables
    hold one run. One line naming the file, what it holds and what it should."""
    seen: dict[str, Path] = {}
    for path, table in zip(paths, parts, strict=True):
        if "run" not in table:
            continue
        runs = sorted(set(table["run"].astype(str)))
        want = "/".join(Path(path).parts[-4:-1])
        fix = f"delete {path} (and the model.pt beside it if it is another run's) and rerun"
        if Path(path).parent.name.startswith("seed") and runs != [want]:
            raise TableError(
                f"{path}: holds run {', '.join(runs)}, its folder is run {want}; {fix}"
            )
        for run in runs:
            if run in seen:
                raise TableError(f"{path}: run {run} is already in {seen[run]}; {fix}")
            seen[run] = Path(path)


def combine(
    tables: list[Path], out: Path, lengths: dict[str, list[int]] | None = None
) -> pd.DataFrame:
    """One tidy table from per-model tables, sorted by setting, seed, length (and k_test); with
    `lengths` (variant -> eval lengths), each table checked against the config's grid too."""
    parts = [read_eval_table(p, lengths) for p in tables]
    check_runs(tables, parts)
    grids = [
        frozenset(map(tuple, t[[c for c in ("length", "k_test") if c in t]].values)) for t in parts
    ]
    # every model of a variant is scored on the same test grid (a variant may have its own eval
    # lengths: config variants.<v>.section.eval)
    variant = [str(t["variant"].iloc[0]) if "variant" in t and len(t) else "" for t in parts]
    full = {
        v: max((g for g, w in zip(grids, variant, strict=True) if w == v), key=len)
        for v in set(variant)
    }
    for path, grid, v in zip(tables, grids, variant, strict=True):
        if grid != full[v]:
            raise TableError(
                f"{path}: {len(grid)} test points where the other tables of its variant have "
                f"{len(full[v])} (cut off?); delete {path} and rerun its eval rule"
            )
    table = pd.concat(parts, ignore_index=True)
    order = tasks.table_order(table["experiment"].iloc[0])
    table = table.sort_values([c for c in order if c in table], ignore_index=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    return table


# pragma: no mutate block  (CLI wiring: tested through the workflow in subprocesses)
@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: `testset` writes a task's stored test set; `combine` joins per-model tables."""
    parser = command_parser(__spec__, __doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("testset")
    t.add_argument("--experiment", required=True, help="a task with a stored test set")
    t.add_argument("--eval", required=True, help="JSON of the eval config section")
    t.add_argument("--n", type=int, required=True)
    t.add_argument("--seed", type=int, required=True)
    t.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("combine")
    c.add_argument("--tables", nargs="+", type=Path, required=True)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument(
        "--lengths",
        type=json.loads,
        default=None,
        help="JSON {variant: [eval lengths]}: the grid the config asks for",
    )
    args = parser.parse_args(argv)
    if args.cmd == "testset":
        tasks.get(args.experiment).write_testset(json.loads(args.eval), args.n, args.seed, args.out)
    else:
        combine(args.tables, args.out, args.lengths)


if __name__ == "__main__":
    main()
