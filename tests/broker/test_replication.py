"""The leader's side of replication, driven by hand: followers' fetches, the ISR, and when an
acks=all append may be acknowledged.

A real LogManager on disk and the real ClusterReplicaManager; ZooKeeper's part (the
conditional ISR write) is a function that accepts every write, and both clocks (the wall's
for records, the monotonic one for lag) are one number the test moves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from herdless.broker.replication.cluster_replica_manager import ClusterReplicaManager
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.replica_manager import ACKS_ALL, PartitionError
from herdless.cluster.layout import PartitionState
from herdless.cluster.metadata_cache import ClusterMetadata
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import build_batch, parse_header
from herdless.storage import LogManager

LEADER, FOLLOWERS = 1, (2, 3)
LAG_MAX_MS = 3000
TOPIC = "orders"


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager(tmp_path / "data", high_watermark_follows_log_end=False)
    manager.open(0)
    manager.create_topic(TOPIC, 4, {"min.insync.replicas": "2"})
    yield manager
    manager.close()


class Leader:
    """Broker 1 leading every partition of TOPIC with replicas 1, 2, 3, all in sync."""

    def __init__(self, logs: LogManager) -> None:
        self.logs = logs
        self.clock = Clock()
        self.session_provable = True
        self.isr_writes: list[tuple[int, tuple[int, ...]]] = []
        self.replicas = ClusterReplicaManager(
            logs,
            Durability(self.clock),
            self.clock,
            LEADER,
            ClusterMetadata(),
            lambda: self.session_provable,
            self._write_isr,
            LAG_MAX_MS,
            monotonic_clock=self.clock,
        )
        for index in range(4):
            partition_log = logs.partition(TOPIC, index)
            assert partition_log is not None
            self.replicas.apply_state(
                partition_log, PartitionState(LEADER, 7, (LEADER, *FOLLOWERS), 1), 0, (1, 2, 3)
            )

    async def _write_isr(self, topic: str, index: int, state: PartitionState, version: int) -> int:
        self.isr_writes.append((index, state.isr))
        return version + 1

    def append(self, index: int) -> int:
        """One record appended as the leader with acks=all; the end offset to wait for."""
        partition_log = self.logs.partition(TOPIC, index)
        assert partition_log is not None
        batch = memoryview(build_batch([(b"k", b"v")], self.clock()))
        info = self.replicas.append(partition_log, [(parse_header(batch), batch)], ACKS_ALL)
        return info.last_offset + 1

    def followers_fetch(self, index: int, offset: int) -> None:
        for follower in FOLLOWERS:
            self.replicas.record_follower_fetch(TOPIC, index, follower, offset)

    async def committed(self, index: int, end_offset: int, timeout_ms: int = 30_000) -> ErrorCode:
        partition_log = self.logs.partition(TOPIC, index)
        assert partition_log is not None
        try:
            await self.replicas.committed(partition_log, ACKS_ALL, end_offset, timeout_ms)
        except PartitionError as exc:
            return exc.error_code
        return ErrorCode.NONE


def test_acks_all_is_acknowledged_once_every_in_sync_replica_has_the_records(
    logs: LogManager,
) -> None:
    async def main() -> None:
        leader = Leader(logs)
        end = leader.append(0)
        waiting = asyncio.ensure_future(leader.committed(0, end))
        await asyncio.sleep(0.01)
        assert not waiting.done(), "answered before the followers had the record"
        leader.followers_fetch(0, end)
        assert await asyncio.wait_for(waiting, 5) is ErrorCode.NONE

    asyncio.run(main())


def test_a_request_through_an_isr_shrink_gets_no_ok_for_any_partition(logs: LogManager) -> None:
    """One produce request for four partitions, answered one partition after another as the
    Produce handler does, while the followers stop fetching and the ISR shrinks to the
    leader alone. Once the shrink is written the high watermark passes every partition's
    records, so the later partitions need not wait at all: each must still be refused,
    because only the leader holds what would be acknowledged."""

    async def main() -> list[ErrorCode]:
        leader = Leader(logs)
        ends = [leader.append(index) for index in range(4)]
        answers: list[ErrorCode] = []

        async def answer_in_order() -> None:
            for index, end in enumerate(ends):
                answers.append(await leader.committed(index, end))

        answering = asyncio.ensure_future(answer_in_order())
        await asyncio.sleep(0.01)
        assert answers == [], "answered before the followers had the records"
        leader.clock.ms += LAG_MAX_MS + 1
        leader.replicas.shrink_lagging()
        await asyncio.wait_for(answering, 5)
        assert {isr for _, isr in leader.isr_writes} == {(LEADER,)}
        return answers

    answers = asyncio.run(main())
    assert answers == [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND] * 4, answers


def test_an_append_before_the_shrink_answered_after_it_is_refused(logs: LogManager) -> None:
    """No wait at all: the ISR shrank and the high watermark passed the records before the
    answer was asked for."""

    async def main() -> ErrorCode:
        leader = Leader(logs)
        end = leader.append(2)
        leader.clock.ms += LAG_MAX_MS + 1
        leader.replicas.shrink_lagging()
        await asyncio.sleep(0.01)  # the ISR write completes
        partition_log = logs.partition(TOPIC, 2)
        assert partition_log is not None and partition_log.high_watermark >= end
        return await leader.committed(2, end)

    assert asyncio.run(main()) is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_a_leader_that_can_no_longer_prove_its_session_stops_waiting_for_its_followers(
    logs: LogManager,
) -> None:
    """Cut from ZooKeeper, the leader refuses its followers' fetches, so they can never
    release a produce waiting for them: the wait ends when the lease does, with
    NOT_LEADER_OR_FOLLOWER (the producer retries at the new leader), not at the request's
    timeout."""

    async def main() -> tuple[ErrorCode, float]:
        leader = Leader(logs)
        end = leader.append(1)
        waiting = asyncio.ensure_future(leader.committed(1, end, timeout_ms=20_000))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        leader.session_provable = False
        lapsed = asyncio.get_running_loop().time()
        error = await asyncio.wait_for(waiting, 5)
        return error, asyncio.get_running_loop().time() - lapsed

    error, after_s = asyncio.run(main())
    assert error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert after_s < 1.0, after_s


def test_followers_are_not_blamed_for_the_time_the_leader_could_not_prove_its_session(
    logs: LogManager,
) -> None:
    """While its session is unproven the leader refuses its followers' fetches. Once it is
    proven again, a lag check that comes before their next fetch must not take that gap
    for their lag and drop them all from the ISR."""

    async def main() -> tuple[list[object], list[object]]:
        leader = Leader(logs)
        for index in range(4):
            leader.followers_fetch(index, 0)
        leader.session_provable = False
        leader.clock.ms += 1000
        leader.replicas.shrink_lagging()
        leader.clock.ms += 10_000  # far past replica.lag.time.max.ms
        leader.session_provable = True
        leader.clock.ms += 500
        leader.replicas.shrink_lagging()
        await asyncio.sleep(0.01)
        right_after = list(leader.isr_writes)
        leader.clock.ms += LAG_MAX_MS + 1  # followers that still fetch nothing lag now
        leader.replicas.shrink_lagging()
        await asyncio.sleep(0.01)
        return right_after, list(leader.isr_writes)

    right_after, later = asyncio.run(main())
    assert right_after == [], right_after
    # A full lag after the session came back, silent followers do leave the ISRs.
    assert sorted(later) == [(index, (LEADER,)) for index in range(4)], later
