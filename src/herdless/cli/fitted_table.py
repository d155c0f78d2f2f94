"""A table for a terminal that never splits a header or a short value mid-word.

Rich shrinks every column of a table wider than the terminal, folding `PARTITION`
into `PARTIT ION` and `127.0.0.1` into `127.0.0. 1`. Here each column is at least as
wide as its header and its short values (names, addresses, numbers); a long value
(a member id, a long topic name) still folds, since it could never fit whole. When
even those widths do not fit the terminal, each row is shown as a record of
`HEADER value` lines instead, as psql's expanded display does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.table import Table

# A token longer than this folds: waiting for a terminal that wide would be in vain.
SHORT_TOKEN = 24
# What rich's default box adds per column (a bar and a space each side) and once.
COLUMN_FRAME = 3
TABLE_FRAME = 1


def min_widths(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    """Each column's width below which a header or a short value would split."""
    widths = [len(column) for column in columns]
    for row in rows:
        for index, text in enumerate(row):
            tokens = [len(token) for token in text.split() if len(token) <= SHORT_TOKEN]
            widths[index] = max(widths[index], *tokens, 0)
    return widths


def fits(widths: Sequence[int], width: int) -> bool:
    return sum(widths) + COLUMN_FRAME * len(widths) + TABLE_FRAME <= width


class FittedTable:
    """Rendered at the terminal's width: a table if its minimum widths fit, else records."""

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.columns = list(columns)
        self.rows = [list(row) for row in rows]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = min_widths(self.columns, self.rows)
        if fits(widths, options.max_width) or not self.rows:
            yield self._table(widths)
        else:
            yield from self._records()

    def _table(self, widths: list[int]) -> Table:
        from rich.table import Table
        from rich.text import Text

        table = Table()
        for column, width in zip(self.columns, widths, strict=True):
            # fold, not the ellipsis: a long value wraps whole onto more lines.
            table.add_column(Text(column), overflow="fold", min_width=width)
        for row in self.rows:
            table.add_row(*(Text(text) for text in row))
        return table

    def _records(self) -> Iterator[RenderableType]:
        from rich.rule import Rule
        from rich.table import Table
        from rich.text import Text

        header_width = max(len(column) for column in self.columns)
        for number, row in enumerate(self.rows, 1):
            yield Rule(f"{number} of {len(self.rows)}", align="left", characters="─")
            grid = Table.grid(padding=(0, 2))
            grid.add_column(no_wrap=True, min_width=header_width, style="bold")
            grid.add_column(overflow="fold")
            for column, text in zip(self.columns, row, strict=True):
                grid.add_row(Text(column), Text(text))
            yield grid
