"""The share coordinator's shard: one per `__share_group_state` partition, hosted on the
coordinator runtime beside the groups' and the transactions' (Kafka's
ShareCoordinatorShard). A thin dispatcher: the rules are the manager's.

A share partition's key goes to the partition of `__share_group_state` that Kafka's
ShareCoordinatorService picks: `Utils.abs("group:topicId:partition".hashCode()) %
share.coordinator.state.topic.num.partitions`, with the topic id in Kafka's text form,
so that placement agrees with Kafka's tools.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from herdless.coordinator.now import Now
from herdless.coordinator.placement import partition_for
from herdless.coordinator.result import Result
from herdless.coordinator.runtime.contract import CoordinatorType
from herdless.coordinator.runtime.writer import TopicPartition
from herdless.coordinator.share_state.config import ShareCoordinatorConfig
from herdless.coordinator.share_state.manager import ShareStateManager
from herdless.coordinator.share_state.state import PartitionState, SharePartitionKey, StateBatch
from herdless.protocol.errors import ErrorCode
from herdless.protocol.kafka_uuid import kafka_uuid_str, parse_kafka_uuid

SHARE_GROUP_STATE_TOPIC = "__share_group_state"


def coordinator_key(key: SharePartitionKey) -> str:
    """The key FindCoordinator's SHARE key type names (Kafka's asCoordinatorKey)."""
    return f"{key.group_id}:{kafka_uuid_str(key.topic_id)}:{key.partition}"


def parse_coordinator_key(text: str) -> SharePartitionKey:
    """The share partition a FindCoordinator SHARE key names; ValueError if it names none.
    The group id may itself hold colons: the topic id and partition are the last two."""
    group_id, topic_id, partition = text.rsplit(":", 2) if text.count(":") >= 2 else ("", "", "")
    if not group_id:
        raise ValueError(f"{text!r} is not groupId:topicId:partition")
    if not partition.isdigit():
        raise ValueError(f"{text!r} names no partition")
    return SharePartitionKey(group_id, parse_kafka_uuid(topic_id), int(partition))


def share_state_partition(key: SharePartitionKey, num_partitions: int) -> int:
    return partition_for(coordinator_key(key), num_partitions)


class ShareCoordinatorShard:
    def __init__(self, config: ShareCoordinatorConfig) -> None:
        self.shares = ShareStateManager(config)

    # -- the runtime's calls -----------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        self.shares.replay(key, value)

    def replay_records(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        for key, value in zip(keys, values, strict=True):
            self.shares.replay(key, value)

    def on_loaded(self, now: Now) -> Result:
        # No timers: share state changes only when a leader or the group coordinator asks.
        return Result()

    def unload(self) -> Result:
        # Nothing is parked: every request is answered by its own operation.
        return Result()

    def poll(self, now: Now) -> Result:
        return Result()

    def next_deadline(self) -> int | None:
        return None

    def postpone_timers(self, stalled_ms: int) -> Result:
        return Result()

    # -- writes --------------------------------------------------------------------------

    def initialize(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int, token: Hashable, now: Now
    ) -> Result:
        return self.shares.initialize(key, state_epoch, start_offset, token, now)

    def read(self, key: SharePartitionKey, leader_epoch: int, token: Hashable, now: Now) -> Result:
        # A write: a newer leader epoch is recorded before the state is answered.
        return self.shares.read(key, leader_epoch, token, now)

    def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[StateBatch, ...],
        token: Hashable,
        now: Now,
    ) -> Result:
        return self.shares.write(key, state_epoch, leader_epoch, start_offset, batches, token, now)

    def delete(self, key: SharePartitionKey, token: Hashable, now: Now) -> Result:
        return self.shares.delete(key, token)

    # -- reads ---------------------------------------------------------------------------

    def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> PartitionState | ErrorCode:
        return self.shares.read_summary(key, leader_epoch)


def share_coordinator(
    config: ShareCoordinatorConfig,
) -> CoordinatorType[ShareCoordinatorShard]:
    """The share coordinator as the runtime hosts it, on `__share_group_state`."""

    def build(tp: TopicPartition) -> ShareCoordinatorShard:
        return ShareCoordinatorShard(config)

    return CoordinatorType(SHARE_GROUP_STATE_TOPIC, build)
