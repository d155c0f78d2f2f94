"""The share coordinator: the shards of `__share_group_state` on this broker (KIP-932).

One shard per partition of `__share_group_state` (coordinator/share_state/), hosted on
the broker's one coordinator runtime beside the groups' and the transactions'
(coordinator_host.py), following leadership with a warm standby as they do. This
module adds what is the share coordinator's own: its internal topic, created by the
first FindCoordinator for a share partition's key as Kafka creates it, with Kafka's
settings for it.

The topic is not compacted, as in Kafka: a ShareUpdate holds only what one write
changed, so keeping the last record of each key would lose state. Its records are kept
(retention.ms -1) for the snapshots and updates to be replayed in full.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from herdless.broker.coordinators.coordinator_host import CoordinatorHost
from herdless.broker.coordinators.coordinator_loop import CoordinatorError
from herdless.broker.coordinators.internal_topic import InternalTopicCoordinator
from herdless.coordinator.runtime import Output
from herdless.coordinator.share_state import (
    SHARE_GROUP_STATE_TOPIC,
    PartitionState,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    SharePartitionKey,
    StateBatch,
    coordinator_key,
    share_coordinator,
    share_state_partition,
)
from herdless.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_FENCED = frozenset({ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH})

__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareCoordinator"]


class ShareCoordinator(InternalTopicCoordinator):
    topic = SHARE_GROUP_STATE_TOPIC
    num_partitions_setting = "share.coordinator.state.topic.num.partitions"

    def __init__(
        self,
        host: CoordinatorHost,
        config: ShareCoordinatorConfig,
        min_insync_replicas: int = 1,
        segment_bytes: int = 104_857_600,
        standalone: bool = False,
    ) -> None:
        topic_configs = {
            "cleanup.policy": "delete",
            "retention.ms": "-1",
            "segment.bytes": str(segment_bytes),
            "min.insync.replicas": str(min_insync_replicas),
        }
        super().__init__(host, config.num_partitions, topic_configs, standalone)
        self.config = config
        self.kind = share_coordinator(config)
        host.register(self.kind, self._on_events)

    def partition(self, key: SharePartitionKey) -> int:
        return share_state_partition(key, self.num_partitions)

    # -- operations --------------------------------------------------------------------

    def run(
        self, key: SharePartitionKey, operation: Callable[..., Any]
    ) -> Coroutine[Any, Any, Any]:
        """Run `operation` on the shard of `key`: its answer once its record is committed,
        or CoordinatorError."""
        return self.host.loop.write(self.kind, self.partition(key), operation)

    def read(
        self, key: SharePartitionKey, operation: Callable[[ShareCoordinatorShard], Any]
    ) -> Coroutine[Any, Any, Any]:
        return self.host.loop.read(self.kind, self.partition(key), operation)

    # The five state operations, each answering an ErrorCode where the runtime could not
    # serve it here (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS...), as the handlers
    # and the local path of the persister both need.

    async def initialize(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> ErrorCode:
        return await self._answer(
            key,
            f"initialize at state epoch {state_epoch}",
            self.run(key, lambda s, t, now: s.initialize(key, state_epoch, start_offset, t, now)),
        )

    async def read_state(
        self, key: SharePartitionKey, leader_epoch: int
    ) -> PartitionState | ErrorCode:
        return await self._answer(
            key,
            f"read at leader epoch {leader_epoch}",
            self.run(key, lambda s, t, now: s.read(key, leader_epoch, t, now)),
        )

    async def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[StateBatch, ...],
    ) -> ErrorCode:
        return await self._answer(
            key,
            f"write at state epoch {state_epoch}, leader epoch {leader_epoch}",
            self.run(
                key,
                lambda s, t, now: s.write(
                    key, state_epoch, leader_epoch, start_offset, batches, t, now
                ),
            ),
        )

    async def delete(self, key: SharePartitionKey) -> ErrorCode:
        return await self._answer(
            key, "delete", self.run(key, lambda s, t, now: s.delete(key, t, now))
        )

    async def read_summary(
        self, key: SharePartitionKey, leader_epoch: int
    ) -> PartitionState | ErrorCode:
        return await self._answer(
            key,
            f"summary at leader epoch {leader_epoch}",
            self.read(key, lambda s: s.read_summary(key, leader_epoch)),
        )

    @staticmethod
    async def _answer(key: SharePartitionKey, what: str, call: Coroutine[Any, Any, Any]) -> Any:
        try:
            answer = await call
        except CoordinatorError as exc:
            return exc.error_code
        if answer in _FENCED:
            # A deposed leader or a re-initialized group: expected after a move, but the
            # one sign an operator gets of a leader still writing after it lost its place.
            log.info("share partition %s: %s refused, %s", coordinator_key(key), what, answer.name)
        return answer

    def _on_events(self, out: Output) -> None:
        for reload in out.reloads:
            log.info("%s: %s; replaying it", reload.tp, reload.reason)
        for summary in out.loaded:
            tp = summary.tp
            shard = self.host.runtime.shard(self.kind, tp.partition)
            since = self.host.loop.load_started.get(tp, time.monotonic())
            log.log(
                logging.INFO if summary.records else logging.DEBUG,
                "coordinating the share state of %s: %d share partitions; %d records"
                " replayed, %d of them since it became leader, %.3fs ago",
                tp,
                0 if shard is None else len(shard.shares.states),
                summary.records,
                summary.records_since_leader,
                time.monotonic() - since,
            )
