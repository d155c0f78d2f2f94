"""Rack-aware server assignment (KIP-881's rules) in one shard with a fake clock.

Members say their rack in ConsumerGroupHeartbeat's RackId (librdkafka's client.rack);
the topics image says the racks of each partition's replicas. Topic t's six
partitions have their replicas in one rack each, two per rack a, b and c: a member
in rack b is given the two whose replica is in b, so it reads within its rack,
under both server assignors. Racks that tell nothing apart (every partition in the
same racks, or no member in any of them) leave the assignment rack-blind, as Kafka
4.x's assignors always are.
"""

from __future__ import annotations

import pytest

from herdless.coordinator.consumer_records import ConsumerGroupPartitionMetadataKey
from herdless.coordinator.topic_metadata import Partitions, TopicMetadata, TopicsImage
from tests.coordinator.context import TOPIC_T, TOPIC_U, Context
from tests.coordinator.test_consumer_groups import kinds, parts

ONE_RACK_EACH = tuple(frozenset({rack}) for rack in "aabbcc")


def racked(ctx: Context, partition_racks: tuple[frozenset[str], ...]) -> None:
    ctx.topics = TopicsImage(
        [TopicMetadata(TOPIC_T.topic_id, "t", TOPIC_T.num_partitions, partition_racks), TOPIC_U]
    )


def join(ctx: Context, racks: dict[str, str | None], **fields: str) -> dict[str, Partitions]:
    """Members join in the order given, each with its rack; the group's target then."""
    for member_id, rack in racks.items():
        ctx.consumer_heartbeat("g", member_id, 0, rack_id=rack, **fields)
    return dict(ctx.shard.consumer.groups["g"].target_assignment)


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_each_member_is_given_the_partitions_in_its_rack(assignor: str) -> None:
    ctx = Context()
    racked(ctx, ONE_RACK_EACH)
    # Joined in an order that a rack-blind assignor would not match to the racks.
    target = join(ctx, {"m1": "c", "m2": "a", "m3": "b"}, server_assignor=assignor)
    assert target == {
        "m1": parts(TOPIC_T, 4, 5),
        "m2": parts(TOPIC_T, 0, 1),
        "m3": parts(TOPIC_T, 2, 3),
    }


def test_a_member_without_a_rack_takes_what_the_others_leave() -> None:
    """It matches every partition: the members with racks keep theirs, it takes the rest
    (and, like any member, keeps what it holds: stickiness is not undone for it)."""
    ctx = Context()
    racked(ctx, ONE_RACK_EACH)
    target = join(ctx, {"m2": "c", "m3": "a", "m1": None})
    assert target["m2"] == parts(TOPIC_T, 4, 5)
    assert target["m3"] == parts(TOPIC_T, 0, 1)
    assert target["m1"] == parts(TOPIC_T, 2, 3)


def test_balance_comes_before_racks() -> None:
    """Every member in rack a: still two partitions each, whatever their racks."""
    ctx = Context()
    racked(ctx, ONE_RACK_EACH)
    target = join(ctx, {"m1": "a", "m2": "a", "m3": "a"})
    assert sorted(len(p) for p in target.values()) == [2, 2, 2]
    assert parts(TOPIC_T, 0, 1) <= target["m1"] | target["m2"] | target["m3"]


@pytest.mark.parametrize(
    "partition_racks",
    [tuple(frozenset({"a", "b", "c"}) for _ in range(6)), ONE_RACK_EACH],
    ids=["every-partition-in-every-rack", "no-member-in-these-racks"],
)
def test_racks_that_tell_nothing_apart_leave_the_assignment_rack_blind(
    partition_racks: tuple[frozenset[str], ...],
) -> None:
    member_racks = (
        {"m1": "c", "m2": "a", "m3": "b"}
        if len(partition_racks[0]) > 1
        else {"m1": "x", "m2": "y", "m3": "z"}
    )
    blind = Context()
    expected = join(blind, dict.fromkeys(member_racks))
    ctx = Context()
    racked(ctx, partition_racks)
    assert join(ctx, member_racks) == expected


def test_a_change_of_the_partitions_racks_brings_a_new_target() -> None:
    """A reassignment moves partitions 4 and 5 to rack a: the group epoch goes up and
    the member in rack a is given them."""
    ctx = Context()
    racked(ctx, ONE_RACK_EACH)
    join(ctx, {"m1": "a", "m2": "b"})
    group = ctx.shard.consumer.groups["g"]
    before = group.group_epoch
    assert group.target_of("m1") == parts(TOPIC_T, 0, 1, 4)

    racked(ctx, tuple(frozenset({rack}) for rack in "aabbaa"))
    _, result = ctx.consumer_heartbeat("g", "m2", group.members["m2"].member_epoch)
    assert ConsumerGroupPartitionMetadataKey.__name__ in kinds(result.records)
    assert group.group_epoch == before + 1
    assert group.target_of("m1") == parts(TOPIC_T, 0, 1, 4)
    assert group.target_of("m2") == parts(TOPIC_T, 2, 3, 5)
