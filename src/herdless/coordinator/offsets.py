"""The committed-offset table of one shard, and when an offset has expired (KIP-211)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from herdless.coordinator.records import NO_TIMESTAMP, OffsetCommitValue


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only commits with an explicit retention have one

    @classmethod
    def from_record(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        expire = None if value.expire_timestamp == NO_TIMESTAMP else value.expire_timestamp
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, expire)

    def to_record(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            offset=self.offset,
            metadata=self.metadata,
            commit_timestamp=self.commit_timestamp_ms,
            leader_epoch=self.leader_epoch,
            expire_timestamp=(
                NO_TIMESTAMP if self.expire_timestamp_ms is None else self.expire_timestamp_ms
            ),
        )


BaseTimestamp = Callable[[OffsetAndMetadata], int]


def is_expired(
    offset: OffsetAndMetadata, now_ms: int, retention_ms: int, base_timestamp: BaseTimestamp
) -> bool:
    if offset.expire_timestamp_ms is not None:
        # Commits from OffsetCommit v2-v4 with a retention time keep their own deadline.
        return now_ms >= offset.expire_timestamp_ms
    return now_ms - base_timestamp(offset) >= retention_ms


class OffsetTable:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._by_group.get(group_id, {}).get(topic, {}).get(partition)

    def put(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata) -> None:
        self._by_group.setdefault(group_id, {}).setdefault(topic, {})[partition] = value

    def remove(self, group_id: str, topic: str, partition: int) -> None:
        topics = self._by_group.get(group_id)
        if topics is None or topic not in topics:
            return
        topics[topic].pop(partition, None)
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self._by_group[group_id]

    def has_group(self, group_id: str) -> bool:
        return group_id in self._by_group

    def topics(self, group_id: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        return self._by_group.get(group_id, {})

    def entries(self, group_id: str) -> Iterator[tuple[str, int, OffsetAndMetadata]]:
        for topic, partitions in list(self._by_group.get(group_id, {}).items()):
            for partition, value in list(partitions.items()):
                yield topic, partition, value

    def group_ids(self) -> list[str]:
        return list(self._by_group)

    def clear(self) -> None:
        self._by_group.clear()
