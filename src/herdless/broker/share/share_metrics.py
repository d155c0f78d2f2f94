"""Share groups and share partitions as gauges the broker's metrics read at each scrape
(metrics.py): groups and members by state, and the records in flight of each share
partition led here. What happens to records is counted as it happens, in
share_partition_metrics.py."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric

from herdless.broker.coordinators.group_coordinator import GroupCoordinator, ShardState
from herdless.coordinator.share_group import ShareGroupState
from herdless.coordinator.share_state.state import RecordState

if TYPE_CHECKING:
    from herdless.broker.share.leader import ShareLeader


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
