"""Shared pieces of the task interface (lengen.tasks): the per-model setting of a generation-scored
task, and the argument types of `lengen sample` options."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from lengen.core.positions import scheme_names


@dataclass(frozen=True)
class Setting:
    """What one model of a generation-scored task is trained at: the spec's task key (`jump`),
    the config section's list of values (`jumps`), the results-path prefix (`k` in k2/) and the
    figures' length axis."""

    key: str
    values: str
    prefix: str
    length_axis: str


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_scheme_argument(
    parser: argparse.ArgumentParser, choices: tuple[str, ...] | None = None, default: str = "ppc"
) -> None:
    """`--scheme`: which position IDs a sampled example shows (every scheme of
    lengen.core.positions.SCHEME_TABLE unless `choices` says)."""
    parser.add_argument(
        "--scheme",
        choices=choices or scheme_names(),
        default=default,
        help="position IDs: coupled (ppc) or true IDs 1..T (absolute, rope_pose)",
    )
