"""`herdless groups history G`: why a group rebalanced, and how long each rebalance took.

The broker records every completed rebalance as a JSON record keyed by group id
in the internal topic `__rebalance_history`; this command reads it back like any
topic, with a plain consumer.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from herdless.cli.client import (
    BOOTSTRAP_TIMEOUT_MS,
    CLIENT_ID,
    REQUEST_TIMEOUT_MS,
    require_reachable,
)
from herdless.cli.errors import fail
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

    JSON output is the recorded entries as the broker wrote them.
    """
    entries = _read(bootstrap, group)[-limit:]
    columns = ("ENDED (UTC)", "CAUSE", "GENERATION", "TOOK", "MEMBERS", "DETAIL")
    if members:
        columns += ("MEMBERS-BEFORE", "MEMBERS-AFTER")
    rows = []
    for entry in entries:
        before = entry.get("members_before") or ()
        after = entry.get("members_after") or ()
        row: tuple[object, ...] = (
            _time(entry.get("ended_ms")),
            entry.get("cause", "?"),
            f"{entry.get('from_generation')} → {entry.get('to_generation')}",
            f"{entry.get('duration_ms', 0) / 1000:.2f} s",
            f"{len(before)} → {len(after)}",
            entry.get("detail"),
        )
        if members:
            row += (",".join(before), ",".join(after))
        rows.append(row)
    notes = [] if entries else [f"no rebalance of group {group} is on record"]
    show(View(entries, [Table(columns, rows)], notes=notes), output)


def _read(bootstrap: str, group: str) -> list[dict[str, Any]]:
    require_reachable(bootstrap)
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    key = group.encode()
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            client_id=CLIENT_ID,
            enable_auto_commit=False,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
        )
    except KafkaError:
        raise fail(f"no broker answers at {bootstrap}") from None
    try:
        partitions = consumer.partitions_for_topic(HISTORY_TOPIC)
        if not partitions:
            raise fail(f"the broker at {bootstrap} keeps no {HISTORY_TOPIC} topic")
        tps = [TopicPartition(HISTORY_TOPIC, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        entries: list[dict[str, Any]] = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise fail(f"reading {HISTORY_TOPIC} from {bootstrap} timed out")
            for records in consumer.poll(timeout_ms=1000).values():
                entries += [_decode(r.value) for r in records if r.key == key]
        return sorted(entries, key=lambda e: e.get("ended_ms") or 0)
    except KafkaError as exc:
        raise fail(f"cannot read {HISTORY_TOPIC} from {bootstrap}: {exc}") from None
    finally:
        consumer.close()


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
