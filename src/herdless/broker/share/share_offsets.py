"""A share group's start offsets as an admin sees them: read, moved and deleted through
the Persister (Kafka's GroupCoordinatorService.describeShareGroupOffsets,
alterShareGroupOffsets and deleteShareGroupOffsets, and the share state DeleteGroups
removes).

Kafka's group coordinator records which partitions a share group has initialized; here
the share coordinator is the one record of it: a partition has state when its summary
names a start offset. Finding them all reads the summary of every partition of every
topic that is not internal, which the admin paths can afford and heartbeats never pay.

A start offset is moved by initializing the partition again with the next state epoch:
a leader still holding the old state is fenced at its next write (FENCED_STATE_EPOCH),
and where this broker leads the partition its cached state is dropped at once, so that
the next fetch reads the new start.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from herdless.broker.coordinators.group_coordinator import INTERNAL_TOPICS
from herdless.broker.replication.replica_manager import ReplicaManager
from herdless.broker.share.leader import ShareLeader
from herdless.broker.share.persister import Persister
from herdless.cluster.metadata import MetadataView, TopicMetadata
from herdless.coordinator.share_state import SHARE_GROUP_STATE_TOPIC
from herdless.coordinator.share_state.state import (
    UNINITIALIZED_START_OFFSET,
    RecordState,
    SharePartitionKey,
    ShareStateError,
)
from herdless.protocol.errors import ErrorCode

# No leader epoch: the summary is read without fencing any leader.
NO_EPOCH = -1
# A figure that cannot be told here: the partition's log or state is on another broker.
UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class StartOffset:
    """One partition of a share group: where its in-flight window starts."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    start_offset: int
    leader_epoch: int
    lag: int
    # A Kafka error code, as the share coordinator answered it.
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    # Records not settled yet in the in-flight window, and records archived in it: told
    # where this broker leads the share partition and holds its state, else UNKNOWN.
    in_flight: int = UNKNOWN
    archived: int = UNKNOWN


class ShareOffsets:
    def __init__(
        self,
        persister: Persister,
        metadata: MetadataView,
        replicas: ReplicaManager,
        leader: ShareLeader | None,
    ) -> None:
        self._persister = persister
        self._metadata = metadata
        self._replicas = replicas
        self._leader = leader

    def topic_id(self, topic: str) -> uuid.UUID | None:
        described = self._metadata.topic(topic)
        return None if described is None else described.topic_id

    def partitions(self, topic: str) -> int | None:
        return self._metadata.partition_count(topic)

    def consumable_topics(self) -> list[str]:
        """Every topic a share group could consume: all but the brokers' own."""
        return [
            name
            for name in self._metadata.topic_names()
            if name not in INTERNAL_TOPICS and name != SHARE_GROUP_STATE_TOPIC
        ]

    async def describe(
        self, group_id: str, wanted: Iterable[tuple[str, Iterable[int]]] | None
    ) -> list[StartOffset]:
        """The start offset of each partition asked for; all the group has state for
        when `wanted` is None."""
        if wanted is None:
            every = [(t, range(self.partitions(t) or 0)) for t in self.consumable_topics()]
            return [
                offset
                for offset in await self._read_all(group_id, every)
                if offset.start_offset != UNINITIALIZED_START_OFFSET
            ]
        return await self._read_all(group_id, wanted)

    async def _read_all(
        self, group_id: str, wanted: Iterable[tuple[str, Iterable[int]]]
    ) -> list[StartOffset]:
        """The partitions' summaries, asked all at once: in a cluster most are a request
        to another broker, and a group's partitions may be many."""
        reads = []
        for topic, partitions in wanted:
            described = self._metadata.topic(topic)
            epochs = (
                {}
                if described is None
                else {p.partition: p.leader_epoch for p in described.partitions}
            )
            reads += [self._read(group_id, topic, described, epochs, p) for p in partitions]
        return list(await asyncio.gather(*reads))

    async def _read(
        self,
        group_id: str,
        topic: str,
        described: TopicMetadata | None,
        epochs: dict[int, int],
        partition: int,
    ) -> StartOffset:
        if described is None:
            return _failed(topic, uuid.UUID(int=0), partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if partition not in epochs:
            return _failed(
                topic, described.topic_id, partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        key = SharePartitionKey(group_id, described.topic_id, partition)
        try:
            summary = await self._persister.read_summary(key, NO_EPOCH)
        except ShareStateError as exc:
            return _failed(topic, described.topic_id, partition, exc.error_code, str(exc))
        start = summary.start_offset
        in_flight, archived = self._counts(key)
        return StartOffset(
            topic,
            described.topic_id,
            partition,
            start,
            epochs[partition],
            self._lag(topic, partition, start),
            in_flight=in_flight,
            archived=archived,
        )

    def _lag(self, topic: str, partition: int, start: int) -> int:
        """The records not yet settled, as far as this broker can tell: its high watermark
        less the start offset where it leads the partition."""
        if start == UNINITIALIZED_START_OFFSET or not self._replicas.leads(topic, partition):
            return UNKNOWN
        high_watermark = self._replicas.leader_log(topic, partition).high_watermark
        return max(high_watermark - start, 0)

    def _counts(self, key: SharePartitionKey) -> tuple[int, int]:
        """(records in flight, records archived in the window) of a share partition led
        here; UNKNOWN where its state is not held here."""
        state = None if self._leader is None else self._leader.partitions.share_partition(key)
        if state is None:
            return UNKNOWN, UNKNOWN
        counts = state.counts()
        unsettled = counts[RecordState.AVAILABLE] + counts[RecordState.ACQUIRED]
        return unsettled, counts[RecordState.ARCHIVED]

    async def alter(self, group_id: str, topic_id: uuid.UUID, partition: int, start: int) -> None:
        """Move the partition's start offset; raises ShareStateError."""
        key = SharePartitionKey(group_id, topic_id, partition)
        summary = await self._persister.read_summary(key, NO_EPOCH)
        await self._persister.initialize(key, summary.state_epoch + 1, start)
        await self._forget(key)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partitions: int) -> None:
        """Forget the group's state of every partition of a topic; raises ShareStateError."""
        for partition in range(partitions):
            key = SharePartitionKey(group_id, topic_id, partition)
            await self._persister.delete(key)
            await self._forget(key)

    async def delete_group(self, group_id: str) -> None:
        """Forget all the group's share state (before DeleteGroups deletes the group)."""
        for offset in await self.describe(group_id, None):
            key = SharePartitionKey(group_id, offset.topic_id, offset.partition)
            await self._persister.delete(key)
            await self._forget(key)

    async def _forget(self, key: SharePartitionKey) -> None:
        if self._leader is not None:
            await self._leader.partitions.forget(key)


def denied(topic: str, topic_id: uuid.UUID, partition: int) -> StartOffset:
    """A partition of a topic the caller may not describe: its error alone."""
    return _failed(topic, topic_id, partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _failed(
    topic: str,
    topic_id: uuid.UUID,
    partition: int,
    error_code: int,
    message: str | None = None,
) -> StartOffset:
    return StartOffset(
        topic,
        topic_id,
        partition,
        UNINITIALIZED_START_OFFSET,
        NO_EPOCH,
        UNKNOWN,
        error_code,
        message,
    )
