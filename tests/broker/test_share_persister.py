"""The Persister on one broker, over real partition logs: the first call creates
`__share_group_state`, waits out its loading, and runs on this broker's own shards; the
state survives a restart by replay; a fenced call is the caller's ShareStateError."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import cast

import pytest

from herdless.broker.coordinators.coordinator_host import CoordinatorHost
from herdless.broker.coordinators.share_coordinator import ShareCoordinator
from herdless.broker.share.coordinator_persister import CoordinatorPersister
from herdless.broker.share.persister import Persister
from herdless.broker.topics.topic_admin import TopicAdmin
from herdless.coordinator.share_state import (
    SHARE_GROUP_STATE_TOPIC,
    PartitionState,
    RecordState,
    ShareCoordinatorConfig,
    SharePartitionKey,
    ShareStateError,
    StateBatch,
)
from herdless.protocol.errors import ErrorCode
from tests.broker.test_group_coordinator import BrokerStub

KEY = SharePartitionKey("g", uuid.UUID(int=42), 2)
ACK, AVAILABLE = RecordState.ACKNOWLEDGED, RecordState.AVAILABLE
CONFIG = ShareCoordinatorConfig(num_partitions=4, snapshot_update_records_per_snapshot=2)


class OneBroker:
    def __init__(self, data_dir: Path) -> None:
        self.broker = BrokerStub(data_dir)
        self.host = CoordinatorHost(self.broker.logs, self.broker.replicas)
        self.shares = ShareCoordinator(self.host, CONFIG, standalone=True)
        self.shares.resume()
        self.persister = CoordinatorPersister(
            self.shares,
            node_id=0,
            leader_of=lambda topic, partition: None,
            topic_exists=lambda topic: topic in self.broker.logs.topics,
            topics=cast(TopicAdmin, None),
            replication_factor=1,
            timeout_s=10,
        )

    def close(self) -> None:
        self.persister.close()
        self.host.close()
        self.broker.logs.close()


def test_the_state_is_kept_on_this_brokers_shard_and_survives_a_restart(tmp_path: Path) -> None:
    async def first_life() -> PartitionState:
        one = OneBroker(tmp_path)
        store: Persister = one.persister
        try:
            assert SHARE_GROUP_STATE_TOPIC not in one.broker.logs.topics
            never = await store.read(KEY, 0)
            assert not never.initialized
            assert SHARE_GROUP_STATE_TOPIC in one.broker.logs.topics
            await store.initialize(KEY, 1, 10)
            for first in range(10, 20, 2):
                await store.write(KEY, 1, 0, -1, (StateBatch(first, first + 1, AVAILABLE, 1),))
            await store.write(KEY, 1, 0, 12, (StateBatch(12, 15, ACK, 1),))
            return await store.read(KEY, 0)
        finally:
            one.close()

    async def second_life() -> tuple[PartitionState, PartitionState]:
        one = OneBroker(tmp_path)
        try:
            return await one.persister.read(KEY, 1), await one.persister.read_summary(KEY, -1)
        finally:
            one.close()

    batches = (StateBatch(12, 15, ACK, 1), StateBatch(16, 19, AVAILABLE, 1))
    assert asyncio.run(first_life()) == PartitionState(1, 12, 0, batches)
    state, summary = asyncio.run(second_life())
    assert state == PartitionState(1, 12, 1, batches)
    assert summary == PartitionState(1, 12, 1)


def test_a_fenced_call_raises_with_kafkas_error_and_delete_forgets(tmp_path: Path) -> None:
    async def run() -> tuple[int, int, PartitionState]:
        one = OneBroker(tmp_path)
        try:
            await one.persister.initialize(KEY, 3, 0)
            await one.persister.read(KEY, 5)
            with pytest.raises(ShareStateError) as stale_leader:
                await one.persister.write(KEY, 3, 4, -1, ())
            with pytest.raises(ShareStateError) as stale_state:
                await one.persister.initialize(KEY, 2, 0)
            await one.persister.delete(KEY)
            gone = await one.persister.read(KEY, -1)
            return stale_leader.value.error_code, stale_state.value.error_code, gone
        finally:
            one.close()

    leader_code, state_code, gone = asyncio.run(run())
    assert leader_code == ErrorCode.FENCED_LEADER_EPOCH
    assert state_code == ErrorCode.FENCED_STATE_EPOCH
    assert not gone.initialized
