"""The coordinator runtime over real partition logs: loading, durability order, load-in-progress."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from herdless.broker.clock import now_ms
from herdless.broker.durability import Durability
from herdless.broker.group_coordinator import CoordinatorError, GroupCoordinator
from herdless.broker.replicas import ReplicaManager
from herdless.coordinator import CoordinatorConfig
from herdless.coordinator import messages as m
from herdless.protocol.errors import ErrorCode
from herdless.storage import LogConfig, LogManager, PartitionLog

PARTITIONS = 4


class GatedDurability(Durability):
    """The broker's flush policy with a gate that can hold fsyncs back."""

    def __init__(self) -> None:
        super().__init__(now_ms)
        self.flush_gate = asyncio.Event()
        self.flush_gate.set()
        self.flushes = 0

    async def flush(self, partition_log: PartitionLog) -> None:
        await self.flush_gate.wait()
        partition_log.flush()
        self.flushes += 1


class BrokerStub:
    """What the runtime uses of the broker: real logs, and a flush it can hold back."""

    def __init__(self, data_dir: Path, flush_messages: int | None = None) -> None:
        configs = {} if flush_messages is None else {"flush.messages": str(flush_messages)}
        self.logs = LogManager(data_dir, LogConfig.from_topic_configs(configs))
        self.logs.open(0)
        self.durability = GatedDurability()
        self.replicas = ReplicaManager(self.logs, self.durability, now_ms)


def commit(group: str, offsets: dict[int, int]) -> Any:
    request = m.OffsetCommitRequest(
        group, (m.CommitTopic("t", tuple(m.CommitPartition(p, o) for p, o in offsets.items())),)
    )
    return lambda shard, token, now: shard.offset_commit(request, token, now)


def fetch(group: str) -> Any:
    request = m.OffsetFetchRequest(group)
    return lambda shard, token, now: shard.offset_fetch(request, token, now)


def committed(response: m.OffsetFetchResponse) -> dict[int, int]:
    return {p.partition: p.offset for t in response.topics for p in t.partitions}


def coordinator(broker: BrokerStub) -> GroupCoordinator:
    config = CoordinatorConfig(initial_rebalance_delay_ms=0)
    return GroupCoordinator(broker.logs, broker.replicas, config, PARTITIONS)


def test_commits_survive_a_restart_by_replay(tmp_path: Path) -> None:
    async def first_life() -> None:
        broker = BrokerStub(tmp_path)
        groups = coordinator(broker)
        groups.start()
        await groups.wait_loaded()
        for i in range(20):
            await groups.run(f"g{i}", commit(f"g{i}", {0: i, 1: i * 10}))
        await groups.run("g3", commit("g3", {0: 333}))  # a newer commit wins over the older
        groups.close()
        broker.logs.close()

    async def second_life() -> dict[str, dict[int, int]]:
        broker = BrokerStub(tmp_path)
        groups = coordinator(broker)
        groups.start()
        await groups.wait_loaded()
        found = {f"g{i}": committed(await groups.run(f"g{i}", fetch(f"g{i}"))) for i in range(20)}
        groups.close()
        broker.logs.close()
        return found

    asyncio.run(first_life())
    found = asyncio.run(second_life())
    assert found["g3"] == {0: 333, 1: 30}
    assert all(found[f"g{i}"] == {0: i, 1: i * 10} for i in range(20) if i != 3)


def test_groups_answer_load_in_progress_until_their_partition_is_replayed(tmp_path: Path) -> None:
    async def main() -> None:
        broker = BrokerStub(tmp_path)
        groups = coordinator(broker)
        groups.start()
        with pytest.raises(CoordinatorError) as raised:
            await groups.run("g", fetch("g"))
        assert raised.value.error_code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await groups.wait_loaded()
        assert committed(await groups.run("g", fetch("g"))) == {}
        groups.close()
        broker.logs.close()

    asyncio.run(main())


def test_no_reply_overtakes_an_earlier_write_that_is_not_yet_durable(tmp_path: Path) -> None:
    """A fetch after a commit waits for the commit's fsync: it cannot reveal what may be lost."""

    async def main() -> list[str]:
        broker = BrokerStub(tmp_path, flush_messages=1)
        groups = coordinator(broker)
        groups.start()
        await groups.wait_loaded()
        broker.durability.flush_gate.clear()
        order: list[str] = []

        async def run(name: str, operation: Any) -> Any:
            response = await groups.run("g", operation)
            order.append(name)
            return response

        committing = asyncio.create_task(run("commit", commit("g", {0: 7})))
        fetching = asyncio.create_task(run("fetch", fetch("g")))
        await asyncio.sleep(0.05)
        assert order == [], "a reply left before the write it follows was durable"
        broker.durability.flush_gate.set()
        await asyncio.gather(committing, fetching)
        assert committed(fetching.result()) == {0: 7}
        assert broker.durability.flushes >= 1
        groups.close()
        broker.logs.close()
        return order

    assert asyncio.run(main()) == ["commit", "fetch"]
