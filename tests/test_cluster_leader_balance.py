"""Leader balance in a three-broker cluster with RF-3 topics, as Kafka operators rely on:
a broker that restarts leads its preferred partitions again within the imbalance check
interval, and SIGTERM of a broker moves its leaderships before it stops, so an acks=all
producer sees no failed send and no stall.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.checker import Writer
from tests.support.cluster import ClusterProcesses, running_cluster, verify_acknowledged

PARTITIONS = 6
# Short, so that the test waits seconds for the check Kafka runs every 300.
CHECK_INTERVAL_S = 3


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with running_cluster(
        tmp_path_factory.mktemp("leader-balance"),
        **{
            "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": str(CHECK_INTERVAL_S),
        },
    ) as processes:
        yield processes


@pytest.fixture
def cluster(shared_cluster: ClusterProcesses) -> ClusterProcesses:
    shared_cluster.restore()
    return shared_cluster


def leaders(cluster: ClusterProcesses, topic: str) -> dict[int, int]:
    return {p: m.leader for p, m in cluster.metadata(topic).topics[topic].partitions.items()}


def preferred_leaders(cluster: ClusterProcesses, topic: str) -> dict[int, int]:
    partitions = cluster.metadata(topic).topics[topic].partitions
    return {p: m.replicas[0] for p, m in partitions.items()}


def test_a_restarted_broker_leads_its_preferred_partitions_again_within_the_interval(
    cluster: ClusterProcesses,
) -> None:
    cluster.create_topic("balanced", PARTITIONS, 3)
    preferred = preferred_leaders(cluster, "balanced")
    cluster.wait_for(lambda m: leaders(cluster, "balanced") == preferred, what="first leaders")
    victim = preferred[0]
    cluster.kill(victim)
    cluster.wait_for(
        lambda m: victim not in leaders(cluster, "balanced").values(), what="leaders moved off"
    )
    cluster.brokers[victim].start()
    cluster.wait_serving("balanced")
    back_at = time.monotonic()
    # The victim is back in every ISR: the next check hands its partitions back.
    cluster.wait_for(
        lambda m: leaders(cluster, "balanced") == preferred,
        timeout=CHECK_INTERVAL_S + 10,
        what="every partition led by its preferred leader again",
    )
    assert time.monotonic() - back_at <= CHECK_INTERVAL_S + 2


def test_sigterm_of_a_broker_under_acks_all_produce_fails_and_stalls_nothing(
    cluster: ClusterProcesses,
) -> None:
    cluster.create_topic("steady", PARTITIONS, 3, **{"min.insync.replicas": "2"})
    cluster.wait_serving("steady")
    writer = Writer(cluster.bootstrap, "steady", pause_every=1).start()
    time.sleep(2)
    victim = cluster.leader_of("steady", 0)
    terminated_at = time.monotonic()
    cluster.brokers[victim].stop()  # SIGTERM, and wait for the process to end
    stopped_at = time.monotonic()
    time.sleep(2)
    gap = writer.longest_gap(since=terminated_at - 1)
    acked_after = sum(1 for t in writer.acked_at if t > stopped_at)
    log = cluster.brokers[victim].log_path.read_text()
    cluster.brokers[victim].start()
    verify_acknowledged(cluster, writer, "steady", PARTITIONS)
    assert "controlled shutdown succeeded" in log, log[-3000:]
    assert acked_after > 0
    assert gap < 1.0, f"acknowledgements stalled for {gap:.2f}s"
