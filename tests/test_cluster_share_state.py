"""The share coordinator on a three-broker cluster, reached through the Persister as a
share partition's leader on another broker reaches it: FindCoordinator names the leader
of the key's `__share_group_state` partition, the state RPCs go there, and when that
broker is SIGKILLed a warm standby takes over with every acknowledged write, while the
persister retries through the move."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from herdless.broker.coordinators.share_coordinator import ShareCoordinator
from herdless.broker.peers.connection import PeerConnection
from herdless.broker.share.coordinator_persister import CoordinatorPersister
from herdless.broker.topics.topic_admin import TopicAdmin
from herdless.cluster.metadata import BrokerEndpoint
from herdless.coordinator.share_state import (
    SHARE_GROUP_STATE_TOPIC,
    PartitionState,
    RecordState,
    SharePartitionKey,
    ShareStateError,
    StateBatch,
    coordinator_key,
    share_state_partition,
)
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from tests.support.cluster import ClusterProcesses, running_cluster

TIMEOUT_S = 60
STATE_PARTITIONS = 6  # share.coordinator.state.topic.num.partitions of the cluster
SHARE_KEY_TYPE = 2
ACK, ARC, AVAILABLE = RecordState.ACKNOWLEDGED, RecordState.ARCHIVED, RecordState.AVAILABLE


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    base: Path = tmp_path_factory.mktemp("cluster-share-state")
    with running_cluster(base) as processes:
        yield processes


class NoShards:
    """The test process as a broker that leads no partition of the state topic: every
    call the persister makes goes over the wire to the partition's leader."""

    standalone = False

    def partition(self, key: SharePartitionKey) -> int:
        return share_state_partition(key, STATE_PARTITIONS)

    def coordinating(self) -> list[int]:
        return []


def persister(cluster: ClusterProcesses) -> CoordinatorPersister:
    def leader_of(topic: str, partition: int) -> BrokerEndpoint | None:
        try:
            leader = cluster.leader_of(topic, partition, timeout=1)
        except Exception:
            return None  # no leader yet: the persister tries again
        process = cluster.brokers[leader]
        return BrokerEndpoint(leader, process.host, process.port)

    return CoordinatorPersister(
        cast(ShareCoordinator, NoShards()),
        node_id=0,  # no broker of the cluster
        leader_of=leader_of,
        topic_exists=lambda topic: True,  # made by FindCoordinator below
        topics=cast(TopicAdmin, None),
        replication_factor=3,
        timeout_s=TIMEOUT_S,
    )


def find_coordinator(cluster: ClusterProcesses, key: SharePartitionKey) -> int:
    """The broker FindCoordinator names for the key, once the state topic serves."""
    process = next(p for p in cluster.brokers.values() if p.alive())
    deadline = time.monotonic() + TIMEOUT_S

    async def ask() -> Any:
        connection = PeerConnection(process.host, process.port, "share-tests", TIMEOUT_S)
        try:
            return await connection.request(
                ApiKey.FIND_COORDINATOR,
                6,
                key_type=SHARE_KEY_TYPE,
                coordinator_keys=[coordinator_key(key)],
            )
        finally:
            connection.close()

    while True:
        (found,) = asyncio.run(ask()).coordinators
        if found.error_code == ErrorCode.NONE:
            return int(found.node_id)
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def test_state_written_through_the_persister_survives_its_coordinator_killed(
    cluster: ClusterProcesses,
) -> None:
    key = SharePartitionKey("share-group", uuid.uuid4(), 0)
    coordinator = find_coordinator(cluster, key)
    state_partition = share_state_partition(key, STATE_PARTITIONS)
    assert coordinator == cluster.leader_of(SHARE_GROUP_STATE_TOPIC, state_partition)
    cluster.wait_serving(SHARE_GROUP_STATE_TOPIC)
    expected = (StateBatch(3, 4, ACK, 1), StateBatch(5, 5, ARC, 5), StateBatch(6, 9, AVAILABLE, 1))

    async def before_the_kill() -> PartitionState:
        store = persister(cluster)
        try:
            await store.initialize(key, 1, 0)
            assert (await store.read(key, 1)).start_offset == 0
            await store.write(key, 1, 1, -1, (StateBatch(0, 9, AVAILABLE, 1),))
            await store.write(key, 1, 1, -1, (StateBatch(0, 4, ACK, 1),))
            await store.write(key, 1, 1, -1, (StateBatch(5, 5, ARC, 5),))
            await store.write(key, 1, 1, 3, ())
            return await store.read(key, 1)
        finally:
            store.close()

    assert asyncio.run(before_the_kill()) == PartitionState(1, 3, 1, expected)

    cluster.kill(coordinator)

    async def after_the_kill() -> tuple[PartitionState, int, PartitionState]:
        store = persister(cluster)
        try:
            # The share partition's new leader reads first, with its new leader epoch,
            # retrying until a standby of the state partition serves it.
            state = await store.read(key, 2)
            with pytest.raises(ShareStateError) as fenced:
                await store.write(key, 1, 1, -1, (StateBatch(6, 6, ACK, 1),))
            await store.write(key, 1, 2, -1, (StateBatch(6, 6, ACK, 2),))
            return state, fenced.value.error_code, await store.read_summary(key, 2)
        finally:
            store.close()

    state, fenced_code, summary = asyncio.run(after_the_kill())
    assert state == PartitionState(1, 3, 2, expected)
    assert fenced_code == ErrorCode.FENCED_LEADER_EPOCH
    assert summary == PartitionState(1, 3, 2)
    new_coordinator = cluster.leader_of(SHARE_GROUP_STATE_TOPIC, state_partition)
    assert new_coordinator != coordinator
    assert find_coordinator(cluster, key) == new_coordinator
