"""The committed offsets of one shard: OffsetCommit, TxnOffsetCommit, OffsetFetch,
OffsetDelete and expiry.

Kafka's OffsetMetadataManager, step by step. It depends on the groups one way: it asks
them (GroupsView) whether a commit, fetch or delete may go ahead, and to make the
simple group an offset without membership belongs to; the groups never ask it
anything. What involves both, deleting a group with its offsets and expiring them,
the shard puts together, as Kafka's GroupCoordinatorShard does.

Offset records reach the table only through `replay`, the same path that loads the
shard, so live commits and loading cannot disagree. A transaction's offsets wait in
pending_offsets.py until the marker that ends it is replayed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable, Iterable, Sequence
from functools import lru_cache
from typing import Any, Protocol

from herdless.coordinator.classic_group import ClassicGroup
from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.messages import (
    NO_LEADER_EPOCH,
    NO_OFFSET,
    FetchedPartition,
    FetchedTopic,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionError,
    TopicErrors,
    TxnOffsetCommitRequest,
)
from herdless.coordinator.now import Now
from herdless.coordinator.offsets import BaseTimestamp, OffsetAndMetadata, OffsetTable, is_expired
from herdless.coordinator.pending_offsets import PendingOffsets
from herdless.coordinator.records import (
    NO_TIMESTAMP,
    OffsetCommitKey,
    Record,
    decode_offset_key_prefix,
    encode_offset,
    offset_commit_record,
    offset_key_head,
)
from herdless.coordinator.result import Reply, Result, TransactionalProducer
from herdless.coordinator.state import GroupState
from herdless.protocol.errors import ErrorCode


class SubscribedGroup(Protocol):
    """A group as its offsets see it: classic or consumer alike."""

    @property
    def group_id(self) -> str: ...

    def is_subscribed_to_topic(self, topic: str) -> bool: ...


class GroupsView(Protocol):
    """What the offsets ask of the groups (classic_group_manager.py answers)."""

    def ensure_group(self, group_id: str) -> None:
        """Offsets were written for `group_id`: a group has the id from now on."""
        ...

    def validate_offset_commit(self, req: OffsetCommitRequest) -> ErrorCode: ...

    def validate_txn_offset_commit(self, req: TxnOffsetCommitRequest) -> ErrorCode: ...

    def offset_committed(self, out: Result, req: OffsetCommitRequest, now: Now) -> None:
        """A valid commit is being written (the group exists after it; a member that
        commits is alive)."""
        ...

    def validate_offset_fetch(self, req: OffsetFetchRequest) -> tuple[ErrorCode, bool]:
        """The error to answer, and whether the group's offsets may be shown."""
        ...

    def validate_offset_delete(self, group_id: str) -> tuple[ErrorCode, SubscribedGroup | None]:
        """The error to answer, or the group whose subscriptions guard each partition."""
        ...


class OffsetManager:
    def __init__(self, config: CoordinatorConfig, groups: GroupsView) -> None:
        self.config = config
        self.table = OffsetTable()
        self.pending = PendingOffsets()
        self._groups = groups

    # ======================================================================
    # replay
    # ======================================================================

    def replay(self, key: OffsetCommitKey, value: bytes | None) -> None:
        """The state change of one offset record (`value` encoded, None a tombstone),
        shared by live writes and loading."""
        if value is None:
            self.table.remove(key.group, key.topic, key.partition)
            self.pending.removed(key.group, key.topic, (key.partition,))
            return
        self._groups.ensure_group(key.group)
        self.table.put(key.group, key.topic, key.partition, value)
        if self.pending.has_open_transactions(key.group):
            self.pending.committed(key.group, key.topic, (key.partition,))

    def replay_run(
        self, group_id: str, topic: str, partitions: Sequence[int], values: Sequence[bytes | None]
    ) -> None:
        """replay() of a run of one group's and topic's records (offset_run), every value
        a commit or every one a tombstone."""
        if values[0] is None:
            self.table.remove_all(group_id, topic, partitions)
            self.pending.removed(group_id, topic, partitions)
            return
        self._replay_commits(group_id, topic, zip(partitions, values, strict=True))  # type: ignore[arg-type]

    def _replay_commits(
        self, group_id: str, topic: str, values: Iterable[tuple[int, bytes]]
    ) -> None:
        """replay() of each (partition, encoded value) of one group and topic, in order."""
        self._groups.ensure_group(group_id)
        if self.pending.has_open_transactions(group_id):
            values = list(values)
            self.pending.committed(group_id, topic, (partition for partition, _ in values))
        self.table.put_all(group_id, topic, values)

    def replay_transactional(
        self, producer_id: int, key: OffsetCommitKey, value: bytes | None
    ) -> None:
        """An offset record of `producer_id`'s open transaction: pending until its marker."""
        if value is None:
            # TxnOffsetCommit writes none; Kafka applies one as any tombstone.
            self.replay(key, None)
            return
        self._groups.ensure_group(key.group)
        self.pending.add(producer_id, key.group, key.topic, key.partition, value)

    def replay_end_transaction(self, producer_id: int, committed: bool) -> None:
        """`producer_id`'s transaction ended: on COMMIT its offsets become the committed
        ones where no plain commit came after them (Kafka's replayEndTransactionMarker)."""
        for (group_id, topic, partition), value in self.pending.end(producer_id, committed):
            self._groups.ensure_group(group_id)
            self.table.put(group_id, topic, partition, value)

    def clear(self) -> None:
        self.table.clear()
        self.pending.clear()

    # ======================================================================
    # OffsetCommit, OffsetFetch, OffsetDelete
    # ======================================================================

    def offset_commit(self, req: OffsetCommitRequest, token: Hashable, now: Now) -> Result:
        out = Result()
        error = self._groups.validate_offset_commit(req)
        if error is not ErrorCode.NONE:
            topics = tuple(
                TopicErrors(t.name, tuple(PartitionError(p.partition, error) for p in t.partitions))
                for t in req.topics
            )
            out.replies.append(Reply(token, OffsetCommitResponse(topics)))
            return out
        self._groups.offset_committed(out, req, now)

        # Each partition's record is encoded straight from the request, and a topic's
        # offsets go into the table together: what _write_offset does for one, without
        # an object per partition on the way (this runs for every partition committed).
        expire = (
            NO_TIMESTAMP if req.retention_time_ms == -1 else now.wall_ms + req.retention_time_ms
        )
        max_metadata = self.config.offset_metadata_max_bytes
        records = out.records
        topics = []
        for topic in req.topics:
            head = offset_key_head(req.group_id, topic.name)
            results = []
            written = []
            # Unpacked in the loop: six attribute lookups a partition cost more.
            for partition, offset, metadata, leader_epoch, commit_ts in topic.partitions:
                if metadata is None:
                    metadata = ""
                elif metadata and _java_length(metadata) > max_metadata:
                    results.append(PartitionError(partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                if commit_ts == -1:
                    commit_ts = now.wall_ms
                value = encode_offset(offset, leader_epoch, metadata, commit_ts, expire)
                records.append(Record(head + _PARTITION.pack(partition), value))
                written.append((partition, value))
                results.append(_committed(partition))
            if written:
                self._replay_commits(req.group_id, topic.name, written)
            topics.append(TopicErrors(topic.name, tuple(results)))
        out.replies.append(Reply(token, OffsetCommitResponse(tuple(topics))))
        return out

    def txn_offset_commit(self, req: TxnOffsetCommitRequest, token: Hashable, now: Now) -> Result:
        """Offsets committed inside a transaction (Kafka's commitTransactionalOffset): written
        as a transactional batch of the producer, pending until the transaction ends. The
        runtime replays them once written (TransactionalProducer), not this."""
        out = Result(producer=TransactionalProducer(req.producer_id, req.producer_epoch))
        error = self._groups.validate_txn_offset_commit(req)
        if error is ErrorCode.NONE and (req.producer_id < 0 or req.producer_epoch < 0):
            # No producer a transaction coordinator gave out: its offsets could never be
            # ended by a marker.
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if error is not ErrorCode.NONE:
            topics = tuple(
                TopicErrors(t.name, tuple(PartitionError(p.partition, error) for p in t.partitions))
                for t in req.topics
            )
            out.replies.append(Reply(token, OffsetCommitResponse(topics)))
            return out
        max_metadata = self.config.offset_metadata_max_bytes
        topics = []
        for topic in req.topics:
            head = offset_key_head(req.group_id, topic.name)
            results = []
            for partition, offset, metadata, leader_epoch, _ in topic.partitions:
                if metadata is None:
                    metadata = ""
                elif _java_length(metadata) > max_metadata:
                    results.append(PartitionError(partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                # Retention runs from the commit, as for any commit from OffsetCommit v5 on.
                value = encode_offset(offset, leader_epoch, metadata, now.wall_ms, NO_TIMESTAMP)
                out.records.append(Record(head + _PARTITION.pack(partition), value))
                results.append(_committed(partition))
            topics.append(TopicErrors(topic.name, tuple(results)))
        out.replies.append(Reply(token, OffsetCommitResponse(tuple(topics))))
        return out

    def offset_fetch(self, req: OffsetFetchRequest, token: Hashable, now: Now) -> Result:
        out = Result()
        error, known = self._groups.validate_offset_fetch(req)
        if error is not ErrorCode.NONE:
            out.replies.append(Reply(token, OffsetFetchResponse(req.group_id, (), error)))
            return out
        # require_stable (v7+): a partition a transaction has an offset pending for is
        # answered UNSTABLE_OFFSET_COMMIT, and the client asks again after it ends.
        group_id = req.group_id
        pending = self.pending
        unstable = req.require_stable and pending.has_open_transactions(group_id)
        topics: list[FetchedTopic] = []
        if req.topics is None:
            if known:
                for name, partitions in self.table.topics(group_id).items():
                    topics.append(
                        FetchedTopic(
                            name,
                            tuple(
                                _unstable(p)
                                if unstable and pending.has_pending(group_id, name, p)
                                else _fetched(p, o)
                                for p, o in partitions.items()
                            ),
                        )
                    )
        else:
            for t in req.topics:
                parts = []
                for p in t.partitions:
                    if unstable and pending.has_pending(group_id, t.name, p):
                        parts.append(_unstable(p))
                        continue
                    o = self.table.get(group_id, t.name, p) if known else None
                    parts.append(
                        _fetched(p, o)
                        if o is not None
                        else FetchedPartition(p, NO_OFFSET, NO_LEADER_EPOCH, "")
                    )
                topics.append(FetchedTopic(t.name, tuple(parts)))
        out.replies.append(Reply(token, OffsetFetchResponse(req.group_id, tuple(topics))))
        return out

    def offset_delete(self, req: OffsetDeleteRequest, token: Hashable, now: Now) -> Result:
        out = Result()
        error, group = self._groups.validate_offset_delete(req.group_id)
        if error is not ErrorCode.NONE or group is None:
            out.replies.append(Reply(token, OffsetDeleteResponse(error)))
            return out
        topics = []
        for t in req.topics:
            results = []
            for p in t.partitions:
                if group.is_subscribed_to_topic(t.name):
                    results.append(PartitionError(p, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                # As Kafka: a tombstone also for an offset a transaction has pending only.
                if self.table.get(req.group_id, t.name, p) is not None or (
                    self.pending.has_pending(req.group_id, t.name, p)
                ):
                    self._write_offset(out, OffsetCommitKey(req.group_id, t.name, p), None)
                results.append(PartitionError(p, ErrorCode.NONE))
            topics.append(TopicErrors(t.name, tuple(results)))
        out.replies.append(Reply(token, OffsetDeleteResponse(ErrorCode.NONE, tuple(topics))))
        return out

    # ======================================================================
    # deleting and expiring
    # ======================================================================

    def delete_all(self, out: Result, group_id: str) -> None:
        """Tombstones for every offset of the group, those transactions have pending too."""
        for topic, partition, _ in self.table.entries(group_id):
            self._write_offset(out, OffsetCommitKey(group_id, topic, partition), None)
        for topic, partition in self.pending.partitions(group_id):
            self._write_offset(out, OffsetCommitKey(group_id, topic, partition), None)

    def expire(
        self, out: Result, group: SubscribedGroup, base: BaseTimestamp | None, now: Now
    ) -> bool:
        """Tombstones for the group's expired offsets (`base`: from when each one's
        retention runs; None, none expires); True when the group has no offsets left, and
        no transaction open that may yet commit some (Kafka's cleanupExpiredOffsets)."""
        group_id = group.group_id
        if not self.table.has_group(group_id):
            return True
        if base is None:
            return False
        retention = self.config.offsets_retention_ms
        pending = self.pending
        for topic, partition, offset in self.table.entries(group_id):
            if group.is_subscribed_to_topic(topic):
                continue
            # Not while a transaction has an offset pending for the partition: it is
            # about to be committed again.
            if is_expired(offset, now.wall_ms, retention, base) and not pending.has_pending(
                group_id, topic, partition
            ):
                self._write_offset(out, OffsetCommitKey(group_id, topic, partition), None)
        return not self.table.has_group(group_id) and not pending.has_open_transactions(group_id)

    def _write_offset(
        self, out: Result, key: OffsetCommitKey, offset: OffsetAndMetadata | None
    ) -> None:
        """Append an offset record (None: a tombstone) and apply it as replay would."""
        record = offset_commit_record(key, None if offset is None else offset.to_record())
        out.records.append(record)
        self.replay(key, record.value)


def classic_expiry_base(group: ClassicGroup) -> BaseTimestamp | None:
    """From when an offset's retention runs, or None if the group's offsets never expire now."""
    if group.protocol_type is None:
        # Manual assignment: each offset lives retention past its last commit.
        return lambda o: o.commit_timestamp_ms
    if group.is_in(GroupState.EMPTY):
        # An empty group keeps its offsets retention past the moment it emptied.
        since = group.current_state_timestamp
        return lambda o: o.commit_timestamp_ms if since is None else since
    if (
        group.uses_consumer_protocol
        and group.subscribed_topics is not None
        and group.is_in(GroupState.STABLE)
    ):
        # Offsets of topics the live group no longer reads expire after their commit.
        return lambda o: o.commit_timestamp_ms
    return None


def since_commit(offset: OffsetAndMetadata) -> int:
    """A consumer group's offsets of topics it does not read expire retention after their
    commit."""
    return offset.commit_timestamp_ms


@lru_cache(maxsize=1024)
def _offset_keys_split(size: int, n: int) -> Callable[[bytes], tuple[Any, ...]]:
    """Unpacks n keys of `size` bytes, joined, into head, partition, head, partition..."""
    return struct.Struct(">" + f"{size - 4}si" * n).unpack


def offset_run(keys: Sequence[bytes]) -> tuple[str, str, tuple[int, ...]] | None:
    """(group, topic, partitions) when `keys` are two or more offset commit keys of one
    group and topic that decode_key would read as exactly that; else None."""
    size = len(keys[0]) if keys else 0
    if len(keys) < 2 or size <= 4 or len(set(map(len, keys))) != 1:
        return None
    fields = _offset_keys_split(size, len(keys))(b"".join(keys))
    heads, partitions = fields[0::2], fields[1::2]
    if heads.count(heads[0]) != len(heads):
        return None
    group_and_topic = decode_offset_key_prefix(heads[0])
    return None if group_and_topic is None else (*group_and_topic, partitions)


def _java_length(s: str) -> int:
    """String.length() in Java counts UTF-16 code units; Kafka's size limits use it."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le")) // 2


_PARTITION = struct.Struct(">i")


@lru_cache(maxsize=4096)
def _committed(partition: int) -> PartitionError:
    """A partition's answer to a commit that stored it: immutable, so shared."""
    return PartitionError(partition, ErrorCode.NONE)


def _unstable(partition: int) -> FetchedPartition:
    return FetchedPartition(
        partition, NO_OFFSET, NO_LEADER_EPOCH, "", ErrorCode.UNSTABLE_OFFSET_COMMIT
    )


def _fetched(partition: int, o: OffsetAndMetadata) -> FetchedPartition:
    return FetchedPartition(partition, o.offset, o.leader_epoch, o.metadata)
