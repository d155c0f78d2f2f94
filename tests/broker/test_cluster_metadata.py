"""The metadata view a cluster broker answers Metadata and FindCoordinator from: a broker that
cannot prove its ZooKeeper session alive names itself neither leader nor controller."""

from __future__ import annotations

import uuid

from herdless.cluster.layout import BrokerRegistration, PartitionState, TopicAssignment, Versioned
from herdless.cluster.metadata_cache import NO_LEADER, ClusterMetadata

SELF = 1


def view(session_alive: list[bool]) -> ClusterMetadata:
    """Brokers 1-3; broker 1 (this one) leads partition 0 and is the controller, broker 2
    leads partition 1."""
    metadata = ClusterMetadata()
    metadata.vouch_for_self(SELF, lambda: session_alive[0])
    metadata.set_brokers([BrokerRegistration(i, f"10.0.0.{i}", 9092) for i in (1, 2, 3)])
    metadata.set_topic("t", TopicAssignment("t", uuid.uuid4(), {0: (1, 2, 3), 1: (2, 3, 1)}))
    metadata.set_partition_state("t", 0, Versioned(PartitionState(1, 4, (1, 2, 3), 1), 0))
    metadata.set_partition_state("t", 1, Versioned(PartitionState(2, 4, (1, 2, 3), 1), 0))
    metadata.controller_id = SELF
    return metadata


def leaders(metadata: ClusterMetadata) -> list[int]:
    topic = metadata.topic("t")
    assert topic is not None
    return [p.leader for p in topic.partitions]


def test_a_broker_with_a_provable_session_names_itself() -> None:
    metadata = view([True])
    assert leaders(metadata) == [1, 2]
    assert metadata.controller_id == SELF
    leader = metadata.leader("t", 0)
    assert leader is not None and leader.node_id == SELF


def test_a_broker_that_cannot_prove_its_session_names_only_others() -> None:
    alive = [False]
    metadata = view(alive)
    assert leaders(metadata) == [NO_LEADER, 2]
    assert metadata.controller_id == NO_LEADER
    assert metadata.leader("t", 0) is None
    assert metadata.leader("t", 1) is not None
    # Not even among the brokers: clients (librdkafka purges brokers that metadata no
    # longer lists) stop asking it, as they will once its session expires anyway.
    assert [b.node_id for b in metadata.advertised_brokers()] == [2, 3]
    # Still live as far as it knows: topics created here may place replicas on it.
    assert [b.node_id for b in metadata.brokers()] == [1, 2, 3]
    alive[0] = True
    assert leaders(metadata) == [1, 2]
    assert [b.node_id for b in metadata.advertised_brokers()] == [1, 2, 3]
    assert metadata.controller_id == SELF


def test_another_broker_is_named_whatever_this_one_knows_of_itself() -> None:
    metadata = view([False])
    metadata.controller_id = 3
    assert metadata.controller_id == 3
