"""An OffsetCommit's topics, partitions and answers as plain named tuples.

A commit is the busiest request a group coordinator serves, and building kafka-python's
objects for it cost a tenth of a commit in the broker. So the compiled codec decodes an
OffsetCommit request's topics and partitions straight into these tuples, and encodes a
response held in them, reading each field by name (codec.py sets that up once). The
coordinator takes and gives the same tuples (coordinator.messages), so a commit crosses
the broker without a conversion. Named tuples: one is made per partition committed, and
a frozen dataclass costs several times as much to make.
"""

from __future__ import annotations

from typing import NamedTuple

from herdless.protocol.errors import ErrorCode

NO_LEADER_EPOCH = -1


class CommitPartition(NamedTuple):
    partition: int
    offset: int
    metadata: str | None = ""
    leader_epoch: int = NO_LEADER_EPOCH
    commit_timestamp: int = -1  # v1 only; -1 means "now"


class CommitTopic(NamedTuple):
    name: str
    partitions: tuple[CommitPartition, ...]


class PartitionError(NamedTuple):
    partition: int
    error_code: ErrorCode

    @property
    def partition_index(self) -> int:
        """The partition, by the name the response's schema gives it."""
        return self.partition


class TopicErrors(NamedTuple):
    name: str
    partitions: tuple[PartitionError, ...]


class CommitResponse(NamedTuple):
    """A whole OffsetCommit response, encoded in place of kafka-python's message."""

    throttle_time_ms: int
    topics: tuple[TopicErrors, ...]
