"""Server-side assignors of consumer groups: from members and topics to a target assignment.

An assignor is a pure function of the members (their subscriptions and their
share of the previous target assignment) and the partition counts of the
subscribed topics. It says where every partition should end up; getting there
safely, revoking before assigning, is reconciliation's job (reconciliation.py),
so an assignor never has to worry about two owners.

- ``uniform`` (the default, as in Kafka): balanced first, then sticky. Every
  partition of a subscribed topic goes to one of its subscribers, no member can
  give a partition to a subscriber holding two fewer, and among assignments
  that are that balanced it moves as few partitions as it can.
- ``range``: each topic's partitions in contiguous ranges over its subscribers
  in order (static members by instance id first, then member ids), the first
  ones getting one more; members of a topic's co-partitioned peers get the same
  partition numbers. Not sticky, as in Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from herdless.coordinator.topic_metadata import NO_PARTITIONS, Partitions, TopicIdPartition


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member."""

    instance_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    # The member's share of the current target assignment: what stickiness keeps.
    assignment: Partitions = NO_PARTITIONS


# members by id, partition counts by topic id (subscribed topics that exist) -> targets
Assignor = Callable[[Mapping[str, MemberSpec], Mapping[uuid.UUID, int]], dict[str, Partitions]]


def uniform(
    members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]
) -> dict[str, Partitions]:
    subscriptions = {m.subscribed_topic_ids & frozenset(partition_counts) for m in members.values()}
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, partition_counts, subscriptions.pop())
    return _uniform_heterogeneous(members, partition_counts)


def _uniform_homogeneous(
    members: Mapping[str, MemberSpec],
    partition_counts: Mapping[uuid.UUID, int],
    topics: frozenset[uuid.UUID],
) -> dict[str, Partitions]:
    """Every member subscribes to the same topics: each gets the floor or the ceiling of
    its share, and those already holding the most keep the ceilings."""
    every = {TopicIdPartition(t, p) for t in topics for p in range(partition_counts[t])}
    kept = {m: sorted(spec.assignment & every) for m, spec in members.items()}
    floor, extra = divmod(len(every), len(members)) if members else (0, 0)
    order = sorted(members, key=lambda m: (-len(kept[m]), m))
    quotas = {m: floor + (1 if i < extra else 0) for i, m in enumerate(order)}
    result: dict[str, list[TopicIdPartition]] = {}
    taken: set[TopicIdPartition] = set()
    for member in order:
        keep = [tp for tp in kept[member] if tp not in taken][: quotas[member]]
        taken.update(keep)
        result[member] = keep
    free = iter(sorted(every - taken))
    for member in order:
        while len(result[member]) < quotas[member]:
            result[member].append(next(free))
    return {m: frozenset(ps) for m, ps in result.items()}


def _uniform_heterogeneous(
    members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]
) -> dict[str, Partitions]:
    """Members subscribe to different topics: keep what is still valid, hand out the rest
    to the least loaded subscriber, then move partitions from the most to the least loaded
    subscriber while that narrows a gap of two or more."""
    subscribers: dict[uuid.UUID, list[str]] = {t: [] for t in partition_counts}
    for member in sorted(members):
        for topic_id in members[member].subscribed_topic_ids:
            if topic_id in subscribers:
                subscribers[topic_id].append(member)
    held: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
    owner: dict[TopicIdPartition, str] = {}
    for member in sorted(members):
        for tp in sorted(members[member].assignment):
            valid = tp.partition < partition_counts.get(tp.topic_id, 0)
            if valid and member in subscribers[tp.topic_id] and tp not in owner:
                owner[tp] = member
                held[member].add(tp)

    def least_loaded(topic_id: uuid.UUID) -> str:
        return min(subscribers[topic_id], key=lambda m: (len(held[m]), m))

    # Partitions with the fewest candidates first, while the others still have room.
    unassigned = [
        TopicIdPartition(t, p)
        for t, count in partition_counts.items()
        if subscribers[t]
        for p in range(count)
        if TopicIdPartition(t, p) not in owner
    ]
    unassigned.sort(key=lambda tp: (len(subscribers[tp.topic_id]), tp))
    for tp in unassigned:
        member = least_loaded(tp.topic_id)
        owner[tp] = member
        held[member].add(tp)

    moved = True
    while moved:
        moved = False
        for giver in sorted(members, key=lambda m: (-len(held[m]), m)):
            for tp in sorted(held[giver]):
                taker = least_loaded(tp.topic_id)
                if len(held[taker]) + 1 < len(held[giver]):
                    held[giver].discard(tp)
                    held[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
    return {m: frozenset(ps) for m, ps in held.items()}


def range_(
    members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]
) -> dict[str, Partitions]:
    def order(member: str) -> tuple[int, str]:
        instance_id = members[member].instance_id
        return (0, instance_id) if instance_id is not None else (1, member)

    result: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
    ordered = sorted(members, key=order)
    for topic_id, count in partition_counts.items():
        subscribed = [m for m in ordered if topic_id in members[m].subscribed_topic_ids]
        if not subscribed:
            continue
        floor, extra = divmod(count, len(subscribed))
        start = 0
        for i, member in enumerate(subscribed):
            end = start + floor + (1 if i < extra else 0)
            result[member].update(TopicIdPartition(topic_id, p) for p in range(start, end))
            start = end
    return {m: frozenset(ps) for m, ps in result.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"
