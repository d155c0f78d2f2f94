"""Writing a consumer group's records: each appended to the result and applied at once.

Applying goes through the function replay uses (ConsumerGroups.apply), so the state
of a shard's consumer groups is always what its log makes of it. Where Kafka fixes
an order among several records (a member's removal, a group's deletion) it is
written here, once.
"""

from __future__ import annotations

from collections.abc import Callable

from herdless.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember
from herdless.coordinator.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    consumer_group_record,
)
from herdless.coordinator.result import Result
from herdless.coordinator.topic_metadata import Partitions, TopicMetadata

Apply = Callable[[ConsumerGroupKey, ConsumerGroupValue | None], None]


class ConsumerGroupWriter:
    def __init__(self, apply: Apply) -> None:
        self._apply = apply

    def write(self, out: Result, key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> None:
        out.records.append(consumer_group_record(key, value))
        self._apply(key, value)

    def group_epoch(self, out: Result, group_id: str, epoch: int) -> None:
        self.write(out, ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch))

    def subscription_metadata(
        self, out: Result, group_id: str, topics: tuple[TopicMetadata, ...]
    ) -> None:
        value = ConsumerGroupPartitionMetadataValue(topics)
        self.write(out, ConsumerGroupPartitionMetadataKey(group_id), value)

    def resolved_regex(
        self, out: Result, group_id: str, regex: str, value: ConsumerGroupRegularExpressionValue
    ) -> None:
        self.write(out, ConsumerGroupRegularExpressionKey(group_id, regex), value)

    def regex_tombstone(self, out: Result, group_id: str, regex: str) -> None:
        self.write(out, ConsumerGroupRegularExpressionKey(group_id, regex), None)

    def member_metadata(self, out: Result, group_id: str, member: ConsumerGroupMember) -> None:
        key = ConsumerGroupMemberMetadataKey(group_id, member.member_id)
        self.write(out, key, member.metadata_value())

    def current_assignment(self, out: Result, group_id: str, member: ConsumerGroupMember) -> None:
        key = ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id)
        self.write(out, key, member.assignment_value())

    def target_assignment(
        self, out: Result, group_id: str, member_id: str, target: Partitions
    ) -> None:
        key = ConsumerGroupTargetAssignmentMemberKey(group_id, member_id)
        self.write(out, key, ConsumerGroupTargetAssignmentMemberValue(target))

    def target_assignment_metadata(
        self, out: Result, group_id: str, epoch: int, now_ms: int
    ) -> None:
        value = ConsumerGroupTargetAssignmentMetadataValue(epoch, now_ms)
        self.write(out, ConsumerGroupTargetAssignmentMetadataKey(group_id), value)

    def member_tombstones(self, out: Result, group_id: str, member_id: str) -> None:
        """Kafka's order: the current assignment, the target, then the member itself."""
        self.write(out, ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None)
        self.write(out, ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None)
        self.write(out, ConsumerGroupMemberMetadataKey(group_id, member_id), None)

    def group_tombstones(self, out: Result, group: ConsumerGroup) -> None:
        """All of a group, in Kafka's order; the group is gone once applied."""
        group_id = group.group_id
        for member_id in list(group.members):
            self.write(out, ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None)
        for member_id in list(group.target_assignment):
            self.write(out, ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None)
        self.write(out, ConsumerGroupTargetAssignmentMetadataKey(group_id), None)
        for member_id in list(group.members):
            self.write(out, ConsumerGroupMemberMetadataKey(group_id, member_id), None)
        for regex in sorted(group.resolved_regexes):
            self.regex_tombstone(out, group_id, regex)
        self.write(out, ConsumerGroupPartitionMetadataKey(group_id), None)
        self.write(out, ConsumerGroupMetadataKey(group_id), None)
