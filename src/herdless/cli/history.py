"""`herdless groups history G`: why a group rebalanced, and how long each rebalance took.

The broker records every completed rebalance as a JSON record keyed by group id
in the internal topic `__rebalance_history`; this command reads it back like any
topic, with a plain consumer. A consumer group (KIP-848) has no rebalances: its
entries are its target assignments (their epochs where a classic group's show
generations), each with how long every member took to reach it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from herdless.cli.client import CLIENT_ID, kafka_python_client
from herdless.cli.errors import CommandError, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap
from herdless.cli.output import OutputOption, Table, View, show

HISTORY_TOPIC = "__rebalance_history"
READ_TIMEOUT_S = 30.0


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


CLASSIC = "classic"
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
    try:
        with HistoryReader(bootstrap) as reader:
            entries = [entry for entry_key, entry in reader.read_to_end() if entry_key == key]
    except CommandError as exc:
        raise fail(str(exc)) from None
    return sorted(entries, key=lambda e: e.get("ended_ms") or 0)


class HistoryReader:
    """A plain consumer of `__rebalance_history`, from its beginning: each call of
    `read_to_end` returns the entries recorded since the previous one, as (key, entry).

    Failures are CommandError, in words.
    """

    def __init__(
        self,
        bootstrap: str,
        client_id: str = CLIENT_ID,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._consumer = kafka_python_client(
            _consumer_class,
            bootstrap,
            client_id,
            settings,
            enable_auto_commit=False,
            # Retention may delete what was not read yet: go on from what is left.
            auto_offset_reset="earliest",
        )
        self._assigned: list[Any] = []

    def __enter__(self) -> HistoryReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()

    def read_to_end(self, timeout_s: float = READ_TIMEOUT_S) -> list[tuple[bytes, dict[str, Any]]]:
        from kafka.errors import KafkaError

        try:
            return self._read_to_end(timeout_s)
        except KafkaError as exc:
            raise CommandError(
                f"cannot read {HISTORY_TOPIC} from {self._bootstrap}: {exc}"
            ) from None

    def _read_to_end(self, timeout_s: float) -> list[tuple[bytes, dict[str, Any]]]:
        consumer = self._consumer
        if not self._assigned:
            from kafka import TopicPartition

            partitions = consumer.partitions_for_topic(HISTORY_TOPIC)
            if not partitions:
                raise CommandError(
                    f"the broker at {self._bootstrap} keeps no {HISTORY_TOPIC} topic"
                )
            self._assigned = [TopicPartition(HISTORY_TOPIC, p) for p in sorted(partitions)]
            consumer.assign(self._assigned)
            consumer.seek_to_beginning(*self._assigned)
        tps = self._assigned
        ends = consumer.end_offsets(tps)
        entries: list[tuple[bytes, dict[str, Any]]] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise CommandError(f"reading {HISTORY_TOPIC} from {self._bootstrap} timed out")
            for records in consumer.poll(timeout_ms=1000).values():
                entries += [(r.key, _decode(r.value)) for r in records]
        return entries


def _decode(value: bytes) -> dict[str, Any]:
    try:
        decoded = json.loads(value)
    except ValueError:
        return {"cause": "unreadable entry"}
    return decoded if isinstance(decoded, dict) else {"cause": "unreadable entry"}


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _consumer_class() -> type[Any]:
    from kafka import KafkaConsumer

    return KafkaConsumer
