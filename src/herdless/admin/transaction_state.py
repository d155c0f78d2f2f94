"""What `herdless transactions` shows: the transactions the coordinators hold, one
transactional id described, the producers with a transaction open on partitions, and
the transactions left hanging there (KIP-664), as kafka-transactions.sh finds them.

A transaction hangs when a partition holds its data without an end marker and no
coordinator will ever write one: its producer's transaction has been open on the
partition for longer than the longest timeout a transaction may have, and the
coordinator does not count that partition in an ongoing transaction of that producer
and epoch. Only an abort written to the partition itself ends it, and until then it
holds the partition's last stable offset back, so read_committed consumers stall.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka import KafkaAdminClient, TopicPartition

# Kafka's transaction.max.timeout.ms: no transaction may be open longer.
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000
ACTIVE_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def list_transactions(
    admin: KafkaAdminClient,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    duration_filter_ms: int | None = None,
    transactional_id_pattern: str | None = None,
) -> list[dict[str, Any]]:
    """Every transactional id the coordinators hold (ListTransactions to each broker),
    filtered as kafka-transactions.sh's list filters: by state, producer id, how long
    the transaction has been open (`--duration-filter`), and a regular expression the
    whole id matches (`--transactional-id-pattern`)."""
    by_broker = admin.list_transactions(
        state_filters=list(states) or None,
        producer_id_filters=list(producer_ids) or None,
        duration_filter_ms=duration_filter_ms,
        transactional_id_pattern=transactional_id_pattern,
    )
    rows = [
        {
            "transactional_id": listing.transactional_id,
            "coordinator": broker_id,
            "producer_id": listing.producer_id,
            "state": _state(listing.state),
        }
        for broker_id, listings in by_broker.items()
        for listing in listings
    ]
    return sorted(rows, key=lambda row: row["transactional_id"])


def describe_transactions(
    admin: KafkaAdminClient, transactional_ids: Iterable[str], now_ms: int
) -> list[dict[str, Any]]:
    """Each transactional id as its coordinator describes it (DescribeTransactions)."""
    described = admin.describe_transactions(list(transactional_ids))
    rows = []
    for transactional_id, d in sorted(described.items()):
        started = d.transaction_start_time_ms
        rows.append(
            {
                "transactional_id": transactional_id,
                "coordinator": d.coordinator_id,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "state": _state(d.state),
                "timeout_ms": d.transaction_timeout_ms,
                "start_time_ms": started if started >= 0 else None,
                "duration_ms": now_ms - started if started >= 0 else None,
                "partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions),
            }
        )
    return rows


def open_transactions(
    admin: KafkaAdminClient,
    partitions: Iterable[TopicPartition],
    now_ms: int,
    broker_id: int | None = None,
) -> list[dict[str, Any]]:
    """The producers with a transaction open on each partition (DescribeProducers to
    its leader, or to `broker_id`'s replica: any replica answers): where it starts, and
    how long ago its producer last wrote there."""
    rows = []
    described = admin.describe_producers(list(partitions), broker_id=broker_id)
    for tp, state in sorted(described.items()):
        for producer in state.active_producers:
            if producer.current_transaction_start_offset < 0:
                continue
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "producer_id": producer.producer_id,
                    "producer_epoch": producer.producer_epoch,
                    "coordinator_epoch": producer.coordinator_epoch,
                    "start_offset": producer.current_transaction_start_offset,
                    "last_timestamp_ms": producer.last_timestamp,
                    "duration_ms": now_ms - producer.last_timestamp,
                }
            )
    return rows


def hanging_transactions(
    admin: KafkaAdminClient,
    partitions: Iterable[TopicPartition],
    now_ms: int,
    max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
) -> list[dict[str, Any]]:
    """The open transactions of `partitions` that no coordinator will end (see above)."""
    candidates = [
        row
        for row in open_transactions(admin, partitions, now_ms)
        if row["duration_ms"] > max_transaction_timeout_ms
    ]
    if not candidates:
        return []
    producer_ids = sorted({row["producer_id"] for row in candidates})
    ids_by_producer = {
        row["producer_id"]: row["transactional_id"]
        for row in list_transactions(admin, producer_ids=producer_ids)
    }
    known = ids_by_producer.values()
    described = (
        {row["transactional_id"]: row for row in describe_transactions(admin, known, now_ms)}
        if known
        else {}
    )
    hanging = []
    for row in candidates:
        coordinator_view = described.get(ids_by_producer.get(row["producer_id"], ""))
        if coordinator_view is not None and (
            coordinator_view["state"] in ACTIVE_STATES
            and coordinator_view["producer_epoch"] == row["producer_epoch"]
            and f"{row['topic']}-{row['partition']}" in coordinator_view["partitions"]
        ):
            continue  # its coordinator still ends it (or aborts it on its timeout)
        hanging.append(row)
    return hanging


def abort_transaction(
    admin: KafkaAdminClient,
    partition: TopicPartition,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = -1,
) -> None:
    """Write an abort marker for the producer's open transaction on the partition
    (WriteTxnMarkers to its leader), as kafka-transactions.sh abort does."""
    from kafka.admin import AbortTransactionSpec

    admin.abort_transaction(
        AbortTransactionSpec(partition, producer_id, producer_epoch, coordinator_epoch)
    )


def _state(state: Any) -> str:
    return str(getattr(state, "value", state))
