"""Replica assignment: Kafka's AdminUtils placements and the errors Kafka gives."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from herdless.cluster.assignment import (
    RackAwareMode,
    assign_new_partitions,
    assign_replicas,
    rack_alternated_brokers,
    validate_new_topic_assignment,
)
from herdless.cluster.errors import (
    IncompleteRackInformation,
    InvalidPartitionCount,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
)
from herdless.protocol.errors import ErrorCode

SIX_ON_THREE_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


def no_racks(*broker_ids: int) -> dict[int, str | None]:
    return dict.fromkeys(broker_ids)


def test_rack_unaware_walk_matches_kafka() -> None:
    assignment = assign_replicas(no_racks(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0)
    assert assignment == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        # the follower shift grows once the first replica wraps round
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


def test_broker_ids_are_walked_in_id_order_whatever_order_they_come_in() -> None:
    shuffled = no_racks(4, 0, 3, 1, 2)
    assert assign_replicas(shuffled, 10, 3, fixed_start_index=0) == assign_replicas(
        no_racks(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0
    )


def test_rack_alternated_broker_list() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated_brokers(racks) == [0, 3, 1, 4, 2]


def test_rack_aware_walk_matches_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assignment = assign_replicas(racks, 7, 3, fixed_start_index=0, start_partition_id=0)
    assert assignment == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        # past one round the followers shift instead of repeating 0,3,1
        6: (0, 4, 2),
    }


def distribution(
    assignment: dict[int, tuple[int, ...]],
) -> tuple[Counter[int], Counter[int]]:
    leaders = Counter(replicas[0] for replicas in assignment.values())
    replicas = Counter(broker for rs in assignment.values() for broker in rs)
    return leaders, replicas


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize(("partitions", "replication_factor"), [(6, 3), (12, 2), (6, 2)])
def test_rack_aware_spreads_racks_leaders_and_replicas_evenly(
    seed: int, partitions: int, replication_factor: int
) -> None:
    assignment = assign_replicas(
        SIX_ON_THREE_RACKS, partitions, replication_factor, rng=random.Random(seed)
    )
    for replicas in assignment.values():
        assert len({SIX_ON_THREE_RACKS[b] for b in replicas}) == replication_factor
    leaders, replicas = distribution(assignment)
    assert set(leaders.values()) == {partitions // 6}
    assert set(replicas.values()) == {partitions * replication_factor // 6}


@pytest.mark.parametrize("seed", range(10))
def test_leaders_balance_over_many_partitions(seed: int) -> None:
    racks = {
        **SIX_ON_THREE_RACKS,
        6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3",
    }  # fmt: skip
    for brokers in (racks, dict.fromkeys(racks)):
        leaders, replicas = distribution(assign_replicas(brokers, 96, 3, rng=random.Random(seed)))
        assert set(leaders.values()) == {8}
        assert set(replicas.values()) == {24}


def test_rack_unaware_spreads_each_leaders_followers_over_the_other_brokers() -> None:
    assignment = assign_replicas(no_racks(*range(5)), 20, 2, rng=random.Random(3))
    for leader in range(5):
        followers = [rs[1] for rs in assignment.values() if rs[0] == leader]
        assert sorted(followers) == sorted(set(range(5)) - {leader})


def test_more_replicas_than_racks_puts_one_on_every_rack() -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for seed in range(10):
        for replicas in assign_replicas(racks, 6, 5, rng=random.Random(seed)).values():
            assert len(set(replicas)) == 5
            assert {racks[b] for b in replicas} == {"rack1", "rack2", "rack3"}


def test_single_rack_still_balances_leaders() -> None:
    leaders, _ = distribution(
        assign_replicas(dict.fromkeys(range(6), "rack1"), 6, 3, rng=random.Random(1))
    )
    assert set(leaders.values()) == {1}


def test_a_seeded_random_fixes_start_and_shift() -> None:
    brokers = no_racks(*range(7))
    first = assign_replicas(brokers, 14, 3, rng=random.Random(42))
    assert assign_replicas(brokers, 14, 3, rng=random.Random(42)) == first
    starts = {assign_replicas(brokers, 1, 3, rng=random.Random(s))[0][0] for s in range(50)}
    assert starts == set(range(7))


def test_replication_factor_larger_than_brokers_is_refused_as_kafka_refuses_it() -> None:
    with pytest.raises(InvalidReplicationFactor) as info:
        assign_replicas(no_racks(1, 2), 3, 3)
    assert str(info.value) == "Replication factor: 3 larger than available brokers: 2."
    assert info.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_zero_partitions_or_replicas_are_refused() -> None:
    with pytest.raises(InvalidPartitionCount, match="Number of partitions must be larger than 0."):
        assign_replicas(no_racks(1), 0, 1)
    with pytest.raises(InvalidReplicationFactor, match="Replication factor must be larger than 0."):
        assign_replicas(no_racks(1), 1, 0)
    assert InvalidPartitionCount.error_code == ErrorCode.INVALID_PARTITIONS


def test_some_brokers_without_rack() -> None:
    brokers = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: None}
    with pytest.raises(IncompleteRackInformation) as info:
        assign_replicas(brokers, 10, 3)
    assert str(info.value) == (
        "Not all brokers have rack information for replica rack aware assignment."
    )
    # Kafka's error is no API error: clients get UNKNOWN_SERVER_ERROR.
    assert info.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    for mode in (RackAwareMode.SAFE, RackAwareMode.DISABLED):
        assert assign_replicas(
            brokers, 10, 3, fixed_start_index=0, rack_aware_mode=mode
        ) == assign_replicas(no_racks(*brokers), 10, 3, fixed_start_index=0)


def test_disabled_rack_awareness_ignores_complete_racks() -> None:
    assert assign_replicas(
        SIX_ON_THREE_RACKS, 6, 3, fixed_start_index=1, rack_aware_mode=RackAwareMode.DISABLED
    ) == assign_replicas(no_racks(*SIX_ON_THREE_RACKS), 6, 3, fixed_start_index=1)


# -- explicit assignments ------------------------------------------------------------------


def test_valid_explicit_assignment_is_returned_in_partition_order() -> None:
    assert validate_new_topic_assignment({1: [2, 3], 0: [3, 1]}, {1, 2, 3}) == {
        0: (3, 1),
        1: (2, 3),
    }


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ({0: [1, 2], 1: [1]}, "All partitions should have the same number of replicas"),
        ({0: [1, 1]}, "Duplicate replica assignment found: partition 0 has replicas 1, 1."),
        ({0: [1], 2: [2]}, "partitions should be a consecutive 0-based integer sequence"),
        ({0: [1, 9], 1: [8, 1]}, "Unknown broker(s) in replica assignment: 8, 9."),
        ({0: []}, "The manual partition assignment includes an empty replica list."),
        ({}, "Replica assignment must name at least one partition."),
    ],
)
def test_invalid_explicit_assignments(assignment: dict[int, list[int]], message: str) -> None:
    with pytest.raises(InvalidReplicaAssignment) as info:
        validate_new_topic_assignment(assignment, {1, 2, 3})
    assert str(info.value) == message
    assert info.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


# -- new partitions ------------------------------------------------------------------------


def test_new_partitions_continue_the_topics_pattern() -> None:
    brokers = no_racks(*range(5))
    whole = assign_replicas(brokers, 10, 3, fixed_start_index=0)
    existing = {p: whole[p] for p in range(4)}
    added = assign_new_partitions("t", existing, brokers, 10)
    assert added == {p: whole[p] for p in range(4, 10)}


def test_new_partitions_start_at_the_first_broker_of_partition_zero() -> None:
    brokers = no_racks(10, 20, 30)
    added = assign_new_partitions("t", {0: (20, 30)}, brokers, 3)
    assert [replicas[0] for replicas in added.values()] == [30, 10]


def test_explicit_new_partitions() -> None:
    added = assign_new_partitions("t", {0: (1, 2)}, no_racks(1, 2, 3), 3, [[3, 1], [2, 3]])
    assert added == {1: (3, 1), 2: (2, 3)}


@pytest.mark.parametrize(
    ("count", "explicit", "error", "message"),
    [
        (
            2,
            None,
            InvalidPartitionCount,
            "Topic currently has 3 partitions, which is higher than the requested 2.",
        ),
        (3, None, InvalidPartitionCount, "Topic already has 3 partitions."),
        (
            5,
            [[1, 2], [4, 1]],
            InvalidReplicaAssignment,
            "Unknown broker(s) in replica assignment: 4.",
        ),
        (
            5,
            [[1, 2]],
            InvalidReplicaAssignment,
            "Increasing the number of partitions by 2 but 1 assignments provided.",
        ),
        (
            4,
            [[2, 2]],
            InvalidReplicaAssignment,
            "Duplicate brokers not allowed in replica assignment: 2, 2 for partition id 3.",
        ),
        (
            4,
            [[]],
            InvalidReplicaAssignment,
            "Cannot have replication factor of 0 for partition id 3.",
        ),
        (
            5,
            [[1], [1, 2, 3]],
            InvalidReplicaAssignment,
            "Inconsistent replication factor between partitions, partition 0 has 2 while "
            "partitions [3, 4] have replication factors [1, 3], respectively.",
        ),
    ],
)
def test_invalid_new_partitions(
    count: int, explicit: list[list[int]] | None, error: type[Exception], message: str
) -> None:
    existing = {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    with pytest.raises(error) as info:
        assign_new_partitions("t", existing, no_racks(1, 2, 3), count, explicit)
    assert str(info.value) == message


def test_new_partitions_need_a_partition_zero() -> None:
    with pytest.raises(InvalidReplicaAssignment, match="partition id 0 is missing"):
        assign_new_partitions("t", {1: (1,)}, no_racks(1), 3)
