"""The group coordinator: the groups' shards on the coordinator runtime, on this broker.

One shard per `__consumer_offsets` partition, hosted by the pure runtime
(coordinator/runtime/) over this broker's log (coordinator_writer.py) and driven on
the event loop (coordinator_loop.py). This module adds what is the groups' own: the
internal topics, leadership of the offsets partitions, the rebalance history, and the
log lines operators and tests read.

A shard is built by replaying its partition before it serves anyone; until then its
groups get COORDINATOR_LOAD_IN_PROGRESS and clients retry.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine, Hashable
from dataclasses import asdict
from typing import Any

from herdless.broker import clock
from herdless.broker.coordinators.coordinator_host import CoordinatorHost
from herdless.broker.coordinators.coordinator_loop import CoordinatorError
from herdless.broker.replication.cluster_replica_manager import Role
from herdless.broker.replication.replica_manager import PartitionError, ReplicaManager
from herdless.broker.stalls import StallDetector
from herdless.broker.topics.topic_admin import NewTopic, TopicAdmin, TopicAdminError
from herdless.coordinator import (
    CoordinatorConfig,
    CoordinatorShard,
    Now,
    Result,
    partition_for,
)
from herdless.coordinator.internal_topics import OFFSETS_TOPIC
from herdless.coordinator.messages import RebalanceRecord
from herdless.coordinator.runtime import (
    CoordinatorType,
    Output,
    ShardState,
)
from herdless.coordinator.transactions import TRANSACTION_STATE_TOPIC
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import build_batch, parse_header
from herdless.storage import LogManager, PartitionLog, StorageError

log = logging.getLogger(__name__)

# Completed rebalances, one JSON record each keyed by group id, for `herdless groups
# history` and for anyone who wants to alert on them; any Kafka client can read it.
REBALANCES_TOPIC = "__rebalance_history"
REBALANCES_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "retention.bytes": str(64 * 1024 * 1024),
    "segment.bytes": str(16 * 1024 * 1024),
}
# Every topic only brokers write to: the groups' and the transaction coordinator's.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, REBALANCES_TOPIC, TRANSACTION_STATE_TOPIC})

Operation = Callable[[CoordinatorShard, Hashable, Now], Result]
# Told of every completed rebalance: (group id, cause).
RebalanceListener = Callable[[str, str], None]

__all__ = [
    "INTERNAL_TOPICS",
    "OFFSETS_TOPIC",
    "REBALANCES_TOPIC",
    "CoordinatorError",
    "GroupCoordinator",
    "Operation",
    "ShardState",
]


class GroupCoordinator:
    """All shards of this broker: on one node, every `__consumer_offsets` partition; in
    a cluster, one per replica this broker holds, serving where it leads and a warm
    standby where it follows."""

    def __init__(
        self,
        logs: LogManager,
        replicas: ReplicaManager,
        config: CoordinatorConfig,
        num_partitions: int,
        segment_bytes: int = 104_857_600,
        on_rebalance: RebalanceListener = lambda group, cause: None,
        standby: bool = True,
        forward_history: Callable[[bytes], None] | None = None,
        stalls: StallDetector | None = None,
        host: CoordinatorHost | None = None,
    ) -> None:
        self.logs = logs
        self.replicas = replicas
        self.on_rebalance = on_rebalance
        self.config = config
        self.num_partitions = num_partitions
        self.standby = standby
        self._forward_history = forward_history
        # Kafka's settings for the offsets topic: compacted, 100 MiB segments by default.
        self.topic_configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
        self.kind: CoordinatorType[CoordinatorShard] = CoordinatorType(
            OFFSETS_TOPIC, lambda tp: CoordinatorShard(config), standby=standby
        )
        # The broker's one coordinator runtime, which this coordinator's shards share
        # with every other coordinator's; a host of its own when none is given.
        self.host = host if host is not None else CoordinatorHost(logs, replicas, stalls)
        self._owns_host = host is None
        self.host.register(self.kind, self._on_events)
        self.writer = self.host.writer
        self.runtime = self.host.runtime
        self.loop = self.host.loop
        # One broker alone: the partitions still loading since start(), and when it began.
        self._starting: set[int] = set()
        self._started = (0.0, 0)
        self._loaded: asyncio.Future[None] | None = None

    def start(self) -> None:
        """One broker alone: it leads every partition; they load one after another, so
        the first groups are served before the last partition is read."""
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
        self._loaded = self.loop.event_loop().create_future()
        self._starting = set(topic.partitions)
        self._started = (time.monotonic(), 0)
        for partition in topic.partitions:
            self.on_leadership(OFFSETS_TOPIC, partition, Role.LEADER)
        self._check_started()

    async def wait_loaded(self) -> None:
        if self._loaded is not None:
            await asyncio.shield(self._loaded)

    def partition(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinating(self) -> list[int]:
        """The partitions this broker leads (serving, or loading to)."""
        return [
            tp.partition
            for tp, state in self.runtime.partitions().items()
            if tp.topic == OFFSETS_TOPIC and state in (ShardState.ACTIVE, ShardState.LOADING)
        ]

    def shards(self) -> list[tuple[ShardState, CoordinatorShard]]:
        """Every shard this broker holds, whatever its state: for metrics and tests."""
        found = []
        for tp, state in self.runtime.partitions().items():
            if tp.topic != OFFSETS_TOPIC:
                continue
            shard = self.runtime.shard(self.kind, tp.partition)
            if shard is not None:
                found.append((state, shard))
        return found

    def on_leadership(self, topic: str, partition: int, role: Role | None) -> None:
        """In a cluster: lead the groups of each offsets partition this broker leads, keep
        a standby of those it follows, and nothing of those it no longer holds."""
        if topic == OFFSETS_TOPIC:
            self.host.on_leadership(topic, partition, role)

    def on_replicated(self, partition_log: PartitionLog) -> None:
        """A follower's copy of a partition grew, was truncated, or its high watermark moved."""
        if partition_log.topic == OFFSETS_TOPIC:
            self.host.on_replicated(partition_log)

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

    def _on_events(self, out: Output) -> None:
        for _, rebalances in out.rebalances:
            self._publish_rebalances(rebalances)
        for reload in out.reloads:
            log.info("%s: %s; replaying it", reload.tp, reload.reason)
        for summary in out.loaded:
            tp = summary.tp
            shard = self.runtime.shard(self.kind, tp.partition)
            since = self.loop.load_started.get(tp, time.monotonic())
            log.log(
                logging.INFO if summary.records else logging.DEBUG,
                "coordinating the groups of %s: %d groups; %d records replayed, %d of them"
                " since it became leader, %.3fs ago",
                tp,
                0 if shard is None else len(shard.groups),
                summary.records,
                summary.records_since_leader,
                time.monotonic() - since,
            )
            if tp.partition in self._starting:
                self._starting.discard(tp.partition)
                started, records = self._started
                self._started = (started, records + summary.records)
                self._check_started()

    def _check_started(self) -> None:
        if self._starting or self._loaded is None or self._loaded.done():
            return
        started, records = self._started
        log.info(
            "group coordinator loaded %d records from %d partitions in %.2fs",
            records,
            self.host.hosted(OFFSETS_TOPIC),
            time.monotonic() - started,
        )
        self._loaded.set_result(None)

    def _publish_rebalances(self, rebalances: list[tuple[str, RebalanceRecord]]) -> None:
        entries = []
        for group_id, entry in rebalances:
            duration = (entry.ended_ms or entry.started_ms) - entry.started_ms
            log.info(
                "group %s: %s (%s); %s %d -> %s in %d ms; %d -> %d members",
                group_id,
                entry.cause,
                # A batch LeaveGroup names every member; the full entry is in the topic.
                entry.detail if len(entry.detail) <= 200 else entry.detail[:200] + "...",
                "generation" if entry.protocol == "classic" else "target epoch",
                entry.from_generation,
                entry.to_generation,
                duration,
                len(entry.members_before),
                len(entry.members_after or ()),
            )
            self.on_rebalance(group_id, str(entry.cause))
            value = {"group_id": group_id, **asdict(entry), "duration_ms": duration}
            entries.append((group_id.encode(), json.dumps(value).encode()))
        self._record_history(entries)

    def _record_history(self, entries: list[tuple[bytes, bytes]]) -> None:
        batch = build_batch(entries, clock.wall_ms())
        try:
            history_log = self.replicas.leader_log(REBALANCES_TOPIC, 0)
        except PartitionError:
            # In a cluster, another broker leads the history partition.
            if self._forward_history is not None:
                self._forward_history(batch)
            return
        try:
            self.replicas.append(history_log, [(parse_header(batch), memoryview(batch))], 1)
        except (StorageError, PartitionError) as exc:
            log.info("could not record rebalances in %s: %s", REBALANCES_TOPIC, exc)
        except Exception:
            # Operator information only: losing it must not disturb the group.
            log.exception("could not record rebalances in %s", REBALANCES_TOPIC)

    def run(self, group_id: str, operation: Operation) -> Coroutine[Any, Any, Any]:
        """run_on() the shard of `group_id`'s partition. Not a coroutine of its own: one
        frame and one await less on the path of every commit and heartbeat."""
        return self.loop.write(self.kind, partition_for(group_id, self.num_partitions), operation)

    def run_on(self, partition: int, operation: Operation) -> Coroutine[Any, Any, Any]:
        """Run `operation` on the shard of `partition`: awaited, its response once it may
        be sent, or CoordinatorError."""
        return self.loop.write(self.kind, partition, operation)

    async def complete_transaction(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
    ) -> ErrorCode:
        """WriteTxnMarkers for `__consumer_offsets`-`partition`: the marker that ends
        `producer_id`'s transaction is written and applied, so the offsets it committed
        count (or are dropped); NONE once the marker is committed. NOT_COORDINATOR (or
        COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) where this broker does not
        serve the partition, which Kafka's handler answers NOT_LEADER_OR_FOLLOWER; the
        log's error for a marker it refuses (INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED)."""
        try:
            await self.loop.complete_transaction(
                self.kind, partition, producer_id, producer_epoch, coordinator_epoch, committed
            )
        except CoordinatorError as exc:
            return exc.error_code
        return ErrorCode.NONE

    def close(self) -> None:
        if self._loaded is not None and not self._loaded.done():
            self._loaded.cancel()
        if self._owns_host:
            self.host.close()
