"""A consumer group (KIP-848): members, epochs, target assignment, who owns what.

Its state changes only by applying its records (consumer_records.py), live and
at loading alike, so what a shard holds is always what its log says. Beside
the records' contents it keeps indexes derived from them: static members by
instance id, how many members subscribe to each topic name and regular
expression or name each server assignor, and the owner and epoch of every
partition a member holds (assigned or still revoking) - the index that lets
reconciliation give a partition only to a member when no other holds it.

The group's state is derived, as in Kafka: Empty without members, Assigning
while the group epoch is ahead of the target assignment's, Reconciling while a
member is not yet at the target, Stable otherwise.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field, replace

from herdless.coordinator.consumer_messages import (
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedTopicPartitions,
)
from herdless.coordinator.consumer_records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupRegularExpressionValue,
)
from herdless.coordinator.reconciliation import CurrentAssignment, MemberState
from herdless.coordinator.topic_metadata import (
    NO_PARTITIONS,
    Partitions,
    TopicIdPartition,
    TopicMetadata,
    TopicsImage,
    by_topic,
)
from herdless.protocol.errors import ErrorCode

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
NO_ASSIGNMENT_EPOCH = -1


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class InconsistentOwnership(RuntimeError):
    """A record gave a partition to a member while another held it: a coordinator bug,
    the one reconciliation exists to prevent."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    assignment: CurrentAssignment = field(default_factory=CurrentAssignment)
    # Set for a member speaking the classic protocol (JoinGroup, SyncGroup...) in the group.
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def state(self) -> MemberState:
        return self.assignment.state

    @property
    def assigned(self) -> Partitions:
        return self.assignment.assigned

    @property
    def is_revoking(self) -> bool:
        """Asked to give up partitions, and on the clock for it. (A static member away keeps
        UNREVOKED_PARTITIONS with nothing left to revoke, as in Kafka.)"""
        a = self.assignment
        return a.state is MemberState.UNREVOKED_PARTITIONS and bool(a.pending_revocation)

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=tuple(sorted(self.subscribed_topic_names)),
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic_member_metadata=self.classic,
        )

    def with_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
        return replace(
            self,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=frozenset(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex or None,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
            classic=value.classic_member_metadata,
        )

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        a = self.assignment
        return ConsumerGroupCurrentMemberAssignmentValue(
            a.member_epoch, a.previous_member_epoch, a.state, a.assigned, a.pending_revocation
        )

    def with_assignment(
        self, value: ConsumerGroupCurrentMemberAssignmentValue
    ) -> ConsumerGroupMember:
        return replace(
            self,
            assignment=CurrentAssignment(
                value.member_epoch,
                value.previous_member_epoch,
                MemberState.from_value(value.state),
                value.assigned_partitions,
                value.partitions_pending_revocation,
            ),
        )


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.target_assignment_epoch = 0
        # When the computation of the current target finished (KIP-1263), 0 if never: on
        # the wall clock, as written in its record for whoever reads the log.
        self.assignment_timestamp_ms = 0
        # The same moment on this broker's monotonic clock, which the assignment interval
        # counts from; None until a target is computed here or the shard is loaded.
        self.target_finished_monotonic_ms: int | None = None
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target_assignment: dict[str, Partitions] = {}
        # The subscribed topics as the target assignment last saw them, by name.
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.resolved_regexes: dict[str, ConsumerGroupRegularExpressionValue] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self._topic_subscribers: Counter[str] = Counter()
        self._regex_subscribers: Counter[str] = Counter()
        self._assignor_votes: Counter[str] = Counter()
        self._owners: dict[TopicIdPartition, tuple[str, int]] = {}

    # --- derived state ------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.target_assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        epoch = self.target_assignment_epoch
        if all(m.assignment.is_reconciled_to(epoch) for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    def owner_epoch(self, tp: TopicIdPartition) -> int | None:
        owner = self._owners.get(tp)
        return None if owner is None else owner[1]

    def owner(self, tp: TopicIdPartition) -> str | None:
        owner = self._owners.get(tp)
        return None if owner is None else owner[0]

    def owned_partitions(self) -> dict[TopicIdPartition, tuple[str, int]]:
        return dict(self._owners)

    def subscribed_regexes(self) -> frozenset[str]:
        return frozenset(self._regex_subscribers)

    def subscribed_topic_names(self) -> frozenset[str]:
        """Named by a member, or matched by a member's regular expression."""
        names = set(self._topic_subscribers)
        for regex in self._regex_subscribers:
            resolved = self.resolved_regexes.get(regex)
            if resolved is not None:
                names.update(resolved.topics)
        return frozenset(names)

    def member_topic_names(self, member: ConsumerGroupMember) -> frozenset[str]:
        names = member.subscribed_topic_names
        regex = member.subscribed_topic_regex
        resolved = self.resolved_regexes.get(regex) if regex else None
        return names | frozenset(resolved.topics) if resolved is not None else names

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def preferred_assignor(self) -> str | None:
        """The server assignor most members name; ties go to the first name in order."""
        if not self._assignor_votes:
            return None
        return min(self._assignor_votes, key=lambda name: (-self._assignor_votes[name], name))

    def validate_offset_commit(
        self, member_id: str, member_epoch: int, api_version: int | None
    ) -> ErrorCode:
        """Who may commit to the group: anyone while it is empty (admin tools, consumers
        assigning themselves partitions), else a member at its current epoch.
        `api_version`: OffsetCommit's; None for a transaction's commit (TxnOffsetCommit),
        which any version of a member's may send."""
        if member_epoch < 0 and not self.members:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if api_version is not None and api_version < 9 and not member.uses_classic_protocol:
            # A member of a consumer group commits with its member epoch, from OffsetCommit v9.
            return ErrorCode.UNSUPPORTED_VERSION
        return _check_member_epoch(member, member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Anyone who does not say who it is (an admin tool), else a member at its epoch."""
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return _check_member_epoch(member, member_epoch)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members[member_id]

    # --- applying records ----------------------------------------------------------

    def put_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        self._unindex(old)
        self.members[member.member_id] = member
        self._index(member)

    def remove_member(self, member_id: str) -> None:
        self._unindex(self.members.pop(member_id, None))

    def put_target_assignment(self, member_id: str, partitions: Partitions | None) -> None:
        if partitions is None:
            self.target_assignment.pop(member_id, None)
        else:
            self.target_assignment[member_id] = partitions

    def target_of(self, member_id: str) -> Partitions:
        return self.target_assignment.get(member_id, NO_PARTITIONS)

    def _index(self, member: ConsumerGroupMember) -> None:
        self._topic_subscribers.update(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            self._regex_subscribers[member.subscribed_topic_regex] += 1
        if member.server_assignor is not None:
            self._assignor_votes[member.server_assignor] += 1
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        a = member.assignment
        for tp in a.assigned | a.pending_revocation:
            holder = self._owners.get(tp)
            if holder is not None:
                raise InconsistentOwnership(
                    f"group {self.group_id}: {tp} given to {member.member_id} at epoch "
                    f"{a.member_epoch} while {holder[0]} holds it at epoch {holder[1]}"
                )
            self._owners[tp] = (member.member_id, a.member_epoch)

    def _unindex(self, member: ConsumerGroupMember | None) -> None:
        if member is None:
            return
        self._topic_subscribers.subtract(member.subscribed_topic_names)
        self._topic_subscribers = +self._topic_subscribers
        if member.subscribed_topic_regex:
            self._regex_subscribers[member.subscribed_topic_regex] -= 1
            self._regex_subscribers = +self._regex_subscribers
        if member.server_assignor is not None:
            self._assignor_votes[member.server_assignor] -= 1
            self._assignor_votes = +self._assignor_votes
        if member.instance_id is not None and (
            self.static_members.get(member.instance_id) == member.member_id
        ):
            del self.static_members[member.instance_id]
        a = member.assignment
        for tp in a.assigned | a.pending_revocation:
            self._owners.pop(tp, None)


def _check_member_epoch(member: ConsumerGroupMember, epoch: int) -> ErrorCode:
    """A classic member's generation id is its member epoch, and a mismatch is what the
    classic protocol calls it."""
    if epoch == member.member_epoch:
        return ErrorCode.NONE
    if member.uses_classic_protocol:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.STALE_MEMBER_EPOCH


def named_partitions(
    partitions: Partitions, topics: TopicsImage
) -> tuple[DescribedTopicPartitions, ...]:
    """A member's partitions by topic, named as `topics` has them, for the describe APIs
    of consumer and share groups (a partition of a topic gone since is left out, as Kafka
    does)."""
    described = []
    for topic_id, ps in by_topic(partitions).items():
        topic = topics.topic_by_id(topic_id)
        if topic is not None:
            described.append(DescribedTopicPartitions(topic_id, topic.name, tuple(ps)))
    return tuple(described)


def describe_group(
    group: ConsumerGroup, topics: TopicsImage, default_assignor: str
) -> DescribedConsumerGroup:
    """The group as ConsumerGroupDescribe shows it; topics named as `topics` has them."""

    def named(partitions: Partitions) -> tuple[DescribedTopicPartitions, ...]:
        return named_partitions(partitions, topics)

    members = tuple(
        DescribedConsumerGroupMember(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=named(m.assigned),
            target_assignment=named(group.target_of(m.member_id)),
            uses_classic_protocol=m.uses_classic_protocol,
            member_state=int(m.state),
            pending_revocation=named(m.assignment.pending_revocation),
        )
        for m in group.members.values()
    )
    return DescribedConsumerGroup(
        group.group_id,
        ErrorCode.NONE,
        group_state=str(group.state),
        group_epoch=group.group_epoch,
        assignment_epoch=group.target_assignment_epoch,
        assignor_name=group.preferred_assignor() or default_assignor,
        members=members,
    )
