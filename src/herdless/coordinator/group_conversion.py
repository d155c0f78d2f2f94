"""Online conversion between a classic group and a consumer group (KIP-848), as Kafka 4.0 does it.

Up: the first member to join a non-empty classic group with ConsumerGroupHeartbeat
turns it into a consumer group. Every classic member becomes a consumer group
member at the group's generation, Stable, owning what its last SyncGroup gave it,
which is also its target; it keeps speaking the classic protocol
(classic_members.py) until it restarts with the new one. The records are the
classic group's tombstone, then the consumer group's as Kafka orders them
(`creation_records`).

Down: when the last member speaking the new protocol leaves, or is fenced, and
classic members remain, the consumer group becomes a classic group again: Stable
at the group epoch, each member's assignment its target, and a rebalance started
at once so that the members agree on it through the classic protocol. The records
are the consumer group's tombstones, then the classic group's metadata.

`group.consumer.migration.policy` says which ways are allowed. This module only
decides and builds; ConsumerGroupManager and classic_rebalance.py write and install, the
first calling the second through ClassicGroupHooks.
"""

from __future__ import annotations

import typing

from herdless.coordinator.classic_group import ClassicGroup, Member
from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember
from herdless.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    TopicPartitionNames,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from herdless.coordinator.consumer_records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
)
from herdless.coordinator.history import RebalanceCause
from herdless.coordinator.messages import Protocol
from herdless.coordinator.now import Now
from herdless.coordinator.reconciliation import CurrentAssignment, MemberState
from herdless.coordinator.result import Result
from herdless.coordinator.state import GroupState
from herdless.coordinator.topic_metadata import Partitions, TopicIdPartition, TopicsImage


class ClassicGroupHooks(typing.Protocol):
    """What the consumer groups ask of the classic groups when a group id changes
    protocol, up or down; classic_rebalance.py answers."""

    def retire(self, out: Result, group_id: str) -> None:
        """A consumer group takes `group_id` over: the classic group's tombstone, its
        parked requests answered."""
        ...

    def install(self, out: Result, group: ClassicGroup, now: Now) -> None:
        """`group` (made from a consumer group now tombstoned) is the group of its id."""
        ...

    def prepare_rebalance(
        self, out: Result, group: ClassicGroup, cause: RebalanceCause, detail: str, now: Now
    ) -> None: ...


def may_upgrade(classic: ClassicGroup, config: CoordinatorConfig) -> bool:
    """Whether `classic` may become a consumer group: the policy allows it, its members use
    the consumer protocol and are not too many for a consumer group."""
    return (
        config.consumer_migration_policy.upgrades
        and classic.uses_consumer_protocol
        and len(classic.members) <= config.consumer_max_group_size
    )


def consumer_group_from_classic(classic: ClassicGroup, topics: TopicsImage) -> ConsumerGroup:
    """The consumer group `classic` becomes (not installed). A partition of a topic the image
    lacks is dropped, as Kafka drops it. MalformedConsumerProtocol if a member's embedded
    protocol does not parse."""
    group = ConsumerGroup(classic.group_id)
    epoch = classic.generation
    group.group_epoch = group.target_assignment_epoch = epoch
    claimed: set[TopicIdPartition] = set()
    for m in classic.members.values():
        protocols = {p.name: p.metadata for p in m.protocols}
        metadata = protocols.get(classic.protocol_name or "", m.protocols[0].metadata)
        subscription = decode_subscription(metadata)
        # A stale assignment of a member caught mid-rebalance may overlap another's: the
        # first member keeps it, so that no partition has two owners.
        assigned = to_partitions(decode_assignment(m.assignment), topics) - claimed
        claimed |= assigned
        member = ConsumerGroupMember(
            m.member_id,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=frozenset(subscription.topics),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            assignment=CurrentAssignment(epoch, epoch, MemberState.STABLE, assigned),
            classic=classic_metadata(m.session_timeout_ms, m.protocols),
        )
        group.put_target_assignment(m.member_id, assigned)
        group.put_member(member)
    return group


def creation_records(
    group: ConsumerGroup,
) -> list[tuple[ConsumerGroupKey, ConsumerGroupValue]]:
    """The records that make `group` from nothing, in Kafka's order."""
    group_id = group.group_id
    records: list[tuple[ConsumerGroupKey, ConsumerGroupValue]] = []
    for member_id, member in group.members.items():
        records.append(
            (ConsumerGroupMemberMetadataKey(group_id, member_id), member.metadata_value())
        )
    records.append(
        (ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(group.group_epoch))
    )
    for member_id in group.members:
        target = ConsumerGroupTargetAssignmentMemberValue(group.target_of(member_id))
        records.append((ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), target))
    epoch = ConsumerGroupTargetAssignmentMetadataValue(group.group_epoch)
    records.append((ConsumerGroupTargetAssignmentMetadataKey(group_id), epoch))
    for member_id, member in group.members.items():
        key = ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id)
        records.append((key, member.assignment_value()))
    return records


def downgrades_on_leaving(
    group: ConsumerGroup, leaving_member_id: str, config: CoordinatorConfig
) -> bool:
    """True when `leaving_member_id` is the last member speaking the new protocol, classic
    members remain, the policy allows going back and they fit in a classic group."""
    leaving = group.members.get(leaving_member_id)
    if leaving is None or leaving.uses_classic_protocol:
        return False
    others = [m for m in group.members.values() if m.member_id != leaving_member_id]
    return may_downgrade(others, config)


def may_downgrade(members: list[ConsumerGroupMember], config: CoordinatorConfig) -> bool:
    """Whether a consumer group of `members` may become a classic group: they all speak the
    classic protocol, the policy allows it, and they fit in a classic group."""
    return (
        bool(members)
        and all(m.uses_classic_protocol for m in members)
        and config.consumer_migration_policy.downgrades
        and len(members) <= config.max_group_size
    )


def classic_group_from_consumer(
    group: ConsumerGroup, leaving_member_id: str | None, wall_ms: int, history_size: int
) -> ClassicGroup:
    """The classic group `group` becomes without `leaving_member_id` (not installed): Stable
    at the group epoch, each classic member assigned its target. MalformedConsumerProtocol
    if a member's embedded protocol does not parse."""
    classic = ClassicGroup(
        group.group_id,
        wall_ms,
        history_size,
        state=GroupState.STABLE,
        generation=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
    )
    for m in group.members.values():
        if m.member_id == leaving_member_id or m.classic is None:
            continue
        classic.add(
            Member(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                CONSUMER_PROTOCOL_TYPE,
                tuple(Protocol(name, metadata) for name, metadata in m.classic.supported_protocols),
            )
        )
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for member in classic.members.values():
        version = protocol_version(member.metadata(classic.protocol_name))
        member.assignment = assignment_bytes(group, group.target_of(member.member_id), version)
    classic.generation_members = classic.member_ids()
    return classic


# --- helpers shared with classic_members.py ----------------------------------------------


def classic_metadata(
    session_timeout_ms: int, protocols: tuple[Protocol, ...]
) -> ClassicMemberMetadata:
    return ClassicMemberMetadata(session_timeout_ms, tuple((p.name, p.metadata) for p in protocols))


def to_partitions(named: TopicPartitionNames, topics: TopicsImage) -> Partitions:
    """Partitions named by topic, by topic id; those of topics the image lacks are left out."""
    out = set()
    for name, partition in named:
        topic = topics.topic(name)
        if topic is not None:
            out.add(TopicIdPartition(topic.topic_id, partition))
    return frozenset(out)


def assignment_bytes(group: ConsumerGroup, partitions: Partitions, version: int) -> bytes:
    """`partitions` as the ConsumerProtocolAssignment of `version` a classic member reads,
    topics named as the group's subscription metadata names them."""
    names = {t.topic_id: t.name for t in group.subscription_metadata.values()}
    named = frozenset(
        (names[tp.topic_id], tp.partition) for tp in partitions if tp.topic_id in names
    )
    return encode_assignment(named, version)
