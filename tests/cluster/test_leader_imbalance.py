"""The controller's periodic imbalance check: which partitions go back to their preferred
leaders, by Kafka's per-broker ratio and percentage."""

from __future__ import annotations

from herdless.cluster.layout import PartitionState
from herdless.cluster.leader_imbalance import (
    PartitionLeadership,
    imbalance_ratio,
    partitions_to_rebalance,
)

LIVE = {1, 2, 3}


def led(
    partition: int, replicas: tuple[int, ...], leader: int, isr: tuple[int, ...] = ()
) -> PartitionLeadership:
    state = PartitionState(leader=leader, leader_epoch=3, isr=isr or replicas, controller_epoch=1)
    return PartitionLeadership("t", partition, replicas, state)


def test_the_ratio_is_the_share_of_a_preferred_leaders_partitions_led_by_others() -> None:
    partitions = [led(0, (1, 2, 3), 2), led(1, (1, 2, 3), 1), led(2, (2, 3, 1), 2)]
    assert imbalance_ratio(partitions) == {1: 0.5, 2: 0.0}


def test_a_broker_over_the_percentage_gets_back_every_partition_it_can_lead() -> None:
    partitions = [led(0, (1, 2, 3), 2), led(1, (1, 2, 3), 3), led(2, (2, 3, 1), 2)]
    chosen = partitions_to_rebalance(partitions, LIVE, 10)
    assert [p.partition for p in chosen] == [0, 1]


def test_a_broker_at_or_under_the_percentage_is_left_alone() -> None:
    # 1 of 10 led by another: 10%, not over it.
    partitions = [led(i, (1, 2, 3), 1) for i in range(9)] + [led(9, (1, 2, 3), 2)]
    assert partitions_to_rebalance(partitions, LIVE, 10) == []
    assert [p.partition for p in partitions_to_rebalance(partitions, LIVE, 9)] == [9]


def test_a_preferred_leader_out_of_the_isr_or_dead_waits_for_a_later_check() -> None:
    partitions = [led(0, (1, 2, 3), 2, isr=(2, 3)), led(1, (1, 2, 3), 2)]
    assert [p.partition for p in partitions_to_rebalance(partitions, LIVE, 10)] == [1]
    assert partitions_to_rebalance(partitions, {2, 3}, 10) == []
