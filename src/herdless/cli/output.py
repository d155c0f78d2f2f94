"""How every `herdless` command prints what it found: as a table, as JSON, or as plain text.

A command builds a `View` (its JSON document, its tables, a heading and notes) and
hands it to `show`; `--output` picks the rendering:

- `table`: rich tables for a person. On a terminal they fit its width, wrapping
  long cells rather than cutting them, and never splitting a header or a short
  value (fitted_table.py); elsewhere they keep their natural width.
- `plain`: each table as tab-separated lines under a header line, tables apart by
  an empty line, never wrapped or cut: for `cut`, `awk` and `sort`. The heading
  and the notes go to stderr, so stdout holds only rows.
- `json`: the view's document on one line (keys are listed in docs/cli.md); the
  notes go to stderr.

Without `--output`, a terminal gets `table` and anything else (a pipe, a file) gets
`plain`, as `ls` does, so that what a script reads is never shaped by a screen.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from herdless.admin.cells import cell

if TYPE_CHECKING:
    from rich.console import Console, RenderableType


class Output(enum.StrEnum):
    TABLE = "table"
    JSON = "json"
    PLAIN = "plain"


OUTPUT_METAVAR = "<table|json|plain>"


def parse_output(text: str) -> Output:
    """An --output value, whatever its case; ValueError if it is not one."""
    return Output(text.strip().lower())


OutputOption = Annotated[
    Output | None,
    typer.Option(
        "--output",
        "-o",
        case_sensitive=False,
        show_default="table on a terminal, plain otherwise",
        help="table, json, or plain (tab-separated, for scripts).",
    ),
]


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]
    rows: Sequence[Sequence[object]]


@dataclass(frozen=True, slots=True)
class View:
    data: Any  # the JSON document
    tables: Sequence[Table] = ()
    heading: str | None = None
    notes: Sequence[str] = field(default_factory=tuple)


def chosen(output: Output | None) -> Output:
    if output is not None:
        return output
    return Output.TABLE if sys.stdout.isatty() else Output.PLAIN


def show(view: View, output: Output | None) -> None:
    mode = chosen(output)
    if mode is Output.JSON:
        print(json.dumps(view.data), flush=True)
        _to_stderr(view.notes)
    elif mode is Output.PLAIN:
        _to_stderr([view.heading] if view.heading else [])
        if view.tables:
            print("\n\n".join(_plain(table) for table in view.tables), flush=True)
        _to_stderr(view.notes)
    else:
        console().print(renderable(view))


def counted(count: int, noun: str) -> str:
    """`1 broker`, `3 brokers`: a count with its noun, singular for one."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def say(message: str) -> None:
    """A line for the user on stdout: what a command that shows no data did."""
    print(message, flush=True)


def note(message: str) -> None:
    """A remark for the person at the terminal, on stderr: never mixed into data."""
    _to_stderr([message])


def console() -> Console:
    from rich.console import Console

    if sys.stdout.isatty():
        return Console(highlight=False)
    # Wide enough that nothing wraps: rich tables take only the width they need.
    return Console(highlight=False, width=1_000_000, soft_wrap=True)


def renderable(view: View) -> RenderableType:
    """The view as rich renders it: for `show` and for a live view that redraws it."""
    from rich.console import Group
    from rich.text import Text

    from herdless.cli.fitted_table import FittedTable

    parts: list[RenderableType] = []
    if view.heading:
        parts.append(Text(view.heading))
    for table in view.tables:
        parts.append(FittedTable(table.columns, [[cell(v) for v in row] for row in table.rows]))
    parts.extend(Text(note) for note in view.notes)
    return Group(*parts)


def _plain(table: Table) -> str:
    lines = ["\t".join(table.columns)]
    lines += ["\t".join(_plain_cell(value) for value in row) for row in table.rows]
    return "\n".join(lines)


def _plain_cell(value: object) -> str:
    # A tab or a newline inside a value would shift the columns of every later field.
    return cell(value).replace("\t", " ").replace("\n", " ")


def _to_stderr(lines: Sequence[str]) -> None:
    for line in lines:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
