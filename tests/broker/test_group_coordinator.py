"""The coordinator runtime over real partition logs: loading, durability order, load-in-progress."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from herdless.broker.clock import monotonic_ms, wall_ms
from herdless.broker.coordinators.group_coordinator import (
    CoordinatorError,
    GroupCoordinator,
    ShardState,
)
from herdless.broker.replication.cluster_replica_manager import Role
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.replica_manager import PartitionError, ReplicaManager
from herdless.coordinator import CoordinatorConfig, CoordinatorShard, partition_for
from herdless.coordinator import messages as m
from herdless.coordinator.runtime import TopicPartition
from herdless.protocol.errors import ErrorCode
from herdless.storage import LogConfig, LogManager, PartitionLog

PARTITIONS = 4


class GatedDurability(Durability):
    """The broker's flush policy with a gate that can hold fsyncs back."""

    def __init__(self) -> None:
        super().__init__(monotonic_ms)
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
        self.replicas = ReplicaManager(self.logs, self.durability, wall_ms)


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


# -- standby shards and leadership moves (as in a cluster) ------------------------------


class MovableReplicas(ReplicaManager):
    """What a cluster's replica manager tells the runtime: whether this broker leads."""

    def __init__(self, logs: LogManager, durability: Durability) -> None:
        super().__init__(logs, durability, wall_ms)
        self.leading = True
        # Whether followers acknowledge writes at once (the high watermark follows).
        self.acknowledging = True

    async def committed(
        self, partition_log: PartitionLog, acks: int, end_offset: int, timeout_ms: int
    ) -> None:
        await super().committed(partition_log, acks, end_offset, timeout_ms)
        if self.acknowledging:
            partition_log.set_high_watermark(end_offset)
        while partition_log.high_watermark < end_offset:
            if not self.leading:
                raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            await asyncio.sleep(0.01)

    def leader_log(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Any:
        if not self.leading:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return super().leader_log(topic, partition, current_leader_epoch)

    def leads(self, topic: str, partition: int) -> bool:
        return self.leading and super().leads(topic, partition)


class Replica:
    """One broker's copy of the offsets topic, its high watermark moved by hand."""

    def __init__(self, data_dir: Path, standby: bool = True) -> None:
        self.logs = LogManager(data_dir, LogConfig(), high_watermark_follows_log_end=False)
        self.logs.open(0)
        self.logs.create_topic("__consumer_offsets", PARTITIONS, {"cleanup.policy": "compact"})
        self.replicas = MovableReplicas(self.logs, Durability(monotonic_ms))
        self.groups = GroupCoordinator(
            self.logs, self.replicas, CoordinatorConfig(), PARTITIONS, standby=standby
        )

    def lead(self, group: str) -> None:
        self.replicas.leading = True
        self.groups.on_leadership(OFFSETS, partition_for(group, PARTITIONS), Role.LEADER)

    def follow(self, group: str) -> None:
        self.replicas.leading = False
        self.groups.on_leadership(OFFSETS, partition_for(group, PARTITIONS), Role.FOLLOWER)

    def offsets_log(self, group: str) -> PartitionLog:
        partition_log = self.logs.partition(OFFSETS, partition_for(group, PARTITIONS))
        assert partition_log is not None
        return partition_log

    def close(self) -> None:
        self.groups.close()
        self.logs.close()


def tp_of(group: str) -> TopicPartition:
    return TopicPartition(OFFSETS, partition_for(group, PARTITIONS))


def shard_of(replica: Replica, group: str) -> CoordinatorShard:
    shard = replica.groups.runtime.shard(replica.groups.kind, partition_for(group, PARTITIONS))
    assert shard is not None
    return shard


def leader_and_follower(tmp_path: Path) -> tuple[Replica, Replica]:
    """Two brokers' copies of the offsets topic: the first leads group g's partition."""
    first = Replica(tmp_path / "a")
    second = Replica(tmp_path / "b")
    first.lead("g")
    second.follow("g")
    return first, second


OFFSETS = "__consumer_offsets"


def copy(leader: PartitionLog, follower: PartitionLog, high_watermark: int) -> None:
    """Replicate as a follower's fetch does: batches from its log end, then the HW."""
    data = leader.read(follower.log_end_offset, 1 << 20)
    if data:
        follower.append_as_follower(data, wall_ms())
    follower.set_high_watermark(min(high_watermark, follower.log_end_offset))


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_standby_replays_only_what_is_committed_and_takes_over_at_once(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        first, second = leader_and_follower(tmp_path)
        leader_log, follower_log = first.offsets_log("g"), second.offsets_log("g")
        await settle()
        await first.groups.run("g", commit("g", {0: 1}))
        committed_end = leader_log.log_end_offset
        await first.groups.run("g", commit("g", {0: 2, 1: 5}))
        copy(leader_log, follower_log, committed_end)
        second.groups.on_replicated(follower_log)
        await settle()
        runtime = second.groups.runtime
        # The second commit is on the follower but not yet committed: not replayed.
        assert runtime.applied_offset(tp_of("g")) == committed_end
        assert shard_of(second, "g").offsets.get("g", "t", 0).offset == 1
        with pytest.raises(CoordinatorError) as raised:
            await second.groups.run("g", fetch("g"))
        assert raised.value.error_code is ErrorCode.NOT_COORDINATOR

        # The leader goes; the follower is elected with the uncommitted tail in its log.
        first.follow("g")
        second.lead("g")
        await settle()
        assert runtime.state(tp_of("g")) is ShardState.ACTIVE
        assert runtime.loaded_records(tp_of("g")) == 3  # nothing replayed twice
        assert committed(await second.groups.run("g", fetch("g"))) == {0: 2, 1: 5}
        # The old leader answers nothing from what it had.
        with pytest.raises(CoordinatorError) as raised:
            await first.groups.run("g", fetch("g"))
        assert raised.value.error_code is ErrorCode.NOT_COORDINATOR
        first.close()
        second.close()

    asyncio.run(main())


def test_a_standby_truncated_below_what_it_replayed_starts_again(tmp_path: Path) -> None:
    async def main() -> None:
        first, second = leader_and_follower(tmp_path)
        leader_log, follower_log = first.offsets_log("g"), second.offsets_log("g")
        await settle()
        for offset in range(1, 4):
            await first.groups.run("g", commit("g", {0: offset}))
        copy(leader_log, follower_log, leader_log.log_end_offset)
        second.groups.on_replicated(follower_log)
        await settle()
        runtime = second.groups.runtime
        assert shard_of(second, "g").offsets.get("g", "t", 0).offset == 3
        # An unclean election cut the follower's log below what the standby replayed.
        follower_log.truncate_to(1, wall_ms())
        second.groups.on_replicated(follower_log)
        await settle()
        assert runtime.applied_offset(tp_of("g")) == 1
        assert shard_of(second, "g").offsets.get("g", "t", 0).offset == 1
        first.close()
        second.close()

    asyncio.run(main())


def test_losing_leadership_answers_waiting_requests_and_rebuilds_a_standby(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        replica = Replica(tmp_path)
        replica.lead("g")
        partition_log = replica.offsets_log("g")
        await settle()
        await replica.groups.run("g", commit("g", {0: 4}))
        runtime = replica.groups.runtime
        # A write whose records the followers never acknowledge.
        replica.replicas.acknowledging = False
        held = partition_log.high_watermark
        waiting = asyncio.create_task(replica.groups.run("g", commit("g", {0: 5})))
        await settle()
        assert not waiting.done()
        replica.follow("g")
        with pytest.raises(CoordinatorError) as raised:
            await waiting
        assert raised.value.error_code is ErrorCode.NOT_COORDINATOR
        await settle()
        assert runtime.state(tp_of("g")) is ShardState.STANDBY
        # Rebuilt from the log's start, up to the high watermark only.
        assert runtime.applied_offset(tp_of("g")) == held < partition_log.log_end_offset
        assert shard_of(replica, "g").offsets.get("g", "t", 0).offset == 4
        replica.close()

    asyncio.run(main())


def test_a_parked_join_is_answered_by_the_shard_when_leadership_goes(tmp_path: Path) -> None:
    async def main() -> None:
        replica = Replica(tmp_path)
        replica.lead("g")
        await settle()
        join = m.JoinGroupRequest(
            "g", 10_000, 30_000, "", "consumer", (m.Protocol("range", b""),), api_version=3
        )
        # Parked for the group's initial rebalance delay (3 s by default).
        parked = asyncio.create_task(
            replica.groups.run("g", lambda shard, token, now: shard.join_group(join, token, now))
        )
        await settle()
        assert not parked.done()
        replica.follow("g")
        # The shard's own answer to a join it parked, as for any loss of the partition.
        answer = await parked
        assert isinstance(answer, m.JoinGroupResponse)
        assert answer.error_code is ErrorCode.NOT_COORDINATOR
        replica.close()

    asyncio.run(main())


def test_a_broker_that_cannot_prove_its_leadership_answers_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        replica = Replica(tmp_path)
        replica.lead("g")
        await settle()
        await replica.groups.run("g", commit("g", {0: 4}))
        # Paused past its ZooKeeper session: still the leader it knew, but unproven.
        replica.replicas.leading = False
        with pytest.raises(CoordinatorError) as raised:
            await replica.groups.run("g", fetch("g"))
        assert raised.value.error_code is ErrorCode.NOT_COORDINATOR
        replica.close()

    asyncio.run(main())


def test_without_standby_a_new_leader_loads_its_whole_log(tmp_path: Path) -> None:
    async def main() -> None:
        replica = Replica(tmp_path, standby=False)
        replica.follow("g")
        assert replica.groups.runtime.state(tp_of("g")) is None
        replica.lead("g")
        await settle()
        assert replica.groups.runtime.state(tp_of("g")) is ShardState.ACTIVE
        replica.close()

    asyncio.run(main())
