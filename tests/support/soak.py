"""What the soak scripts in bench/ share: a seeded run of N fault cycles, and the
counts table they end with."""

from __future__ import annotations

import argparse
import random
from collections.abc import Mapping

from rich.console import Console
from rich.table import Table


def seeded_cycles(description: str) -> tuple[int, int, random.Random]:
    """`--cycles` and `--seed` from the command line: (cycles, seed, its generator).
    A run without --seed draws one, printed so that the run can be repeated."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    return args.cycles, seed, random.Random(seed)


def print_counts(console: Console, title: str, counts: Mapping[str, int]) -> None:
    """One row of counts under their names, right-aligned as numbers are."""
    table = Table(title=title)
    for column in counts:
        table.add_column(column, justify="right")
    table.add_row(*(str(count) for count in counts.values()))
    console.print(table)
