"""The broker's decisions over a wall clock that steps, as NTP or `date -s` steps it.

Python's wall clock (time.time, time.time_ns) is stepped an hour either way in the
test process; the monotonic clock and the event loop's run on. Follower lag and the
ISR, group members' sessions, flush.ms and fetch session eviction must not notice.
Each piece is built as the broker builds it and runs on real time, briefly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from herdless.broker.broker import Broker
from herdless.broker.config import BrokerConfig
from herdless.broker.coordinators.group_coordinator import GroupCoordinator
from herdless.broker.handlers.fetch import handle_fetch
from herdless.broker.handlers.fetch_sessions import FetchSessionCache
from herdless.broker.replication.cluster_replica_manager import ClusterReplicaManager
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.replica_manager import PartitionError, ReplicaManager
from herdless.cluster.layout import PartitionState
from herdless.cluster.metadata_cache import ClusterMetadata
from herdless.coordinator import CoordinatorConfig, GroupState
from herdless.coordinator import messages as m
from herdless.protocol.codec import Request
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import build_batch, parse_header
from herdless.storage import LogConfig, LogManager

HOUR_MS = 3_600_000
STEPS = pytest.mark.parametrize("step_ms", [HOUR_MS, -HOUR_MS], ids=["forward", "back"])


class SteppedWallClock:
    """Python's wall clock offset by every step so far; the monotonic clock untouched."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset_ns = 0
        real_time, real_time_ns = time.time, time.time_ns
        monkeypatch.setattr(time, "time", lambda: real_time() + self.offset_ns / 1e9)
        monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + self.offset_ns)

    def step(self, ms: int) -> None:
        self.offset_ns += ms * 1_000_000


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> Iterator[SteppedWallClock]:
    yield SteppedWallClock(monkeypatch)


def wall_ms() -> int:
    """The wall clock as the broker hands it to the logs and the replica manager."""
    return time.time_ns() // 1_000_000


# -- replica lag and the ISR ----------------------------------------------------------------

LAG_MAX_MS = 300


class Leader:
    """Broker 1 leading t-0 with broker 2 in its ISR; ISR writes recorded, not made."""

    def __init__(self, data_dir: Path) -> None:
        self.logs = LogManager(
            data_dir, LogConfig.from_topic_configs({}), high_watermark_follows_log_end=False
        )
        self.logs.open(wall_ms())
        self.isr_writes: list[tuple[int, ...]] = []
        self.replicas = ClusterReplicaManager(
            self.logs,
            Durability(lambda: time.monotonic_ns() // 1_000_000),
            wall_ms,
            1,
            ClusterMetadata(),
            lambda: True,
            self._write_isr,
            LAG_MAX_MS,
        )
        self.log = self.logs.create_topic("t", 1).partitions[0]
        state = PartitionState(leader=1, leader_epoch=1, isr=(1, 2), controller_epoch=1)
        self.replicas.apply_state(self.log, state, 0, (1, 2))

    async def _write_isr(self, topic: str, partition: int, state: PartitionState, v: int) -> int:
        self.isr_writes.append(state.isr)
        return v + 1

    def follower_fetches(self) -> None:
        self.replicas.record_follower_fetch("t", 0, 2, self.log.log_end_offset)

    async def shrink(self) -> list[tuple[int, ...]]:
        self.replicas.shrink_lagging()
        await asyncio.sleep(0.01)  # the ISR write runs as a task
        return self.isr_writes


def test_a_follower_cut_off_leaves_the_isr_on_time_when_the_wall_clock_steps_back(
    tmp_path: Path, wall: SteppedWallClock
) -> None:
    async def main() -> list[tuple[int, ...]]:
        leader = Leader(tmp_path)
        leader.follower_fetches()  # and then no more
        wall.step(-HOUR_MS)
        await asyncio.sleep(2 * LAG_MAX_MS / 1000)
        return await leader.shrink()

    assert asyncio.run(main()) == [(1,)]


def test_a_follower_that_keeps_up_stays_in_the_isr_when_the_wall_clock_steps_forward(
    tmp_path: Path, wall: SteppedWallClock
) -> None:
    async def main() -> list[tuple[int, ...]]:
        leader = Leader(tmp_path)
        leader.follower_fetches()
        wall.step(HOUR_MS)
        writes = await leader.shrink()
        await asyncio.sleep(LAG_MAX_MS / 2000)
        leader.follower_fetches()
        return writes + await leader.shrink()

    assert asyncio.run(main()) == []


# -- group members' sessions ------------------------------------------------------------------

SESSION_MS = 1_000


def _join(member_id: str = "") -> Any:
    request = m.JoinGroupRequest(
        "g",
        SESSION_MS,
        SESSION_MS,
        member_id,
        "consumer",
        (m.Protocol("range", b""),),
        api_version=0,
    )
    return lambda shard, token, now: shard.join_group(request, token, now)


def _sync(member_id: str) -> Any:
    request = m.SyncGroupRequest("g", 1, member_id, ((member_id, b"a"),))
    return lambda shard, token, now: shard.sync_group(request, token, now)


def _heartbeat(member_id: str) -> Any:
    request = m.HeartbeatRequest("g", 1, member_id)
    return lambda shard, token, now: shard.heartbeat(request, token, now)


def _describe(shard: Any, token: Any, now: Any) -> Any:
    return shard.describe_groups(["g"], token)


async def _stable_group(data_dir: Path) -> tuple[GroupCoordinator, LogManager, str]:
    """One member, Stable, in a coordinator over real logs, as on one broker."""
    logs = LogManager(data_dir, LogConfig.from_topic_configs({}))
    logs.open(wall_ms())
    replicas = ReplicaManager(logs, Durability(lambda: time.monotonic_ns() // 1_000_000), wall_ms)
    config = CoordinatorConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=0)
    groups = GroupCoordinator(logs, replicas, config, 1)
    groups.start()
    await groups.wait_loaded()
    joined = await groups.run("g", _join())
    assert joined.error_code is ErrorCode.NONE
    synced = await groups.run("g", _sync(joined.member_id))
    assert synced.error_code is ErrorCode.NONE
    return groups, logs, joined.member_id


def test_a_silent_member_leaves_its_group_on_time_when_the_wall_clock_steps_back(
    tmp_path: Path, wall: SteppedWallClock
) -> None:
    async def main() -> str:
        groups, logs, _ = await _stable_group(tmp_path)
        wall.step(-HOUR_MS)  # and the member says no more
        await asyncio.sleep(2.5 * SESSION_MS / 1000)
        (described,) = await groups.run("g", _describe)
        groups.close()
        logs.close()
        return described.group_state

    assert asyncio.run(main()) == str(GroupState.EMPTY)


@STEPS
def test_a_member_that_heartbeats_stays_whatever_the_wall_clock_does(
    tmp_path: Path, wall: SteppedWallClock, step_ms: int
) -> None:
    async def main() -> tuple[set[ErrorCode], str]:
        groups, logs, member_id = await _stable_group(tmp_path)
        answers = set()
        for i in range(12):
            if i == 3:
                wall.step(step_ms)
            await asyncio.sleep(SESSION_MS / 6000)
            answers.add((await groups.run("g", _heartbeat(member_id))).error_code)
        (described,) = await groups.run("g", _describe)
        groups.close()
        logs.close()
        return answers, described.group_state

    assert asyncio.run(main()) == ({ErrorCode.NONE}, str(GroupState.STABLE))


# -- flush.ms -----------------------------------------------------------------------------------


def test_flush_ms_flushes_on_time_when_the_wall_clock_steps_back(
    tmp_path: Path, wall: SteppedWallClock
) -> None:
    async def main() -> int:
        broker = Broker(BrokerConfig(data_dir=tmp_path, scrubber_enable=False))
        broker.logs.open(wall_ms())
        partition_log = broker.logs.create_topic("t", 1, {"flush.ms": "200"}).partitions[0]
        batch = build_batch([(b"k", b"v")], wall_ms())
        broker.replicas.append(partition_log, [(parse_header(batch), memoryview(batch))], 1)
        await broker.durability.flush_due([partition_log])  # not due yet
        wall.step(-HOUR_MS)
        await asyncio.sleep(0.4)
        await broker.durability.flush_due([partition_log])
        unflushed = partition_log.unflushed_messages
        broker.groups.close()
        broker.logs.close()
        return unflushed

    assert asyncio.run(main()) == 0


# -- fetch sessions -------------------------------------------------------------------------------


def _fetch(session_id: int = 0, epoch: int = 0) -> Request:
    """A consumer's Fetch v12 of t-0, opening a session (epoch 0)."""
    wanted = SimpleNamespace(
        partition=0,
        fetch_offset=0,
        partition_max_bytes=1 << 20,
        current_leader_epoch=-1,
        log_start_offset=-1,
        last_fetched_epoch=-1,
    )
    body = SimpleNamespace(
        replica_id=-1,
        replica_state=None,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        session_id=session_id,
        session_epoch=epoch,
        isolation_level=0,
        topics=[SimpleNamespace(topic="t", topic_id=None, partitions=[wanted])],
        forgotten_topics_data=[],
        rack_id="",
    )
    return Request(1, 12, 0, "client", body)


class _NoPartitions:
    def consumer_log(self, topic: str, partition: int, epoch: int, any_replica: bool) -> Any:
        raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_a_young_fetch_session_is_not_evicted_when_the_wall_clock_steps_forward(
    wall: SteppedWallClock,
) -> None:
    async def main() -> tuple[int, int]:
        sessions = FetchSessionCache(max_sessions=1, eviction_ms=60_000)
        context: Any = SimpleNamespace(fetch_sessions=sessions, replicas=_NoPartitions(), acls=None)
        first = await handle_fetch(context, _fetch())
        wall.step(HOUR_MS)
        second = await handle_fetch(context, _fetch())
        return first.session_id, second.session_id

    first, second = asyncio.run(main())
    assert first != 0
    assert second == 0, "a session a moment old was evicted as if an hour old"
