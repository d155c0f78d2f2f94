"""The controller's steps of a partition reassignment (KIP-455), as pure rules."""

from __future__ import annotations

import uuid

from herdless.cluster import reassignment
from herdless.cluster.election import Offline
from herdless.cluster.layout import PartitionState, TopicAssignment
from herdless.cluster.reassignment import ReplicaAssignment


def state(leader: int, isr: tuple[int, ...], epoch: int = 5) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, isr=isr, controller_epoch=1)


def test_a_reassignment_holds_the_target_first_then_the_replicas_leaving() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to((2, 3, 4))
    assert moving == ReplicaAssignment((2, 3, 4, 1), adding=(4,), removing=(1,))
    # As Kafka's originReplicas: in the order of the full set (a cancel keeps it).
    assert moving.origin == (2, 3, 1)
    assert moving.target == (2, 3, 4)
    assert moving.reassigning
    # To the replicas it has, in their order: nothing to do.
    assert not ReplicaAssignment((1, 2)).reassign_to((1, 2)).reassigning


def test_a_new_target_replaces_one_in_progress_from_the_original_replicas() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to((2, 3, 4))
    assert moving.reassign_to((3, 5)) == ReplicaAssignment(
        (3, 5, 2, 1), adding=(5,), removing=(2, 1)
    )
    assert moving.revert() == ReplicaAssignment((2, 3, 1))


def test_starting_bumps_the_leader_epoch_and_keeps_leader_and_isr() -> None:
    started = reassignment.started_state(state(1, (1, 2, 3)), controller_epoch=7)
    assert (started.leader, started.isr, started.leader_epoch) == (1, (1, 2, 3), 6)
    assert started.controller_epoch == 7


def test_completion_waits_for_every_target_replica_in_the_isr() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to((2, 3, 4))
    assert reassignment.completed(moving, state(2, (1, 2, 3)), {1, 2, 3, 4}, 1) is None
    done = reassignment.completed(moving, state(2, (1, 2, 3, 4)), {1, 2, 3, 4}, 1)
    assert done == PartitionState(leader=2, leader_epoch=6, isr=(2, 3, 4), controller_epoch=1)


def test_a_leader_that_leaves_gives_way_to_the_first_target_replica_live_and_in_sync() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to((4, 3, 2))
    done = reassignment.completed(moving, state(1, (1, 2, 3, 4)), {1, 2, 3, 4}, 1)
    assert isinstance(done, PartitionState)
    assert (done.leader, done.isr) == (4, (2, 3, 4))
    # The first target replica is not live: the next one leads.
    done = reassignment.completed(moving, state(1, (1, 2, 3, 4)), {1, 2, 3}, 1)
    assert isinstance(done, PartitionState)
    assert done.leader == 3


def test_growing_the_replicas_completes_only_once_the_new_one_is_in_sync() -> None:
    growing = ReplicaAssignment((1, 2)).reassign_to((1, 2, 3))
    assert growing.removing == ()
    assert reassignment.completed(growing, state(1, (1, 2)), {1, 2, 3}, 1) is None
    done = reassignment.completed(growing, state(1, (1, 2, 3)), {1, 2, 3}, 1)
    assert isinstance(done, PartitionState)
    assert done.isr == (1, 2, 3)


def test_no_target_replica_may_lead() -> None:
    moving = ReplicaAssignment((1,)).reassign_to((4,))
    assert isinstance(reassignment.completed(moving, state(1, (1, 4)), {1}, 1), Offline)


def test_cancelling_drops_the_joining_replicas_and_a_leader_among_them() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to((4, 5, 6))
    back = reassignment.cancelled(moving, state(4, (2, 1, 4)), {1, 2, 3, 4, 5, 6}, 1)
    assert back == PartitionState(leader=1, leader_epoch=6, isr=(2, 1), controller_epoch=1)
    # The leader stays where it is original.
    back = reassignment.cancelled(moving, state(2, (1, 2, 3, 4)), {1, 2, 3, 4, 5, 6}, 1)
    assert isinstance(back, PartitionState)
    assert (back.leader, back.isr) == (2, (1, 2, 3))


def test_targets_kafka_refuses() -> None:
    brokers = {1, 2, 3}
    assert reassignment.invalid_target((), brokers) == "The replica list is empty."
    assert "duplicate" in (reassignment.invalid_target((1, 1), brokers) or "")
    assert "non-live brokers: [9]" in (reassignment.invalid_target((1, 9), brokers) or "")
    assert reassignment.invalid_target((3, 1), brokers) is None


def test_one_partition_of_a_topic_is_replaced() -> None:
    topic = TopicAssignment("t", uuid.uuid4(), {0: (1, 2), 1: (2, 3)})
    moving = reassignment.with_partition(topic, 0, ReplicaAssignment((1, 2)).reassign_to((3, 2)))
    assert moving.replicas == {0: (3, 2, 1), 1: (2, 3)}
    assert (moving.adding, moving.removing) == ({0: (3,)}, {0: (1,)})
    assert reassignment.of(moving, 0).target == (3, 2)
    done = reassignment.with_partition(moving, 0, ReplicaAssignment((3, 2)))
    assert done == TopicAssignment("t", topic.topic_id, {0: (3, 2), 1: (2, 3)})
