"""A shard's share groups as its log makes them: replay, and writing records.

Every change is a record (share_records.py), appended to the result and applied at
once through `apply`, the very function replay uses, as consumer_log.py does for
consumer groups. Where Kafka fixes an order among several records (a member's
removal, a group's deletion) it is written here, once.
"""

from __future__ import annotations

from herdless.coordinator.group_store import GroupStore
from herdless.coordinator.result import Result
from herdless.coordinator.share_group import ShareGroup, ShareGroupMember
from herdless.coordinator.share_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareGroupValue,
    SkippedShareRecord,
    decode_share_group_key,
    decode_share_group_value,
    share_group_record,
)
from herdless.coordinator.topic_metadata import Partitions


class ShareGroupLog:
    def __init__(self, store: GroupStore) -> None:
        self._store = store
        self._groups = store.share

    def replay(self, key: bytes, value: bytes | None) -> bool:
        """Apply a record if it is a share group's; False if it is not."""
        decoded = decode_share_group_key(key)
        if decoded is None:
            return False
        if isinstance(decoded, SkippedShareRecord):
            return True
        self.apply(decoded, None if value is None else decode_share_group_value(decoded, value))
        return True

    def apply(self, key: ShareGroupKey, value: ShareGroupValue | None) -> None:
        """The state change of one record, live or replayed."""
        if value is None:
            self._apply_tombstone(key)
            return
        group = self._groups.get(key.group) or self._store.put_share(ShareGroup(key.group))
        if isinstance(value, ShareGroupMetadataValue):
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
        elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
            group.target_assignment_epoch = value.assignment_epoch
        elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
            assert isinstance(key, ShareGroupTargetAssignmentMemberKey)
            group.put_target_assignment(key.member_id, value.partitions)
        elif isinstance(value, ShareGroupMemberMetadataValue):
            assert isinstance(key, ShareGroupMemberMetadataKey)
            member = group.members.get(key.member_id) or ShareGroupMember(key.member_id)
            group.put_member(member.with_metadata(value))
        else:
            assert isinstance(key, ShareGroupCurrentMemberAssignmentKey)
            member = group.members.get(key.member_id) or ShareGroupMember(key.member_id)
            group.put_member(member.with_assignment(value))

    def _apply_tombstone(self, key: ShareGroupKey) -> None:
        group = self._groups.get(key.group)
        if group is None:
            return
        if isinstance(key, ShareGroupMetadataKey):
            self._store.remove_share(key.group)
        elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            group.target_assignment_epoch = 0
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            group.put_target_assignment(key.member_id, None)
        elif isinstance(key, ShareGroupMemberMetadataKey):
            group.remove_member(key.member_id)
        # A current assignment's tombstone comes first in a member's removal, whose last
        # record removes the member: nothing to apply alone.

    def write(self, out: Result, key: ShareGroupKey, value: ShareGroupValue | None) -> None:
        out.records.append(share_group_record(key, value))
        self.apply(key, value)

    def group_epoch(self, out: Result, group_id: str, epoch: int, metadata_hash: int) -> None:
        value = ShareGroupMetadataValue(epoch, metadata_hash)
        self.write(out, ShareGroupMetadataKey(group_id), value)

    def member_metadata(self, out: Result, group_id: str, member: ShareGroupMember) -> None:
        key = ShareGroupMemberMetadataKey(group_id, member.member_id)
        self.write(out, key, member.metadata_value())

    def current_assignment(self, out: Result, group_id: str, member: ShareGroupMember) -> None:
        key = ShareGroupCurrentMemberAssignmentKey(group_id, member.member_id)
        self.write(out, key, member.assignment_value())

    def target_assignment(
        self, out: Result, group_id: str, member_id: str, target: Partitions
    ) -> None:
        key = ShareGroupTargetAssignmentMemberKey(group_id, member_id)
        self.write(out, key, ShareGroupTargetAssignmentMemberValue(target))

    def target_assignment_metadata(self, out: Result, group_id: str, epoch: int) -> None:
        value = ShareGroupTargetAssignmentMetadataValue(epoch)
        self.write(out, ShareGroupTargetAssignmentMetadataKey(group_id), value)

    def member_tombstones(self, out: Result, group_id: str, member_id: str) -> None:
        """Kafka's order: the current assignment, the target, then the member itself."""
        self.write(out, ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None)
        self.write(out, ShareGroupTargetAssignmentMemberKey(group_id, member_id), None)
        self.write(out, ShareGroupMemberMetadataKey(group_id, member_id), None)

    def group_tombstones(self, out: Result, group: ShareGroup) -> None:
        """All of a group, in Kafka's order; the group is gone once applied."""
        group_id = group.group_id
        for member_id in list(group.members):
            self.write(out, ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None)
        for member_id in list(group.target_assignment):
            self.write(out, ShareGroupTargetAssignmentMemberKey(group_id, member_id), None)
        self.write(out, ShareGroupTargetAssignmentMetadataKey(group_id), None)
        for member_id in list(group.members):
            self.write(out, ShareGroupMemberMetadataKey(group_id, member_id), None)
        self.write(out, ShareGroupMetadataKey(group_id), None)
