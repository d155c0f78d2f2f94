"""A shard's consumer groups as its log makes them: replay, and writing records.

Every change is a record (consumer_records.py), appended to the result and applied
at once through `apply`, the very function replay uses: loading, a warm standby and
failover need nothing of their own. Where Kafka fixes an order among several records
(a member's removal, a group's deletion) it is written here, once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from herdless.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    NO_ASSIGNMENT_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
)
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
    decode_consumer_group_key,
    decode_consumer_group_value,
)
from herdless.coordinator.group_store import GroupStore
from herdless.coordinator.reconciliation import CurrentAssignment
from herdless.coordinator.result import Result
from herdless.coordinator.topic_metadata import Partitions, TopicMetadata


class TombstoneListener(Protocol):
    """Told when a group's or a member's tombstone is applied, to drop the soft state it
    keeps beside the log's (ConsumerGroupManager: delivery, computations in flight)."""

    def group_tombstoned(self, group_id: str) -> None: ...

    def member_tombstoned(self, group_id: str, member_id: str) -> None: ...


class ConsumerGroupLog:
    def __init__(self, store: GroupStore, listener: TombstoneListener) -> None:
        self._store = store
        self._groups = store.consumer
        self._listener = listener

    def replay(self, key: bytes, value: bytes | None) -> bool:
        """Apply a record if it is a consumer group's; False if it is not (another group
        type Kafka runs, such as share groups: skipped, so a log Kafka wrote still loads)."""
        decoded = decode_consumer_group_key(key)
        if decoded is None:
            return False
        self.apply(decoded, None if value is None else decode_consumer_group_value(decoded, value))
        return True

    def apply(self, key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> None:
        """The state change of one record, live or replayed."""
        group_id = key.group
        if value is None:
            self._apply_tombstone(key)
            return
        group = self._materialize(group_id)
        if isinstance(value, ConsumerGroupMetadataValue):
            group.group_epoch = value.epoch
        elif isinstance(value, ConsumerGroupPartitionMetadataValue):
            group.subscription_metadata = {t.name: t for t in value.topics}
        elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
            group.target_assignment_epoch = value.assignment_epoch
            group.assignment_timestamp_ms = value.assignment_timestamp_ms
        elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
            assert isinstance(key, ConsumerGroupTargetAssignmentMemberKey)
            group.put_target_assignment(key.member_id, value.partitions)
        elif isinstance(value, ConsumerGroupRegularExpressionValue):
            assert isinstance(key, ConsumerGroupRegularExpressionKey)
            group.resolved_regexes[key.regex] = value
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            member = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            group.put_member(member.with_metadata(value))  # type: ignore[arg-type]
        else:
            assert isinstance(key, ConsumerGroupCurrentMemberAssignmentKey)
            member = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            group.put_member(member.with_assignment(value))  # type: ignore[arg-type]

    def _apply_tombstone(self, key: ConsumerGroupKey) -> None:
        group = self._groups.get(key.group)
        if group is None:
            return
        if isinstance(key, ConsumerGroupMetadataKey):
            self._store.remove_consumer(key.group)
            self._listener.group_tombstoned(key.group)
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            group.subscription_metadata = {}
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            group.target_assignment_epoch = NO_ASSIGNMENT_EPOCH
            group.assignment_timestamp_ms = 0
            group.target_finished_monotonic_ms = None
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            group.put_target_assignment(key.member_id, None)
        elif isinstance(key, ConsumerGroupRegularExpressionKey):
            group.resolved_regexes.pop(key.regex, None)
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            group.remove_member(key.member_id)
            self._listener.member_tombstoned(key.group, key.member_id)
        else:
            member = group.members.get(key.member_id)
            if member is not None:
                # The member is on its way out: it holds nothing from now on.
                left = CurrentAssignment(LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH)
                group.put_member(replace(member, assignment=left))

    def _materialize(self, group_id: str) -> ConsumerGroup:
        group = self._groups.get(group_id)
        if group is None:
            # A group that only held offsets (committed with no membership) gives way, as
            # in Kafka; any other classic group was tombstoned before the first record.
            self._store.remove_classic(group_id)
            group = self._store.put_consumer(ConsumerGroup(group_id))
        return group

    def write(self, out: Result, key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> None:
        out.records.append(consumer_group_record(key, value))
        self.apply(key, value)

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
        self, out: Result, group_id: str, epoch: int, wall_ms: int
    ) -> None:
        value = ConsumerGroupTargetAssignmentMetadataValue(epoch, wall_ms)
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
