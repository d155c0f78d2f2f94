"""Which partitions the controller's periodic imbalance check hands back to their
preferred leaders, as Kafka's checkAndTriggerAutoLeaderRebalance decides it.

Pure. A broker is the preferred leader of the partitions whose assignment it heads; its
imbalance is the share of those it does not lead. Only a broker whose imbalance is over
leader.imbalance.per.broker.percentage gets its partitions back, and of those only the
ones it can lead now (alive and in the ISR): a broker that has just restarted and not yet
caught up is left for a later check.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from herdless.cluster.election import Offline, elect_preferred_leader
from herdless.cluster.layout import PartitionState


@dataclass(frozen=True, slots=True)
class PartitionLeadership:
    topic: str
    partition: int
    # The assignment, the preferred leader first.
    replicas: tuple[int, ...]
    state: PartitionState


def imbalance_ratio(partitions: Iterable[PartitionLeadership]) -> dict[int, float]:
    """Each preferred leader's share of its partitions led by another broker."""
    preferred: dict[int, list[PartitionLeadership]] = defaultdict(list)
    for p in partitions:
        if p.replicas:
            preferred[p.replicas[0]].append(p)
    return {
        broker: sum(1 for p in led if p.state.leader != broker) / len(led)
        for broker, led in preferred.items()
    }


def partitions_to_rebalance(
    partitions: Iterable[PartitionLeadership],
    live_brokers: Collection[int],
    percentage: int,
) -> list[PartitionLeadership]:
    """The partitions a preferred election should move, in topic and partition order."""
    partitions = list(partitions)
    ratios = imbalance_ratio(partitions)
    over = {broker for broker, ratio in ratios.items() if ratio > percentage / 100}
    chosen = [
        p
        for p in partitions
        if p.replicas
        and p.replicas[0] in over
        and p.state.leader != p.replicas[0]
        and not isinstance(
            elect_preferred_leader(p.replicas, p.state, live_brokers, p.state.controller_epoch),
            Offline,
        )
    ]
    return sorted(chosen, key=lambda p: (p.topic, p.partition))
