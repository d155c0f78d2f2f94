"""The server-side assignor of share groups: ``simple``, as Kafka names it (KIP-932).

Same shape as a consumer group's assignor (assignors.Assignor), but a partition
may go to several members: the partition leader hands each record to one of them
at a time, so sharing a partition shares its records. Kafka's rules, in order:

- every partition of a subscribed topic goes to at least one of its subscribers;
- when a topic has more subscribers than partitions, each of its partitions goes
  to ceil(subscribers / partitions) of them, so that every subscriber has one;
- balanced: no member can hand a partition to a subscriber of its topic holding
  two fewer (a member holds each partition at most once);
- sticky: among assignments that balanced, what members held stays where it is.

Not rack-aware, as Kafka's is not. Deterministic: members and partitions are
visited in sorted order, so every coordinator computes the same target.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from herdless.coordinator.assignors import Assignor, MemberSpec, PartitionRacks
from herdless.coordinator.topic_metadata import Partitions, TopicIdPartition

SIMPLE_ASSIGNOR = "simple"


def simple(
    members: Mapping[str, MemberSpec],
    partition_counts: Mapping[uuid.UUID, int],
    partition_racks: PartitionRacks,
) -> dict[str, Partitions]:
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member_id in sorted(members):
        for topic_id in members[member_id].subscribed_topic_ids:
            if partition_counts.get(topic_id, 0) > 0:
                subscribers.setdefault(topic_id, []).append(member_id)
    # How many members each partition goes to.
    sharing: dict[TopicIdPartition, int] = {}
    for topic_id in sorted(subscribers):
        count = partition_counts[topic_id]
        per_partition = -(-len(subscribers[topic_id]) // count)
        for partition in range(count):
            sharing[TopicIdPartition(topic_id, partition)] = per_partition

    held: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
    holders: dict[TopicIdPartition, set[str]] = {tp: set() for tp in sharing}

    def eligible(member_id: str, tp: TopicIdPartition) -> bool:
        return tp.topic_id in members[member_id].subscribed_topic_ids and tp not in held[member_id]

    # Sticky: what each member held, while it still subscribes and the partition is not
    # shared more than it should be.
    for member_id in sorted(members):
        for tp in sorted(members[member_id].assignment):
            if tp in holders and eligible(member_id, tp) and len(holders[tp]) < sharing[tp]:
                held[member_id].add(tp)
                holders[tp].add(member_id)
    # Each partition shared as it should be, by its least loaded subscribers.
    for tp in sorted(sharing):
        while len(holders[tp]) < sharing[tp]:
            candidates = [m for m in subscribers[tp.topic_id] if eligible(m, tp)]
            chosen = min(candidates, key=lambda m: (len(held[m]), m))
            held[chosen].add(tp)
            holders[tp].add(chosen)
    _balance(held, holders, eligible)
    return {member_id: frozenset(partitions) for member_id, partitions in held.items()}


def _balance(
    held: dict[str, set[TopicIdPartition]],
    holders: dict[TopicIdPartition, set[str]],
    eligible: Callable[[str, TopicIdPartition], bool],
) -> None:
    """Move a partition from a member to a subscriber holding two fewer, while one can: each
    move lowers the sum of the squares of the loads, so this ends."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(held, key=lambda m: (-len(held[m]), m)):
            takers = sorted(
                (m for m in held if len(held[m]) <= len(held[giver]) - 2),
                key=lambda m: (len(held[m]), m),
            )
            for tp in sorted(held[giver]):
                taker = next((m for m in takers if eligible(m, tp)), None)
                if taker is not None:
                    held[giver].discard(tp)
                    holders[tp].discard(giver)
                    held[taker].add(tp)
                    holders[tp].add(taker)
                    moved = True
                    break
            if moved:
                break


SHARE_ASSIGNORS: dict[str, Assignor] = {SIMPLE_ASSIGNOR: simple}
