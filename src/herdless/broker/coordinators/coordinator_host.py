"""One coordinator runtime for every coordinator of this broker (Kafka's coordinator-common).

The pure runtime (coordinator/runtime/) hosts the shards of every coordinator type,
keyed by internal topic partition; this module builds it once per broker, over this
broker's log (coordinator_writer.py), driven on the event loop (coordinator_loop.py),
and routes to it the leadership of each internal topic's partitions. A coordinator
(the group coordinator on `__consumer_offsets`, the transaction coordinator on
`__transaction_state`) registers its type here with the listener told of its own
shards' loads, reloads and rebalances; nothing else about the runtime is its own.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

from herdless.broker.coordinators.coordinator_loop import RuntimeLoop
from herdless.broker.coordinators.coordinator_writer import ReplicaWriter
from herdless.broker.replication.cluster_replica_manager import Role
from herdless.broker.replication.replica_manager import ReplicaManager
from herdless.broker.stalls import StallDetector
from herdless.coordinator.runtime import (
    CoordinatorRuntime,
    CoordinatorType,
    Output,
    ReplicaRole,
    RuntimeConfig,
    TopicPartition,
)
from herdless.storage import LogManager, PartitionLog

# How long a write may wait to be committed (Kafka's offsets.commit.timeout.ms).
COMMIT_TIMEOUT_MS = 5_000
# How often timers that fell due while leadership was in doubt look again.
LEADERSHIP_RECHECK_MS = 100

# Told of the Output events (loads, reloads, rebalances) of one coordinator's shards.
EventListener = Callable[[Output], None]

_ROLES = {Role.LEADER: ReplicaRole.LEADER, Role.FOLLOWER: ReplicaRole.FOLLOWER}


class CoordinatorHost:
    def __init__(
        self,
        logs: LogManager,
        replicas: ReplicaManager,
        stalls: StallDetector | None = None,
    ) -> None:
        self.logs = logs
        self.replicas = replicas
        self.writer = ReplicaWriter(logs, replicas)
        self.runtime = CoordinatorRuntime(
            self.writer, [], RuntimeConfig(COMMIT_TIMEOUT_MS, LEADERSHIP_RECHECK_MS)
        )
        # One thread for offloaded work of every shard (the group coordinator's server
        # assignors, KIP-1263): it shares the interpreter lock, but the loop takes it
        # back every few milliseconds instead of waiting out a whole assignment.
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="herdless-assignor"
        )
        self.loop = RuntimeLoop(
            self.runtime,
            self.writer,
            replicas,
            COMMIT_TIMEOUT_MS,
            self._on_events,
            stalls.observe if stalls is not None else lambda: None,
            self._executor,
        )
        if stalls is not None:
            stalls.listeners.append(self.loop.postpone_timers)
        self._listeners: dict[str, EventListener] = {}
        # The log each hosted partition's shard replays: a replaced one (the replica was
        # deleted and created again) is a new shard.
        self._logs: dict[TopicPartition, PartitionLog] = {}

    def register(self, kind: CoordinatorType[Any], on_events: EventListener) -> None:
        self.runtime.register(kind)
        self._listeners[kind.topic] = on_events

    def hosted(self, topic: str) -> int:
        """How many partitions of `topic` have a shard here, whatever its state."""
        return sum(1 for tp in self._logs if tp.topic == topic)

    def on_leadership(self, topic: str, partition: int, role: Role | None) -> None:
        """Lead the shard of each internal partition this broker leads, keep a standby of
        those it follows, and nothing of those it no longer holds. Other topics are
        ignored, so the broker may tell of every partition."""
        if topic not in self._listeners:
            return
        tp = TopicPartition(topic, partition)
        partition_log = self.logs.partition(topic, partition)
        known = self._logs.get(tp)
        if known is not None and (role is None or known is not partition_log):
            self.loop.on_leadership(tp, None)
            del self._logs[tp]
        if role is None or partition_log is None:
            return
        self._logs[tp] = partition_log
        self.loop.on_leadership(tp, _ROLES[role])

    def on_replicated(self, partition_log: PartitionLog) -> None:
        """A follower's copy of a partition grew, was truncated, or its high watermark moved."""
        tp = TopicPartition(partition_log.topic, partition_log.partition)
        if self._logs.get(tp) is partition_log:
            self.loop.high_watermark_moved(tp, partition_log.high_watermark)

    def _on_events(self, out: Output) -> None:
        if len(self._listeners) == 1:
            for listener in self._listeners.values():
                listener(out)
            return
        for topic, listener in self._listeners.items():
            mine = _events_of(out, topic)
            if mine is not None:
                listener(mine)

    def close(self) -> None:
        self.loop.close()
        self._executor.shutdown(wait=False, cancel_futures=True)


def _events_of(out: Output, topic: str) -> Output | None:
    """The events of `out` on `topic`'s partitions, None if it has none."""
    mine = Output()
    for tp, rebalances in out.rebalances:
        if tp.topic == topic:
            mine.add_rebalances(tp, rebalances)
    for summary in out.loaded:
        if summary.tp.topic == topic:
            mine.add_loaded(summary)
    for reload in out.reloads:
        if reload.tp.topic == topic:
            mine.add_reload(reload)
    if mine.rebalances or mine.loaded or mine.reloads:
        return mine
    return None
