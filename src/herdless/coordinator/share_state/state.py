"""The state of one share partition as it is persisted: its start offset and the batches
of in-flight records beyond it, each with its delivery state and count.

These are the values WriteShareGroupState and ReadShareGroupState carry between a share
partition's leader and the share coordinator, and what `__share_group_state` stores.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

# A start offset the share coordinator has never been told: the partition is not
# initialized yet, and its leader decides where to start (share.auto.offset.reset).
UNINITIALIZED_START_OFFSET = -1


class RecordState(enum.IntEnum):
    """A record's state in a share partition, with the ids Kafka persists (RecordState)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """One share group's view of one topic partition: the unit a share coordinator keeps."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets, both ends inclusive, that share one delivery state and count."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What ReadShareGroupState answers for one share partition."""

    state_epoch: int
    start_offset: int
    leader_epoch: int
    batches: tuple[StateBatch, ...] = ()

    @property
    def initialized(self) -> bool:
        return self.start_offset != UNINITIALIZED_START_OFFSET


class ShareStateError(Exception):
    """A share-state call refused with a Kafka error code (for example
    FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, COORDINATOR_NOT_AVAILABLE,
    UNKNOWN_TOPIC_OR_PARTITION), which the caller maps onto its own answer."""

    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message or f"share state error {error_code}")
        self.error_code = error_code
