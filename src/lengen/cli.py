"""`lengen` command line: look at the data exactly as the model is fed at test time."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from lengen.tasks import sparse_parity as sp


def _sample_sparse_parity(args: argparse.Namespace) -> list[dict]:
    """Sparse-parity examples (App. E.1.1) with test-time position IDs."""
    if args.length % 2:
        raise SystemExit(f"--length must be even (it is 2l), got {args.length}")
    batch = sp.sample(
        np.random.default_rng(args.seed), args.n, args.length // 2, args.k, args.vocab_n
    )
    return sp.to_records(sp.test_example(batch), batch, args.vocab_n)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `lengen` command."""
    parser = argparse.ArgumentParser(prog="lengen", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sample = sub.add_parser("sample", help="print examples as JSON lines")
    tasks = sample.add_subparsers(dest="task", required=True)
    p = tasks.add_parser("sparse_parity", help="sparse parity, App. E.1")
    p.add_argument("--k", type=int, required=True, help="number of flagged positions")
    p.add_argument("--length", type=int, required=True, help="2l, the length of the J/bit part")
    p.add_argument("--n", type=int, default=1, help="number of examples")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab-n", type=int, default=20, help="N, the integer alphabet size")
    p.set_defaults(fn=_sample_sparse_parity)
    args = parser.parse_args(argv)
    try:
        records = args.fn(args)
    except ValueError as err:
        raise SystemExit(f"lengen sample {args.task}: {err}") from err
    for record in records:
        sys.stdout.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
