"""Replica assignment for new topics and new partitions, as Kafka's AdminUtils does it.

Pure. Three aims, in Kafka's words: spread replicas evenly over brokers; for the partitions
a broker leads, spread their other replicas over the other brokers; and when every broker
has a rack, put each partition's replicas on different racks where possible.

Rack-unaware: the first replica of partition p goes to broker (start + p) mod n, and the
other replicas follow it at a shift that grows by one each time p wraps round the broker
list, so the follower sets do not repeat. Rack-aware: the same walk over a broker list in
which racks alternate, skipping a broker whose rack (or the broker itself) already holds a
replica while some rack (or broker) holds none.

The random start index and shift come from the `rng` argument, so tests fix them with a
seeded random.Random; Kafka draws them from java.util.Random.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from enum import Enum

from herdless.cluster.errors import (
    IncompleteRackInformation,
    InvalidPartitionCount,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
)

Assignment = dict[int, tuple[int, ...]]


class RackAwareMode(Enum):
    """Kafka's RackAwareMode for brokers of which only some have a rack."""

    # Assign rack-aware; refuse when racks are incomplete (what CreateTopics does).
    ENFORCED = "enforced"
    # Assign rack-aware when every broker has a rack, and ignore racks otherwise.
    SAFE = "safe"
    DISABLED = "disabled"


def assign_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    *,
    rng: random.Random | None = None,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> Assignment:
    """Kafka's AdminUtils.assignReplicasToBrokers over `brokers` (id -> rack or None).

    A fixed_start_index of 0 or more replaces both random draws (start and shift), as in
    Kafka; start_partition_id numbers the first partition (new partitions of a topic).
    """
    if num_partitions <= 0:
        raise InvalidPartitionCount("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactor("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactor(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    racks = _racks_for(brokers, rack_aware_mode)
    rng = rng or random.Random()
    if not any(rack is not None for rack in racks.values()):
        return _assign_rack_unaware(
            sorted(brokers),
            num_partitions,
            replication_factor,
            fixed_start_index,
            start_partition_id,
            rng,
        )
    if any(rack is None for rack in racks.values()):
        raise IncompleteRackInformation(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    return _assign_rack_aware(
        {broker: rack for broker, rack in racks.items() if rack is not None},
        num_partitions,
        replication_factor,
        fixed_start_index,
        start_partition_id,
        rng,
    )


def validate_new_topic_assignment(
    assignment: Mapping[int, Sequence[int]], live_brokers: Collection[int]
) -> Assignment:
    """Check an assignment given in CreateTopics, as Kafka's validateTopicCreate does.

    Kafka's ZooKeeper-era broker does not check broker ids here; herdless refuses unknown
    ones, as Kafka's KRaft controller and its CreatePartitions do.
    """
    if not assignment:
        raise InvalidReplicaAssignment("Replica assignment must name at least one partition.")
    if len({len(replicas) for replicas in assignment.values()}) != 1:
        raise InvalidReplicaAssignment("All partitions should have the same number of replicas")
    for partition, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignment(
                f"Duplicate replica assignment found: partition {partition} has replicas "
                f"{_join(replicas)}."
            )
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignment(
            "partitions should be a consecutive 0-based integer sequence"
        )
    if not next(iter(assignment.values())):
        raise InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list."
        )
    _refuse_unknown_brokers(assignment.values(), live_brokers)
    return {partition: tuple(assignment[partition]) for partition in sorted(assignment)}


def assign_new_partitions(
    topic: str,
    existing: Mapping[int, Sequence[int]],
    brokers: Mapping[int, str | None],
    num_partitions: int,
    explicit: Sequence[Sequence[int]] | None = None,
    *,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> Assignment:
    """The assignment of the partitions CreatePartitions adds to reach num_partitions.

    `explicit` is the request's list of replica lists for the new partitions, if it gave
    one. Without it, Kafka continues the topic's pattern: the walk starts at the first
    broker whose id is at least partition 0's first replica, numbering from the existing
    partition count.
    """
    current = len(existing)
    if num_partitions < current:
        raise InvalidPartitionCount(
            f"Topic currently has {current} partitions, which is higher than the requested "
            f"{num_partitions}."
        )
    if num_partitions == current:
        raise InvalidPartitionCount(f"Topic already has {current} partitions.")
    if 0 not in existing:
        raise InvalidReplicaAssignment(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is "
            "missing."
        )
    increment = num_partitions - current
    replication_factor = len(existing[0])
    if explicit is not None:
        _refuse_unknown_brokers(explicit, brokers)
        if len(explicit) != increment:
            raise InvalidReplicaAssignment(
                f"Increasing the number of partitions by {increment} but {len(explicit)} "
                "assignments provided."
            )
        proposed = {current + i: tuple(replicas) for i, replicas in enumerate(explicit)}
        _validate_added_replicas(proposed, replication_factor)
        return proposed
    ids = sorted(brokers)
    first = existing[0][0]
    start = next((i for i, broker in enumerate(ids) if broker >= first), 0)
    return assign_replicas(
        brokers,
        increment,
        replication_factor,
        fixed_start_index=start,
        start_partition_id=current,
        rack_aware_mode=rack_aware_mode,
    )


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn, racks in name order, brokers in id order.

    Racks r1: 0 1 2, r2: 3 4 5, r3: 6 7 8 give 0 3 6 1 4 7 2 5 8.
    """
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(racks):
        result.extend(queue[depth] for queue in queues if depth < len(queue))
        depth += 1
    return result


def _racks_for(brokers: Mapping[int, str | None], mode: RackAwareMode) -> dict[int, str | None]:
    with_rack = sum(rack is not None for rack in brokers.values())
    if mode is RackAwareMode.DISABLED or (mode is RackAwareMode.SAFE and with_rack < len(brokers)):
        return dict.fromkeys(brokers)
    return dict(brokers)


def _replica_index(first: int, shift: int, replica: int, num_brokers: int) -> int:
    return (first + 1 + (shift + replica) % (num_brokers - 1)) % num_brokers


def _walk(
    num_brokers: int,
    num_partitions: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> Iterator[tuple[int, int, int]]:
    """(partition, index of its first replica, follower shift) for each partition: the
    first replicas go round the broker list, and the shift grows at every full round."""
    if fixed_start_index >= 0:
        start = shift = fixed_start_index
    else:
        start = rng.randrange(num_brokers)
        shift = rng.randrange(num_brokers)
    first_partition = max(0, start_partition_id)
    for partition in range(first_partition, first_partition + num_partitions):
        if partition > 0 and partition % num_brokers == 0:
            shift += 1
        yield partition, (partition + start) % num_brokers, shift


def _assign_rack_unaware(
    broker_ids: list[int],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> Assignment:
    n = len(broker_ids)
    assignment: Assignment = {}
    for partition, first, shift in _walk(
        n, num_partitions, fixed_start_index, start_partition_id, rng
    ):
        followers = (
            broker_ids[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
        )
        assignment[partition] = (broker_ids[first], *followers)
    return assignment


def _assign_rack_aware(
    racks: dict[int, str],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> Assignment:
    arranged = rack_alternated_brokers(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    assignment: Assignment = {}
    for partition, first, shift in _walk(
        n, num_partitions, fixed_start_index, start_partition_id, rng
    ):
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack = racks[broker]
                # Take a broker on a rack that has no replica yet, unless every rack has
                # one; and never a broker twice while some broker has none.
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in replicas or len(replicas) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
        assignment[partition] = tuple(replicas)
    return assignment


def _refuse_unknown_brokers(
    assignments: Collection[Sequence[int]], brokers: Collection[int]
) -> None:
    unknown = {broker for replicas in assignments for broker in replicas} - set(brokers)
    if unknown:
        raise InvalidReplicaAssignment(
            f"Unknown broker(s) in replica assignment: {_join(sorted(unknown))}."
        )


def _validate_added_replicas(proposed: Assignment, replication_factor: int) -> None:
    for partition, replicas in proposed.items():
        if not replicas:
            raise InvalidReplicaAssignment(
                f"Cannot have replication factor of 0 for partition id {partition}."
            )
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignment(
                "Duplicate brokers not allowed in replica assignment: "
                f"{_join(replicas)} for partition id {partition}."
            )
    bad = sorted((p, len(r)) for p, r in proposed.items() if len(r) != replication_factor)
    if bad:
        raise InvalidReplicaAssignment(
            "Inconsistent replication factor between partitions, partition 0 has "
            f"{replication_factor} while partitions [{_join(p for p, _ in bad)}] have "
            f"replication factors [{_join(rf for _, rf in bad)}], respectively."
        )


def _join(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)


def propose_reassignment(
    current: Mapping[tuple[str, int], Sequence[int]], brokers: Collection[int]
) -> dict[tuple[str, int], list[int]]:
    """kafka-reassign-partitions.sh --generate (ReassignPartitionsCommand's
    calculateAssignment): each topic's partitions spread over `brokers` as a new topic's
    would be, rack-unaware, keeping its replication factor. InvalidReplicationFactor when
    a topic has more replicas than there are brokers."""
    by_topic: dict[str, dict[int, int]] = {}
    for (topic, partition), replicas in current.items():
        by_topic.setdefault(topic, {})[partition] = len(replicas)
    proposed: dict[tuple[str, int], list[int]] = {}
    for topic, partitions in sorted(by_topic.items()):
        spread = assign_replicas(
            dict.fromkeys(sorted(brokers)), len(partitions), max(partitions.values())
        )
        for index, partition in enumerate(sorted(partitions)):
            proposed[(topic, partition)] = list(spread[index])
    return proposed
