"""What `herdless topics describe` and the console show of topics: each partition's
leader, replicas and ISR, and its log start and end offsets."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from herdless.admin.client import offsets_at

if TYPE_CHECKING:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import OffsetSpec


def partition_rows(
    admin: KafkaAdminClient, topics: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """The partitions of described topics as `topics describe` shows them (keys in
    docs/cli.md), by topic: one ListOffsets per leader for the log start offsets of
    all of them and one for the log end offsets."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    described = {
        TopicPartition(t["name"], p["partition_index"]): p for t in topics for p in t["partitions"]
    }
    tps = sorted(described)
    # A partition without a leader (offline) has no offsets to give: null in its row.
    led = [tp for tp in tps if described[tp]["leader_id"] >= 0]
    starts = offsets_at(admin, led, OffsetSpec.EARLIEST)
    ends = offsets_at(admin, led, OffsetSpec.LATEST)
    rows: dict[str, list[dict[str, Any]]] = {t["name"]: [] for t in topics}
    for tp in tps:
        p = described[tp]
        start, end = starts.get(tp), ends.get(tp)
        rows[tp.topic].append(
            {
                "partition": tp.partition,
                "leader": p["leader_id"],
                "leader_epoch": p["leader_epoch"],
                "replicas": p["replica_nodes"],
                "isr": p["isr_nodes"],
                "offline_replicas": p["offline_replicas"],
                "log_start_offset": start,
                "log_end_offset": end,
                "records": None if start is None or end is None else end - start,
            }
        )
    return rows


def partition_counts(admin: KafkaAdminClient, topics: Iterable[str]) -> dict[str, int]:
    """Partition count of each topic that exists; missing topics are left out."""
    names = sorted(set(topics))
    if not names:
        return {}
    return {
        t["name"]: len(t["partitions"])
        for t in admin.describe_topics(names)
        if t["error_code"] == 0
    }


def log_offsets(
    admin: KafkaAdminClient, tps: Iterable[TopicPartition], spec: OffsetSpec
) -> dict[TopicPartition, int]:
    """ListOffsets for the partitions that exist; the others are simply absent
    (a group keeps its offsets for a topic after the topic is deleted)."""
    tps = set(tps)
    counts = partition_counts(admin, (tp.topic for tp in tps))
    return offsets_at(admin, (tp for tp in tps if tp.partition < counts.get(tp.topic, 0)), spec)
