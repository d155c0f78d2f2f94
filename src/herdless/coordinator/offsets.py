"""The committed-offset table of one shard, and when an offset has expired (KIP-211)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from herdless.coordinator.records import (
    NO_TIMESTAMP,
    OffsetCommitValue,
    decode_offset_commit_value,
    offset_commit_value_offset,
)


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
    offset: OffsetAndMetadata, wall_ms: int, retention_ms: int, base_timestamp: BaseTimestamp
) -> bool:
    """`wall_ms`: the wall clock, as the written timestamps it is compared with."""
    if offset.expire_timestamp_ms is not None:
        # Commits from OffsetCommit v2-v4 with a retention time keep their own deadline.
        return wall_ms >= offset.expire_timestamp_ms
    return wall_ms - base_timestamp(offset) >= retention_ms


class OffsetTable:
    """Committed offsets by group, topic and partition.

    Each is kept as the value of its record (OffsetCommitValue, encoded) and
    decoded when read. A loaded shard can hold millions, nearly all never read
    before they are committed again: as bytes they cost no decode at load, half
    the memory, and nothing to the garbage collector, which never has to scan
    them (a frozen dataclass per offset made each full collection walk them all).
    So a stored value that does not decode (none is ever written so) fails the
    read that meets it with RecordFormatError, where decoding at load failed the load.
    """

    def __init__(self) -> None:
        self._by_group: dict[str, dict[str, dict[int, bytes]]] = {}

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        value = self._by_group.get(group_id, {}).get(topic, {}).get(partition)
        return None if value is None else _decode(value)

    def put(self, group_id: str, topic: str, partition: int, value: bytes) -> None:
        """`value`: an encoded OffsetCommitValue, as its record holds it."""
        self._by_group.setdefault(group_id, {}).setdefault(topic, {})[partition] = value

    def put_all(self, group_id: str, topic: str, values: Iterable[tuple[int, bytes]]) -> None:
        """put() of each (partition, value) in order."""
        self._by_group.setdefault(group_id, {}).setdefault(topic, {}).update(values)

    def remove(self, group_id: str, topic: str, partition: int) -> None:
        self.remove_all(group_id, topic, (partition,))

    def remove_all(self, group_id: str, topic: str, partitions: Iterable[int]) -> None:
        topics = self._by_group.get(group_id)
        if topics is None or topic not in topics:
            return
        offsets = topics[topic]
        for partition in partitions:
            offsets.pop(partition, None)
        if not offsets:
            del topics[topic]
        if not topics:
            del self._by_group[group_id]

    def has_group(self, group_id: str) -> bool:
        return group_id in self._by_group

    def topics(self, group_id: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        return {
            topic: {p: _decode(v) for p, v in partitions.items()}
            for topic, partitions in self._by_group.get(group_id, {}).items()
        }

    def entries(self, group_id: str) -> Iterator[tuple[str, int, OffsetAndMetadata]]:
        for topic, partition, value in self._raw_entries(group_id):
            yield topic, partition, _decode(value)

    def committed_offsets(self, group_id: str) -> Iterator[tuple[str, int, int]]:
        """(topic, partition, offset) of each entry: all a lag metric needs, read
        without decoding the rest of the value."""
        for topic, partition, value in self._raw_entries(group_id):
            yield topic, partition, offset_commit_value_offset(value)

    def _raw_entries(self, group_id: str) -> Iterator[tuple[str, int, bytes]]:
        # Copied first: callers write tombstones for what they are given.
        for topic, partitions in list(self._by_group.get(group_id, {}).items()):
            for partition, value in list(partitions.items()):
                yield topic, partition, value

    def group_ids(self) -> list[str]:
        return list(self._by_group)

    def clear(self) -> None:
        self._by_group.clear()


def _decode(value: bytes) -> OffsetAndMetadata:
    return OffsetAndMetadata.from_record(decode_offset_commit_value(value))
