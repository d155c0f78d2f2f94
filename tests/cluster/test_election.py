"""Partition leader election: each of Kafka's controller rules."""

from __future__ import annotations

from herdless.cluster.election import (
    Offline,
    elect_controlled_shutdown_leader,
    elect_offline_leader,
    elect_preferred_leader,
    initial_state,
    remove_replica_from_isr,
)
from herdless.cluster.layout import NO_LEADER, LeaderRecoveryState, PartitionState

ASSIGNMENT = (1, 2, 3)
EPOCH = 7


def state(leader: int, isr: tuple[int, ...], leader_epoch: int = 4) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=leader_epoch, isr=isr, controller_epoch=5)


# -- new partitions ------------------------------------------------------------------------


def test_new_partition_led_by_first_live_replica_with_every_live_replica_in_isr() -> None:
    assert initial_state(ASSIGNMENT, {2, 3, 9}, EPOCH) == PartitionState(
        leader=2, leader_epoch=0, isr=(2, 3), controller_epoch=EPOCH
    )


def test_new_partition_with_no_live_replica_is_offline() -> None:
    result = initial_state(ASSIGNMENT, {9}, EPOCH)
    assert isinstance(result, Offline)
    assert "no assigned replica is alive" in result.reason


# -- offline partitions --------------------------------------------------------------------


def test_offline_election_takes_first_live_isr_member_in_assignment_order() -> None:
    # 3 is earlier in the ISR, but 2 comes first in the assignment.
    result = elect_offline_leader(ASSIGNMENT, state(1, (3, 1, 2)), {2, 3}, EPOCH)
    assert result == PartitionState(leader=2, leader_epoch=5, isr=(3, 2), controller_epoch=EPOCH)


def test_offline_election_skips_live_replicas_outside_the_isr() -> None:
    result = elect_offline_leader(ASSIGNMENT, state(1, (1, 3)), {2, 3}, EPOCH)
    assert result == PartitionState(leader=3, leader_epoch=5, isr=(3,), controller_epoch=EPOCH)


def test_offline_election_keeps_the_recovery_state_of_a_clean_election() -> None:
    recovering = PartitionState(1, 4, (1, 2), 5, LeaderRecoveryState.RECOVERING)
    result = elect_offline_leader(ASSIGNMENT, recovering, {2}, EPOCH)
    assert isinstance(result, PartitionState)
    assert result.leader_recovery_state is LeaderRecoveryState.RECOVERING


def test_no_live_isr_member_leaves_the_partition_offline() -> None:
    result = elect_offline_leader(ASSIGNMENT, state(1, (1,)), {2, 3}, EPOCH)
    assert isinstance(result, Offline)
    assert "unclean leader election is disabled" in result.reason


def test_unclean_election_takes_first_live_replica_which_leads_alone_and_recovers() -> None:
    result = elect_offline_leader(ASSIGNMENT, state(1, (1,)), {3, 2}, EPOCH, unclean=True)
    assert result == PartitionState(
        leader=2,
        leader_epoch=5,
        isr=(2,),
        controller_epoch=EPOCH,
        leader_recovery_state=LeaderRecoveryState.RECOVERING,
    )


def test_unclean_election_prefers_a_clean_leader_when_there_is_one() -> None:
    result = elect_offline_leader(ASSIGNMENT, state(1, (1, 3)), {2, 3}, EPOCH, unclean=True)
    assert result == PartitionState(leader=3, leader_epoch=5, isr=(3,), controller_epoch=EPOCH)


def test_unclean_election_with_no_live_replica_is_offline() -> None:
    assert isinstance(
        elect_offline_leader(ASSIGNMENT, state(1, (1,)), {9}, EPOCH, unclean=True), Offline
    )


def test_a_partition_without_state_cannot_be_elected() -> None:
    assert isinstance(elect_offline_leader(ASSIGNMENT, None, {1, 2, 3}, EPOCH), Offline)


# -- controlled shutdown -------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_and_drops_the_broker_from_the_isr() -> None:
    result = elect_controlled_shutdown_leader(
        ASSIGNMENT, state(1, (1, 2, 3)), {1, 2, 3}, {1}, EPOCH
    )
    assert result == PartitionState(leader=2, leader_epoch=5, isr=(2, 3), controller_epoch=EPOCH)


def test_controlled_shutdown_of_several_brokers_skips_them_all() -> None:
    result = elect_controlled_shutdown_leader(
        ASSIGNMENT, state(1, (1, 2, 3)), {1, 2, 3}, {1, 2}, EPOCH
    )
    assert result == PartitionState(leader=3, leader_epoch=5, isr=(3,), controller_epoch=EPOCH)


def test_controlled_shutdown_needs_a_live_isr_member_that_stays() -> None:
    assert (
        elect_controlled_shutdown_leader(ASSIGNMENT, state(1, (1, 2)), {1, 3}, {1}, EPOCH) is None
    )
    assert (
        elect_controlled_shutdown_leader(ASSIGNMENT, state(1, (1,)), {1, 2, 3}, {1}, EPOCH) is None
    )


# -- a broker that died --------------------------------------------------------------------


def test_dead_follower_leaves_the_isr_and_the_leader_stays() -> None:
    assert remove_replica_from_isr(state(1, (1, 2, 3)), 2, EPOCH) == PartitionState(
        leader=1, leader_epoch=5, isr=(1, 3), controller_epoch=EPOCH
    )


def test_dead_leader_leaves_no_leader() -> None:
    result = remove_replica_from_isr(state(1, (1, 2)), 1, EPOCH)
    assert result == PartitionState(
        leader=NO_LEADER, leader_epoch=5, isr=(2,), controller_epoch=EPOCH
    )
    assert result is not None and not result.has_leader


def test_isr_is_never_made_empty_the_last_member_stays_and_the_partition_is_offline() -> None:
    result = remove_replica_from_isr(state(1, (1,)), 1, EPOCH)
    assert result == PartitionState(
        leader=NO_LEADER, leader_epoch=5, isr=(1,), controller_epoch=EPOCH
    )


def test_replica_outside_the_isr_needs_no_write() -> None:
    assert remove_replica_from_isr(state(1, (1, 3)), 2, EPOCH) is None


def test_broker_failure_composed_as_the_controller_does_it() -> None:
    # Broker 1 dies leading a partition with ISR [1, 2]: 2 takes over, 1 is out of the ISR.
    before = state(1, (1, 2))
    elected = elect_offline_leader(ASSIGNMENT, before, {2, 3}, EPOCH)
    assert isinstance(elected, PartitionState)
    assert remove_replica_from_isr(elected, 1, EPOCH) is None
    assert (elected.leader, elected.isr, elected.leader_epoch) == (2, (2,), 5)
    # Then 2 dies too: nobody in the ISR is live, so the partition goes offline with 2
    # kept as the last ISR member, one more epoch on.
    assert isinstance(elect_offline_leader(ASSIGNMENT, elected, {3}, EPOCH), Offline)
    offline = remove_replica_from_isr(elected, 2, EPOCH)
    assert offline == PartitionState(NO_LEADER, 6, (2,), EPOCH)
    # 2 comes back: it is in the ISR, so it is elected cleanly.
    assert elect_offline_leader(ASSIGNMENT, offline, {2, 3}, EPOCH) == PartitionState(
        2, 7, (2,), EPOCH
    )


# -- preferred election ---------------------------------------------------------------------


def test_preferred_election_moves_leadership_to_the_first_replica_keeping_the_isr() -> None:
    assert elect_preferred_leader(ASSIGNMENT, state(2, (2, 3, 1)), {1, 2, 3}, EPOCH) == (
        PartitionState(leader=1, leader_epoch=5, isr=(2, 3, 1), controller_epoch=EPOCH)
    )


def test_preferred_election_needs_the_preferred_replica_alive_and_in_the_isr() -> None:
    not_in_isr = elect_preferred_leader(ASSIGNMENT, state(2, (2, 3)), {1, 2, 3}, EPOCH)
    assert isinstance(not_in_isr, Offline)
    assert "not in the ISR" in not_in_isr.reason
    dead = elect_preferred_leader(ASSIGNMENT, state(2, (1, 2, 3)), {2, 3}, EPOCH)
    assert isinstance(dead, Offline)
    assert "not alive" in dead.reason
