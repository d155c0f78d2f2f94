"""Prometheus counters of what share partitions led here do to records (KIP-932):
acquired for a member, acknowledged by type, archived unaccepted by reason, and
released because a member's acquisition lock ran out. Counted by share group, as
they happen, after the change is durable."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter

from herdless.coordinator.share_partitions.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
)
from herdless.coordinator.share_partitions.dead_letters import ArchivedRecord
from herdless.coordinator.share_partitions.partition import AcquiredRecords, StateChange


class SharePartitionMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # A registry of its own when none is given: counted, never scraped (tests).
        registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self._acquired = Counter(
            "herdless_share_acquired_records",
            "Records a share group's members acquired (a delivery each), by group.",
            ["group"],
            registry=registry,
        )
        self._acknowledged = Counter(
            "herdless_share_acknowledged_records",
            "Records a share group's members acknowledged, by group and type (accept,"
            " release, reject, gap).",
            ["group", "type"],
            registry=registry,
        )
        self._archived = Counter(
            "herdless_share_archived_records",
            "Records archived unaccepted, by group and reason (rejected, or the delivery"
            " limit reached).",
            ["group", "reason"],
            registry=registry,
        )
        self._lock_expiries = Counter(
            "herdless_share_lock_expiries",
            "Acquired records released because their acquisition lock ran out before the"
            " member acknowledged them (group.share.record.lock.duration.ms), by group.",
            ["group"],
            registry=registry,
        )

    def acquired(self, group: str, acquired: Iterable[AcquiredRecords]) -> None:
        count = sum(a.last_offset - a.first_offset + 1 for a in acquired)
        if count:
            self._acquired.labels(group).inc(count)

    def acknowledged(self, group: str, batches: Sequence[AcknowledgementBatch]) -> None:
        by_type: Tally[AcknowledgeType] = Tally()
        for batch in batches:
            if len(batch.types) == 1:
                by_type[batch.types[0]] += batch.last_offset - batch.first_offset + 1
            else:
                for offset in range(batch.first_offset, batch.last_offset + 1):
                    by_type[batch.type_at(offset)] += 1
        for kind, count in by_type.items():
            self._acknowledged.labels(group, kind.name.lower()).inc(count)

    def archived(self, group: str, records: Iterable[ArchivedRecord]) -> None:
        by_reason = Tally(r.reason.name.lower() for r in records)
        for reason, count in by_reason.items():
            self._archived.labels(group, reason).inc(count)

    def locks_expired(self, group: str, change: StateChange) -> None:
        count = sum(b.last_offset - b.first_offset + 1 for b in change.batches)
        if count:
            self._lock_expiries.labels(group).inc(count)
