"""Prometheus counters of what share partitions led here do to records (KIP-932):
acquired for a member, acknowledged by type, archived unaccepted by reason, and
released because a member's acquisition lock ran out. Counted by share group, as
they happen, after the change is durable; the records in flight are a gauge the
broker's metrics read at each scrape (metrics.py)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric

from herdless.broker.coordinators.group_coordinator import GroupCoordinator, ShardState
from herdless.coordinator.share_group import ShareGroupState
from herdless.coordinator.share_partitions.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
)
from herdless.coordinator.share_partitions.dead_letters import ArchivedRecord
from herdless.coordinator.share_partitions.partition import AcquiredRecords, StateChange
from herdless.coordinator.share_state.state import RecordState

if TYPE_CHECKING:
    from herdless.broker.share.leader import ShareLeader


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


@dataclass
class ShareSnapshot:
    """What a scrape reads of share groups and share partitions, copied on the loop."""

    # (group state, groups in it, their members)
    groups: list[tuple[str, int, int]] = field(default_factory=list)
    # (group, topic, partition, record state, records in flight in it)
    in_flight: list[tuple[str, str, int, str, int]] = field(default_factory=list)


def snapshot_shares(groups: GroupCoordinator, leader: ShareLeader | None) -> ShareSnapshot:
    """On the loop, between any two state changes."""
    state = ShareSnapshot()
    by_state = {str(s): [0, 0] for s in ShareGroupState if s is not ShareGroupState.DEAD}
    for shard_state, shard in groups.shards():
        if shard_state is not ShardState.ACTIVE:
            continue
        for group in shard.share.groups.values():
            counts = by_state.setdefault(str(group.state), [0, 0])
            counts[0] += 1
            counts[1] += len(group.members)
    state.groups = [(name, n, members) for name, (n, members) in by_state.items()]
    if leader is not None:
        for key, topic, counts in leader.partitions.in_flight():
            for record_state in (RecordState.AVAILABLE, RecordState.ACQUIRED):
                state.in_flight.append(
                    (
                        key.group_id,
                        topic,
                        key.partition,
                        record_state.name.lower(),
                        counts[record_state],
                    )
                )
    return state


def share_gauges(state: ShareSnapshot) -> Iterator[Metric]:
    groups = GaugeMetricFamily(
        "herdless_share_groups", "Share groups coordinated here, by state.", labels=["state"]
    )
    members = GaugeMetricFamily(
        "herdless_share_group_members",
        "Members of the share groups coordinated here, by their group's state.",
        labels=["state"],
    )
    for name, count, member_count in state.groups:
        groups.add_metric([name], count)
        members.add_metric([name], member_count)
    in_flight = GaugeMetricFamily(
        "herdless_share_partition_in_flight_records",
        "Records in a share partition's in-flight window that are not settled yet, by"
        " state: available (to be delivered, or again) or acquired (held by a member).",
        labels=["group", "topic", "partition", "state"],
    )
    for group, topic, partition, record_state, count in state.in_flight:
        in_flight.add_metric([group, topic, str(partition), record_state], count)
    yield from (groups, members, in_flight)
