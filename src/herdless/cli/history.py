"""`herdless groups history G`: why a group rebalanced, and how long each rebalance took.

The broker records every completed rebalance as a JSON record keyed by group id
in the internal topic `__rebalance_history`; this command reads it back like any
topic, with a plain consumer. A consumer group (KIP-848) has no rebalances: its
entries are its target assignments (their epochs where a classic group's show
generations), each with how long every member took to reach it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from herdless.admin.group_info import CLASSIC
from herdless.admin.rebalance_history import HistoryReader
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, client_settings
from herdless.cli.output import OutputOption, Table, View, show


def history(
    group: str,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many, newest last.")] = 20,
    members: Annotated[bool, typer.Option(help="List the member ids before and after.")] = False,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Show a group's recent rebalances: cause, generations, duration, members.

    For a consumer group (KIP-848), its new target assignments: cause, epochs, how
    long until every member had reached it, and a second table with each member's
    time to its target's epoch (it had revoked what it had to) and to all of its
    target (nothing left that another member held).

    JSON output is the recorded entries as the broker wrote them.
    """
    entries = _read(bootstrap, group)[-limit:]
    columns = ("ENDED (UTC)", "CAUSE", "GENERATION", "TOOK", "MEMBERS", "DETAIL", "PROTOCOL")
    if members:
        columns += ("MEMBERS-BEFORE", "MEMBERS-AFTER")
    rows = []
    for entry in entries:
        before = entry.get("members_before") or ()
        after = entry.get("members_after") or ()
        took = f"{entry.get('duration_ms', 0) / 1000:.2f} s"
        row: tuple[object, ...] = (
            _time(entry.get("ended_ms")),
            entry.get("cause", "?"),
            f"{entry.get('from_generation')} → {entry.get('to_generation')}",
            took + " (superseded)" if entry.get("superseded") else took,
            f"{len(before)} → {len(after)}",
            entry.get("detail"),
            entry.get("protocol", CLASSIC),
        )
        if members:
            row += (",".join(before), ",".join(after))
        rows.append(row)
    tables = [Table(columns, rows)]
    reconciled = _reconciliation_rows(entries)
    if reconciled:
        tables.append(Table(RECONCILIATION_COLUMNS, reconciled))
    notes = [] if entries else [f"no rebalance of group {group} is on record"]
    show(View(entries, tables, notes=notes), output)


RECONCILIATION_COLUMNS = ("TARGET-EPOCH", "MEMBER", "REACHED-EPOCH", "HOLDS-TARGET")


def _reconciliation_rows(entries: list[dict[str, Any]]) -> list[tuple[object, ...]]:
    """Per consumer group target and member: how long after the target it got there."""
    rows: list[tuple[object, ...]] = []
    for entry in entries:
        for member in entry.get("reconciliations") or ():
            left = " (left)" if member.get("left") else ""
            rows.append(
                (
                    entry.get("to_generation"),
                    member.get("member_id"),
                    _seconds(member.get("epoch_reached_ms")),
                    _seconds(member.get("assigned_ms")) + left,
                )
            )
    return rows


def _seconds(ms: int | None) -> str:
    return "not reached" if ms is None else f"{ms / 1000:.2f} s"


def _read(bootstrap: str, group: str) -> list[dict[str, Any]]:
    key = group.encode()
    with HistoryReader(bootstrap, settings=client_settings()) as reader:
        entries = [entry for entry_key, entry in reader.read_to_end() if entry_key == key]
    return sorted(entries, key=lambda e: e.get("ended_ms") or 0)


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
