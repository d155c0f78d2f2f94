"""A share group (KIP-932): members, epochs, and the partitions each may fetch from.

Its state changes only by applying its records (share_records.py), live and at
loading alike. Unlike a consumer group's, a share group's partitions are not
owned: several members fetch from one partition, the partition leader hands each
record to one of them at a time. So there is nothing to revoke, and a member is
given its target at its next heartbeat, whole; its epoch is then the target's.

The state is Kafka's: Empty without members, Stable otherwise.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, replace

from herdless.coordinator.share_records import (
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
)
from herdless.coordinator.topic_metadata import NO_PARTITIONS, Partitions, TopicMetadata

# ShareGroupHeartbeat's member epoch to leave the group.
LEAVE_GROUP_MEMBER_EPOCH = -1
# The member state a share group member's current assignment record carries: Kafka's
# MemberState.STABLE, the only one a share member is ever in.
STABLE_MEMBER_STATE = 0
SHARE_GROUP_TYPE = "share"
# The protocol type ListGroups shows for a share group, as Kafka names it.
SHARE_PROTOCOL_TYPE = "share"


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Partitions = NO_PARTITIONS

    def metadata_value(self) -> ShareGroupMemberMetadataValue:
        return ShareGroupMemberMetadataValue(
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=tuple(sorted(self.subscribed_topic_names)),
        )

    def with_metadata(self, value: ShareGroupMemberMetadataValue) -> ShareGroupMember:
        return replace(
            self,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=frozenset(value.subscribed_topic_names),
        )

    def assignment_value(self) -> ShareGroupCurrentMemberAssignmentValue:
        return ShareGroupCurrentMemberAssignmentValue(
            self.member_epoch, self.previous_member_epoch, STABLE_MEMBER_STATE, self.assigned
        )

    def with_assignment(self, value: ShareGroupCurrentMemberAssignmentValue) -> ShareGroupMember:
        return replace(
            self,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            assigned=value.assigned_partitions,
        )


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.target_assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target_assignment: dict[str, Partitions] = {}
        # The subscribed topics as the last heartbeat on this broker saw them, by name. Not
        # in the log (the hash stands for it there): a loaded group learns them again at
        # its next heartbeat, and computes no target before.
        self.subscription_metadata: dict[str, TopicMetadata] | None = None
        self._topic_subscribers: Counter[str] = Counter()

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> frozenset[str]:
        return frozenset(self._topic_subscribers)

    def target_of(self, member_id: str) -> Partitions:
        return self.target_assignment.get(member_id, NO_PARTITIONS)

    # --- applying records ----------------------------------------------------------

    def put_member(self, member: ShareGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._topic_subscribers.subtract(old.subscribed_topic_names)
            self._topic_subscribers = +self._topic_subscribers
        self.members[member.member_id] = member
        self._topic_subscribers.update(member.subscribed_topic_names)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            self._topic_subscribers.subtract(old.subscribed_topic_names)
            self._topic_subscribers = +self._topic_subscribers

    def put_target_assignment(self, member_id: str, partitions: Partitions | None) -> None:
        if partitions is None:
            self.target_assignment.pop(member_id, None)
        else:
            self.target_assignment[member_id] = partitions
