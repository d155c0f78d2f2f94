"""The coordinator runtime: runs the sans-IO shards with real time, a real log and real sockets.

One shard per `__consumer_offsets` partition. For each operation the runtime
calls the shard with `now`, appends the records it returns to the shard's
partition, and releases the replies once those records, and every record an
earlier operation of the same shard wrote, are durable. Timers are armed on the
event loop at the shard's next deadline.

A shard is built by replaying its partition before it serves anyone; until
then its groups get COORDINATOR_LOAD_IN_PROGRESS and clients retry.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import asdict
from typing import Any

from herdless.broker.clock import now_ms
from herdless.broker.replicas import ACKS_ALL, PartitionError, ReplicaManager
from herdless.broker.topic_admin import NewTopic, TopicAdmin, TopicAdminError
from herdless.coordinator import CoordinatorConfig, CoordinatorShard, Result, partition_for
from herdless.coordinator.messages import RebalanceRecord
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import build_batch, iter_batches, iter_records, parse_header
from herdless.storage import LogManager, PartitionLog

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# Completed rebalances, one JSON record each keyed by group id, for `herdless groups
# history` and for anyone who wants to alert on them; any Kafka client can read it.
REBALANCES_TOPIC = "__rebalance_history"
REBALANCES_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "retention.bytes": str(64 * 1024 * 1024),
    "segment.bytes": str(16 * 1024 * 1024),
}
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, REBALANCES_TOPIC})
# How much of the partition one replay step reads before yielding to the loop: small
# enough that groups on loaded partitions keep being served while others load
# (with 4 MiB, a benchmark saw 1.5 s stalls of OffsetFetch during a 1M-record load).
LOAD_READ_BYTES = 256 * 1024

# How long a write may wait to be committed (Kafka's offsets.commit.timeout.ms).
COMMIT_TIMEOUT_MS = 5_000

Operation = Callable[[CoordinatorShard, Hashable, int], Result]
# Told of every completed rebalance: (group id, cause).
RebalanceListener = Callable[[str, str], None]


class CoordinatorError(Exception):
    """The group cannot be served here now; `error_code` tells the client what to do."""

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


class ShardRuntime:
    def __init__(
        self,
        replicas: ReplicaManager,
        partition: int,
        log: PartitionLog,
        config: CoordinatorConfig,
        history_log: Callable[[], PartitionLog | None],
        on_rebalance: RebalanceListener,
    ) -> None:
        self.replicas = replicas
        self.on_rebalance = on_rebalance
        self.history_log = history_log
        self.partition = partition
        self.log = log
        self.config = config
        self.shard = CoordinatorShard(config)
        self.state = ShardState.LOADING
        self.loaded_records = 0
        self._waiting: dict[Hashable, asyncio.Future[Any]] = {}
        # Completes when every record written so far is durable and its replies are out.
        self._tail: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    # -- loading ---------------------------------------------------------------

    async def load(self) -> None:
        """Replay the partition into a fresh shard, yielding to the loop between reads."""
        started = time.monotonic()
        shard = CoordinatorShard(self.config)
        offset = self.log.log_start_offset
        count = 0
        while offset < self.log.log_end_offset:
            data = self.log.read(offset, LOAD_READ_BYTES)
            if not data:
                break
            view = memoryview(data)
            for position, header in iter_batches(view):
                batch = view[position : position + header.size]
                for record in iter_records(batch, header):
                    if record.offset >= offset and record.key is not None:
                        shard.replay(record.key, record.value)
                        count += 1
                offset = header.last_offset + 1
            await asyncio.sleep(0)
        if self.state is ShardState.CLOSED:
            return  # leadership moved away while loading
        self.shard = shard
        self.loaded_records = count
        self.state = ShardState.ACTIVE
        self._apply(shard.on_loaded(now_ms()))
        if count:
            log.info(
                "loaded %s-%d: %d records, %d groups in %.2fs",
                OFFSETS_TOPIC,
                self.partition,
                count,
                len(shard.groups),
                time.monotonic() - started,
            )

    # -- operations ------------------------------------------------------------

    async def run(self, operation: Operation) -> Any:
        """Run one operation; return its response once it may be sent."""
        if self.state is not ShardState.ACTIVE:
            raise CoordinatorError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                if self.state is ShardState.LOADING
                else ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
        token = object()
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = waiter
        try:
            self._apply(operation(self.shard, token, now_ms()))
            return await waiter
        finally:
            self._waiting.pop(token, None)

    def _apply(self, result: Result) -> None:
        """Append the records now; release the replies once they are durable, in order."""
        end_offset = None
        if result.records:
            batch = build_batch([(r.key, r.value) for r in result.records], now_ms())
            try:
                records = [(parse_header(batch), memoryview(batch))]
                # Waited on as acks=all: an answer leaves only once its records are committed.
                end_offset = self.replicas.append(self.log, records, ACKS_ALL).last_offset + 1
            except Exception:
                log.exception("append to %s-%d failed; reloading it", OFFSETS_TOPIC, self.partition)
                self._fail_and_reload()
                return
        if result.rebalances:
            self._publish_rebalances(result.rebalances)
        previous = self._tail
        tail: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tail = tail
        asyncio.get_running_loop().create_task(self._release(result, previous, tail, end_offset))
        self._arm_timer()

    def _publish_rebalances(self, rebalances: list[tuple[str, RebalanceRecord]]) -> None:
        entries = []
        for group_id, entry in rebalances:
            duration = (entry.ended_ms or entry.started_ms) - entry.started_ms
            log.info(
                "group %s: %s (%s); generation %d -> %s in %d ms; %d -> %d members",
                group_id,
                entry.cause,
                # A batch LeaveGroup names every member; the full entry is in the topic.
                entry.detail if len(entry.detail) <= 200 else entry.detail[:200] + "...",
                entry.from_generation,
                entry.to_generation,
                duration,
                len(entry.members_before),
                len(entry.members_after or ()),
            )
            self.on_rebalance(group_id, str(entry.cause))
            value = {"group_id": group_id, **asdict(entry), "duration_ms": duration}
            entries.append((group_id.encode(), json.dumps(value).encode()))
        batch = build_batch(entries, now_ms())
        try:
            history_log = self.history_log()
            if history_log is None:
                # In a cluster, only the leader of the history partition can write it.
                log.debug("not recording rebalances: %s-0 is led elsewhere", REBALANCES_TOPIC)
                return
            self.replicas.append(history_log, [(parse_header(batch), memoryview(batch))], 1)
        except Exception:
            # Operator information only: losing it must not disturb the group.
            log.exception("could not record rebalances in %s", REBALANCES_TOPIC)

    async def _release(
        self,
        result: Result,
        previous: asyncio.Future[None] | None,
        tail: asyncio.Future[None],
        end_offset: int | None,
    ) -> None:
        try:
            if end_offset is not None:
                await self.replicas.committed(self.log, ACKS_ALL, end_offset, COMMIT_TIMEOUT_MS)
            if previous is not None:
                await previous
            for reply in result.replies:
                waiter = self._waiting.get(reply.token)
                if waiter is not None and not waiter.done():
                    waiter.set_result(reply.response)
        except Exception:
            log.exception("committing to %s-%d failed; reloading it", OFFSETS_TOPIC, self.partition)
            self._fail_and_reload()
        finally:
            tail.set_result(None)

    def _fail_and_reload(self) -> None:
        """State ran ahead of the log: drop it, answer everyone, and rebuild by replay
        (unless the shard was closed: leadership of its partition moved away)."""
        if self.state is not ShardState.CLOSED:
            self.state = ShardState.LOADING
        self.shard.unload()
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(CoordinatorError(ErrorCode.NOT_COORDINATOR))
        if self._timer is not None:
            self._timer.cancel()
        if self.state is not ShardState.CLOSED:
            asyncio.get_running_loop().create_task(self.load())

    # -- timers ----------------------------------------------------------------

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.shard.next_deadline()
        if deadline is None or self.state is not ShardState.ACTIVE:
            return
        delay = max(deadline - now_ms(), 0) / 1000
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self.state is ShardState.ACTIVE:
            self._apply(self.shard.poll(now_ms()))

    def close(self) -> None:
        self.state = ShardState.CLOSED
        if self._timer is not None:
            self._timer.cancel()
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(CoordinatorError(ErrorCode.NOT_COORDINATOR))


class GroupCoordinator:
    """All shards of this broker; on one node, every `__consumer_offsets` partition."""

    def __init__(
        self,
        logs: LogManager,
        replicas: ReplicaManager,
        config: CoordinatorConfig,
        num_partitions: int,
        segment_bytes: int = 104_857_600,
        on_rebalance: RebalanceListener = lambda group, cause: None,
    ) -> None:
        self.logs = logs
        self.replicas = replicas
        self.on_rebalance = on_rebalance
        self.config = config
        self.num_partitions = num_partitions
        # Kafka's settings for the offsets topic: compacted, 100 MiB segments by default.
        self.topic_configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
        self.shards: dict[int, ShardRuntime] = {}
        self._loading: asyncio.Task[None] | None = None

    def start(self) -> None:
        logs = self.logs
        if REBALANCES_TOPIC not in logs.topics:
            logs.create_topic(REBALANCES_TOPIC, 1, REBALANCES_TOPIC_CONFIGS)
        topic = logs.topics.get(OFFSETS_TOPIC)
        if topic is None:
            topic = logs.create_topic(OFFSETS_TOPIC, self.num_partitions, self.topic_configs)
        elif topic.partition_count != self.num_partitions:
            # Placement hashes over the partition count; it cannot change under stored groups.
            log.warning(
                "%s has %d partitions; offsets.topic.num.partitions=%d is ignored",
                OFFSETS_TOPIC,
                topic.partition_count,
                self.num_partitions,
            )
            self.num_partitions = topic.partition_count
        self.shards = {
            p: self._new_shard(p, partition_log) for p, partition_log in topic.partitions.items()
        }
        self._loading = asyncio.get_running_loop().create_task(self._load_all())

    async def _load_all(self) -> None:
        started = time.monotonic()
        for shard in self.shards.values():
            await shard.load()
        total = sum(s.loaded_records for s in self.shards.values())
        log.info(
            "group coordinator loaded %d records from %d partitions in %.2fs",
            total,
            len(self.shards),
            time.monotonic() - started,
        )

    async def wait_loaded(self) -> None:
        if self._loading is not None:
            await asyncio.shield(self._loading)

    def shard_for(self, group_id: str) -> ShardRuntime:
        shard = self.shards.get(partition_for(group_id, self.num_partitions))
        if shard is None:
            # In a cluster: another broker leads this group's offsets partition.
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        return shard

    def on_leadership(self, topic: str, partition: int, leader_epoch: int | None) -> None:
        """In a cluster: run the shard of each offsets partition this broker leads, and
        only those (loaded by replay when leadership arrives, closed when it goes)."""
        if topic != OFFSETS_TOPIC:
            return
        current = self.shards.get(partition)
        if leader_epoch is None:
            if current is not None:
                current.close()
                del self.shards[partition]
                log.info("no longer coordinating the groups of %s-%d", OFFSETS_TOPIC, partition)
            return
        if current is not None:
            return  # still the leader; a new epoch alone changes nothing here
        partition_log = self.logs.partition(OFFSETS_TOPIC, partition)
        if partition_log is None:
            return
        shard = self.shards[partition] = self._new_shard(partition, partition_log)
        asyncio.get_running_loop().create_task(shard.load())

    async def create_topics(self, topics: TopicAdmin, replication_factor: int) -> None:
        """In a cluster, the first FindCoordinator creates the internal topics, as Kafka
        does; TopicAdminError (e.g. fewer live brokers than the replication factor)."""
        for name, partitions, configs in (
            (OFFSETS_TOPIC, self.num_partitions, self.topic_configs),
            (REBALANCES_TOPIC, 1, REBALANCES_TOPIC_CONFIGS),
        ):
            try:
                await topics.create_topic(
                    NewTopic(name, partitions, replication_factor, configs=configs)
                )
            except TopicAdminError as exc:
                if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise

    def _new_shard(self, partition: int, partition_log: PartitionLog) -> ShardRuntime:
        return ShardRuntime(
            self.replicas,
            partition,
            partition_log,
            self.config,
            self._history_log,
            self.on_rebalance,
        )

    def _history_log(self) -> PartitionLog | None:
        try:
            return self.replicas.leader_log(REBALANCES_TOPIC, 0)
        except PartitionError:
            return None

    async def run(self, group_id: str, operation: Operation) -> Any:
        return await self.shard_for(group_id).run(operation)

    def close(self) -> None:
        if self._loading is not None:
            self._loading.cancel()
        for shard in self.shards.values():
            shard.close()
