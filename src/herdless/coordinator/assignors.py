"""Server-side assignors of consumer groups: from members and topics to a target assignment.

An assignor is a pure function of the members (their subscriptions, racks and
share of the previous target assignment), the partition counts of the
subscribed topics and the racks of their partitions' replicas. It says where
every partition should end up; getting there safely, revoking before
assigning, is reconciliation's job (reconciliation.py), so an assignor never
has to worry about two owners.

- ``uniform`` (the default, as in Kafka): balanced first, then sticky. Every
  partition of a subscribed topic goes to one of its subscribers, no member can
  give a partition to a subscriber holding two fewer, and among assignments
  that are that balanced it moves as few partitions as it can.
- ``range``: each topic's partitions in contiguous ranges over its subscribers
  in order (static members by instance id first, then member ids), the first
  ones getting one more; members of a topic's co-partitioned peers get the same
  partition numbers. Not sticky, as in Kafka.

Both are rack-aware (KIP-881's rules, which Kafka's server-side assignors
followed until 3.8): when members name racks, brokers have them, the two meet,
and not every partition has replicas in the same racks, a member is preferred
for the partitions with a replica in its rack, so that it fetches within its
rack. Balance still comes first: a member never gets more than its share to
stay in its rack. ``uniform`` then puts rack matching before stickiness (a
partition held outside its racks moves to a member in them if one has room);
``range`` first gives each member, in order, the partitions of its share that
match its rack, then the rest in ranges as before. A member without a rack
matches every partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from herdless.coordinator.topic_metadata import NO_PARTITIONS, Partitions, TopicIdPartition

# The racks of each topic's partitions' replicas, by topic id, then partition; a topic
# left out (or a short tuple) has no racks known.
PartitionRacks = Mapping[uuid.UUID, tuple[frozenset[str], ...]]
NO_PARTITION_RACKS: PartitionRacks = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member."""

    instance_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    # The member's share of the current target assignment: what stickiness keeps.
    assignment: Partitions = NO_PARTITIONS
    rack_id: str | None = None


# members by id, partition counts by topic id (subscribed topics that exist), the racks
# of their partitions -> targets
Assignor = Callable[
    [Mapping[str, MemberSpec], Mapping[uuid.UUID, int], PartitionRacks], dict[str, Partitions]
]


class RackMatcher:
    """Which members are in which partitions' racks, and whether that is worth using at
    all: only when some member has a rack that some replica is in, and the partitions'
    racks are not all the same (then every member is as near to each as to any other)."""

    def __init__(
        self,
        members: Mapping[str, MemberSpec],
        partitions: Iterable[TopicIdPartition],
        racks: PartitionRacks,
    ) -> None:
        self._member_racks = {m: s.rack_id for m, s in members.items() if s.rack_id}
        self._by_rack: dict[str, list[str]] = {}
        for member_id in sorted(self._member_racks):
            self._by_rack.setdefault(self._member_racks[member_id], []).append(member_id)
        self._racks = racks
        self.used = False
        if self._by_rack:
            seen = {self.racks(tp) for tp in partitions}
            every = frozenset().union(*seen)
            self.used = len(seen) > 1 and not every.isdisjoint(self._by_rack)

    def racks(self, tp: TopicIdPartition) -> frozenset[str]:
        by_partition = self._racks.get(tp.topic_id, ())
        return by_partition[tp.partition] if tp.partition < len(by_partition) else frozenset()

    def matches(self, member_id: str, tp: TopicIdPartition) -> bool:
        """The member may use the partition within its rack (or has no rack to mind)."""
        if not self.used:
            return True
        rack = self._member_racks.get(member_id)
        return rack is None or rack in self.racks(tp)

    def members_in_racks(self, tp: TopicIdPartition) -> list[str]:
        """The members with a rack among the partition's replicas' racks, by id."""
        if not self.used:
            return []
        found: list[str] = []
        for rack in sorted(self.racks(tp)):
            found += self._by_rack.get(rack, ())
        return sorted(found)


def uniform(
    members: Mapping[str, MemberSpec],
    partition_counts: Mapping[uuid.UUID, int],
    racks: PartitionRacks = NO_PARTITION_RACKS,
) -> dict[str, Partitions]:
    subscriptions = {m.subscribed_topic_ids & frozenset(partition_counts) for m in members.values()}
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, partition_counts, subscriptions.pop(), racks)
    return _uniform_heterogeneous(members, partition_counts, racks)


def _uniform_homogeneous(
    members: Mapping[str, MemberSpec],
    partition_counts: Mapping[uuid.UUID, int],
    topics: frozenset[uuid.UUID],
    racks: PartitionRacks,
) -> dict[str, Partitions]:
    """Every member subscribes to the same topics: each gets the floor or the ceiling of
    its share, and those already holding the most (in their racks) keep the ceilings.
    What is free goes first to members in its racks, partitions with the fewest such
    members first; then back to its previous owner; then to whoever has room."""
    every = {TopicIdPartition(t, p) for t in topics for p in range(partition_counts[t])}
    rack = RackMatcher(members, every, racks)
    kept: dict[str, list[TopicIdPartition]] = {}
    previous_owner: dict[TopicIdPartition, str] = {}
    for member_id, spec in members.items():
        valid = sorted(spec.assignment & every)
        kept[member_id] = [tp for tp in valid if rack.matches(member_id, tp)]
        previous_owner.update((tp, member_id) for tp in valid if not rack.matches(member_id, tp))
    floor, extra = divmod(len(every), len(members)) if members else (0, 0)
    order = sorted(members, key=lambda m: (-len(kept[m]), m))
    quotas = {m: floor + (1 if i < extra else 0) for i, m in enumerate(order)}
    result: dict[str, list[TopicIdPartition]] = {}
    taken: set[TopicIdPartition] = set()
    for member in order:
        keep = [tp for tp in kept[member] if tp not in taken][: quotas[member]]
        taken.update(keep)
        result[member] = keep

    def give(member: str, tp: TopicIdPartition) -> None:
        result[member].append(tp)
        taken.add(tp)

    if rack.used:
        nearby = {tp: rack.members_in_racks(tp) for tp in every - taken}
        for tp in sorted((tp for tp in nearby if nearby[tp]), key=lambda p: (len(nearby[p]), p)):
            room = [m for m in nearby[tp] if len(result[m]) < quotas[m]]
            if room:
                give(min(room, key=lambda m: (len(result[m]), m)), tp)
        for tp in sorted(previous_owner.keys() - taken):
            owner = previous_owner[tp]
            if len(result[owner]) < quotas[owner]:
                give(owner, tp)
    free = iter(sorted(every - taken))
    for member in order:
        while len(result[member]) < quotas[member]:
            result[member].append(next(free))
    return {m: frozenset(ps) for m, ps in result.items()}


def _uniform_heterogeneous(
    members: Mapping[str, MemberSpec],
    partition_counts: Mapping[uuid.UUID, int],
    racks: PartitionRacks,
) -> dict[str, Partitions]:
    """Members subscribe to different topics: keep what is still valid (and in the
    member's racks), hand out the rest to the least loaded subscriber (in the partition's
    racks if several are), then move partitions from the most to the least loaded
    subscriber while that narrows a gap of two or more, those outside their member's
    racks first and towards a member in their racks where one qualifies."""
    subscribers: dict[uuid.UUID, list[str]] = {t: [] for t in partition_counts}
    for member in sorted(members):
        for topic_id in members[member].subscribed_topic_ids:
            if topic_id in subscribers:
                subscribers[topic_id].append(member)
    every = [
        TopicIdPartition(t, p)
        for t, count in partition_counts.items()
        if subscribers[t]
        for p in range(count)
    ]
    rack = RackMatcher(members, every, racks)
    held: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
    owner: dict[TopicIdPartition, str] = {}
    for member in sorted(members):
        for tp in sorted(members[member].assignment):
            valid = tp.partition < partition_counts.get(tp.topic_id, 0)
            valid = valid and member in subscribers[tp.topic_id] and rack.matches(member, tp)
            if valid and tp not in owner:
                owner[tp] = member
                held[member].add(tp)

    def least_loaded(tp: TopicIdPartition, below: int | None = None) -> str | None:
        """The subscriber with the fewest partitions (fewer than `below`), one in the
        partition's racks first among equals."""
        candidates = [m for m in subscribers[tp.topic_id] if below is None or len(held[m]) < below]
        if not candidates:
            return None
        return min(candidates, key=lambda m: (len(held[m]), not rack.matches(m, tp), m))

    # Partitions with the fewest candidates first, while the others still have room.
    unassigned = [tp for tp in every if tp not in owner]
    unassigned.sort(key=lambda tp: (len(subscribers[tp.topic_id]), tp))
    for tp in unassigned:
        member = least_loaded(tp)
        assert member is not None
        owner[tp] = member
        held[member].add(tp)

    moved = True
    while moved:
        moved = False
        for giver in sorted(members, key=lambda m: (-len(held[m]), m)):
            for tp in sorted(held[giver], key=lambda tp: (rack.matches(giver, tp), tp)):
                taker = least_loaded(tp, below=len(held[giver]) - 1)
                if taker is not None:
                    held[giver].discard(tp)
                    held[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
    return {m: frozenset(ps) for m, ps in held.items()}


def range_(
    members: Mapping[str, MemberSpec],
    partition_counts: Mapping[uuid.UUID, int],
    racks: PartitionRacks = NO_PARTITION_RACKS,
) -> dict[str, Partitions]:
    def order(member: str) -> tuple[int, str]:
        instance_id = members[member].instance_id
        return (0, instance_id) if instance_id is not None else (1, member)

    result: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
    ordered = sorted(members, key=order)
    topics = {
        topic_id: _RangeTopic(
            topic_id, count, [m for m in ordered if topic_id in members[m].subscribed_topic_ids]
        )
        for topic_id, count in sorted(partition_counts.items())
    }
    topics = {t: state for t, state in topics.items() if state.subscribers and state.count}
    every = [TopicIdPartition(t, p) for t, state in topics.items() for p in range(state.count)]
    rack = RackMatcher(members, every, racks)
    if rack.used:
        # Co-partitioned topics (the same subscribers, as many partitions) keep giving the
        # same partition numbers to the same member: partition p of all of them goes to
        # the first member in the racks of each.
        peers: dict[tuple[tuple[str, ...], int], list[_RangeTopic]] = {}
        for state in topics.values():
            peers.setdefault((tuple(state.subscribers), state.count), []).append(state)
        for (subscribers, count), states in peers.items():
            for p in range(count):
                for member in subscribers:
                    if all(
                        s.room(member) and rack.matches(member, TopicIdPartition(s.topic_id, p))
                        for s in states
                    ):
                        for s in states:
                            s.give(member, [p], result)
                        break
    for state in topics.values():
        for member in state.subscribers:
            state.give(member, sorted(state.unassigned)[: state.room(member)], result)
    return {m: frozenset(ps) for m, ps in result.items()}


class _RangeTopic:
    """One topic's share-out under range: each subscriber's quota, the first ones taking
    the extra partitions, whichever subscribers get to them first."""

    def __init__(self, topic_id: uuid.UUID, count: int, subscribers: list[str]) -> None:
        self.topic_id = topic_id
        self.count = count
        self.subscribers = subscribers
        self.unassigned = set(range(count))
        self._floor, self._extra = divmod(count, len(subscribers)) if subscribers else (0, 0)
        self._given = dict.fromkeys(subscribers, 0)

    def room(self, member: str) -> int:
        return max(0, self._floor + (1 if self._extra > 0 else 0) - self._given[member])

    def give(
        self, member: str, partitions: list[int], result: dict[str, set[TopicIdPartition]]
    ) -> None:
        if not partitions:
            return
        self._given[member] += len(partitions)
        if self._given[member] > self._floor and self._given[member] - len(partitions) <= (
            self._floor
        ):
            self._extra -= 1
        self.unassigned.difference_update(partitions)
        result[member].update(TopicIdPartition(self.topic_id, p) for p in partitions)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"
