"""`herdless transactions list|describe|describe-producers|find-hanging|abort`, as
kafka-transactions.sh: what the transaction coordinators hold, what partitions hold
open, and the way out of a transaction left hanging on a partition."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from herdless.admin.transaction_state import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    abort_transaction,
    describe_transactions,
    hanging_transactions,
    list_transactions,
    open_transactions,
)
from herdless.cli.client import connect
from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, command_group
from herdless.cli.output import OutputOption, Table, View, say, show

if TYPE_CHECKING:
    from kafka import KafkaAdminClient, TopicPartition

STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
    "Dead",
)

transactions_app = command_group(
    "List and describe transactions, find those left hanging on partitions, and abort"
    " them, as kafka-transactions.sh."
)

TopicOption = Annotated[str | None, typer.Option("--topic", "-t", help="Only this topic.")]
PartitionOption = Annotated[
    int | None, typer.Option("--partition", "-p", help="With --topic: only this partition.")
]


@transactions_app.command("list")
def list_(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", "-s", help=f"Only in this state; repeatable: {', '.join(STATES)}."),
    ] = None,
    producer_id: Annotated[
        list[int] | None, typer.Option("--producer-id", help="Only this producer; repeatable.")
    ] = None,
    duration_filter: Annotated[
        int | None,
        typer.Option(help="Milliseconds: only transactions open longer than this (KIP-994)."),
    ] = None,
    transactional_id_pattern: Annotated[
        str | None,
        typer.Option(help="A regular expression the whole transactional id matches (KIP-1152)."),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """List the transactional ids every coordinator holds, with their producer and state."""
    states = [_state(s) for s in state or []]
    if duration_filter is not None and duration_filter < 0:
        raise fail("--duration-filter is in milliseconds and at least 0", USAGE)
    if transactional_id_pattern:
        try:
            re.compile(transactional_id_pattern)
        except re.error as exc:
            raise fail(
                f"--transactional-id-pattern {transactional_id_pattern!r} is not a regular"
                f" expression: {exc}",
                USAGE,
            ) from None
    with connect(bootstrap) as admin:
        rows = list_transactions(
            admin, states, producer_id or [], duration_filter, transactional_id_pattern or None
        )
    table = Table(
        ("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"),
        [tuple(row.values()) for row in rows],
    )
    show(View(rows, [table], notes=[] if rows else ["no transactions"]), output)


@transactions_app.command("describe")
def describe(
    transactional_ids: Annotated[list[str], typer.Argument(metavar="TRANSACTIONAL-ID...")],
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Describe transactional ids as their coordinators hold them: producer, epoch,
    state, timeout, when the open transaction began and the partitions in it."""
    with connect(bootstrap) as admin:
        rows = describe_transactions(admin, transactional_ids, _now_ms())
    table = Table(
        (
            "TRANSACTIONAL-ID",
            "COORDINATOR",
            "PRODUCER-ID",
            "EPOCH",
            "STATE",
            "TIMEOUT-MS",
            "DURATION-MS",
            "PARTITIONS",
        ),
        [
            (
                r["transactional_id"],
                r["coordinator"],
                r["producer_id"],
                r["producer_epoch"],
                r["state"],
                r["timeout_ms"],
                r["duration_ms"],
                ",".join(r["partitions"]),
            )
            for r in rows
        ],
    )
    show(View(rows, [table]), output)


@transactions_app.command("describe-producers")
def describe_producers(
    topic: Annotated[str, typer.Argument(metavar="TOPIC")],
    partition: PartitionOption = None,
    broker_id: Annotated[
        int | None,
        typer.Option(
            "--broker-id", help="Ask this broker's replicas instead of the leaders (a follower's)."
        ),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """The producers with a transaction open on a topic's partitions, from their leaders
    or from one broker's replicas."""
    with connect(bootstrap) as admin:
        partitions = _partitions(admin, topic, partition)
        rows = open_transactions(admin, partitions, _now_ms(), broker_id)
    show(_producers_view(rows, "no open transactions"), output)


@transactions_app.command("find-hanging")
def find_hanging(
    topic: TopicOption = None,
    partition: PartitionOption = None,
    broker_id: Annotated[
        int | None, typer.Option("--broker-id", help="Only the partitions this broker leads.")
    ] = None,
    max_transaction_timeout: Annotated[
        int,
        typer.Option(
            help="Minutes: the brokers' transaction.max.timeout.ms; a transaction open"
            " longer is a candidate."
        ),
    ] = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS // 60_000,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Find transactions left open on partitions that no coordinator will end: open
    longer than the longest transaction timeout, and unknown to their coordinator."""
    if (topic is None) == (broker_id is None):
        raise fail("give --topic or --broker-id, not both or neither", USAGE)
    if max_transaction_timeout < 1:
        raise fail("--max-transaction-timeout is in minutes and at least 1", USAGE)
    with connect(bootstrap) as admin:
        partitions = (
            _partitions(admin, topic, partition)
            if topic is not None
            else _led_by(admin, broker_id or 0)
        )
        rows = hanging_transactions(admin, partitions, _now_ms(), max_transaction_timeout * 60_000)
    show(_producers_view(rows, "no hanging transactions"), output)


@transactions_app.command("abort")
def abort(
    topic: Annotated[str, typer.Option("--topic", "-t", help="The partition's topic.")],
    partition: Annotated[int, typer.Option("--partition", "-p", help="The partition.")],
    start_offset: Annotated[
        int | None,
        typer.Option(help="The offset where the transaction to abort begins on the partition."),
    ] = None,
    producer_id: Annotated[int | None, typer.Option(help="Instead of --start-offset.")] = None,
    producer_epoch: Annotated[int | None, typer.Option(help="With --producer-id.")] = None,
    coordinator_epoch: Annotated[
        int, typer.Option(help="With --producer-id; -1 passes the coordinator epoch check.")
    ] = -1,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Abort a transaction on one partition by writing its abort marker there: for a
    hanging transaction, which its coordinator no longer knows."""
    if (start_offset is None) == (producer_id is None):
        raise fail("give --start-offset, or --producer-id with --producer-epoch", USAGE)
    if producer_id is not None and producer_epoch is None:
        raise fail("--producer-id needs --producer-epoch", USAGE)
    from kafka import TopicPartition

    tp = TopicPartition(topic, partition)
    with connect(bootstrap) as admin:
        if start_offset is not None:
            found = [
                row
                for row in open_transactions(admin, [tp], _now_ms())
                if row["start_offset"] == start_offset
            ]
            if not found:
                raise fail(f"no transaction open on {topic}-{partition} starts at {start_offset}")
            producer_id = found[0]["producer_id"]
            producer_epoch = found[0]["producer_epoch"]
            coordinator_epoch = found[0]["coordinator_epoch"]
        assert producer_id is not None and producer_epoch is not None
        abort_transaction(admin, tp, producer_id, producer_epoch, coordinator_epoch)
    say(
        f"aborted the transaction of producer {producer_id} (epoch {producer_epoch})"
        f" on {topic}-{partition}"
    )


def _producers_view(rows: list[dict[str, Any]], empty: str) -> View:
    table = Table(
        (
            "TOPIC",
            "PARTITION",
            "PRODUCER-ID",
            "EPOCH",
            "COORDINATOR-EPOCH",
            "START-OFFSET",
            "LAST-TIMESTAMP-MS",
            "DURATION-MS",
        ),
        [tuple(row.values()) for row in rows],
    )
    return View(rows, [table], notes=[] if rows else [empty])


def _partitions(
    admin: KafkaAdminClient, topic: str | None, partition: int | None
) -> list[TopicPartition]:
    from kafka import TopicPartition

    assert topic is not None
    described = _describe_topics(admin, [topic])
    if not described:
        raise fail(f"no topic {topic!r}")
    indexes = sorted(p["partition_index"] for p in described[0]["partitions"])
    if partition is not None:
        if partition not in indexes:
            raise fail(f"{topic} has no partition {partition} (it has {len(indexes)})")
        indexes = [partition]
    return [TopicPartition(topic, p) for p in indexes]


def _led_by(admin: KafkaAdminClient, broker_id: int) -> list[TopicPartition]:
    from kafka import TopicPartition

    return [
        TopicPartition(t["name"], p["partition_index"])
        for t in _describe_topics(admin, None)
        for p in t["partitions"]
        if p["leader_id"] == broker_id
    ]


def _describe_topics(admin: KafkaAdminClient, topics: list[str] | None) -> list[dict[str, Any]]:
    from kafka.errors import UnknownTopicOrPartitionError

    try:
        described = admin.describe_topics(topics)
    except UnknownTopicOrPartitionError:
        return []
    return [t for t in described if t.get("error_code", 0) == 0]


def _state(given: str) -> str:
    for state in STATES:
        if state.lower() == given.lower():
            return state
    raise fail(f"no transaction state {given!r}: one of {', '.join(STATES)}", USAGE)


def _now_ms() -> int:
    return int(time.time() * 1000)
