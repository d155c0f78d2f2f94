"""What a share group's partitions run with: the broker's group.share.* settings, under
the share group's own configs where it has them (Kafka's GroupConfig share.* names),
read afresh at every fetch so that a change reaches the next one.

A group value that cannot be read, or lies outside the broker's bounds, leaves the
broker's: the configs are validated where they are set, and a store another writer
filled must not stop consumption.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from herdless.coordinator.dead_letter_config import (
    DEAD_LETTER_COPY_RECORD_ENABLE,
    dead_letter_topic,
)
from herdless.coordinator.group_config import (
    SHARE_AUTO_OFFSET_RESET,
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_ISOLATION_LEVEL,
    SHARE_PARTITION_MAX_RECORD_LOCKS,
    SHARE_RECORD_LOCK_DURATION_MS,
    GroupConfigs,
)
from herdless.coordinator.share_partitions.config import (
    DEFAULT_DELIVERY_COUNT_LIMIT,
    DEFAULT_MAX_RECORD_LOCKS,
    DEFAULT_RECORD_LOCK_DURATION_MS,
    SharePartitionConfig,
)


class AutoOffsetReset(enum.Enum):
    """Where a share partition no one has consumed starts: the log end (latest, Kafka's
    default, so a new group sees only what comes after it) or the log start."""

    LATEST = "latest"
    EARLIEST = "earliest"


class IsolationLevel(enum.Enum):
    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"


@dataclass(frozen=True, slots=True)
class ShareGroupLimits:
    """The broker's group.share.* settings that bound and default the groups' own."""

    record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
    min_record_lock_duration_ms: int = 15_000
    max_record_lock_duration_ms: int = 60_000
    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    partition_max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS


@dataclass(frozen=True, slots=True)
class DeadLetterTopic:
    """A share group's dead-letter topic (KIP-1191), and whether its dead letters carry
    the original record (errors.deadletterqueue.copy.record.enable)."""

    name: str
    copy_record: bool = False


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    partition: SharePartitionConfig
    auto_offset_reset: AutoOffsetReset
    isolation_level: IsolationLevel
    # None: records are archived silently, as in Kafka without a dead-letter topic.
    dead_letter: DeadLetterTopic | None = None


def share_group_settings(
    limits: ShareGroupLimits, configs: GroupConfigs | None, group_id: str
) -> ShareGroupSettings:
    explicit = configs.explicit(group_id) if configs is not None else {}

    def number(name: str, default: int, low: int, high: int) -> int:
        text = explicit.get(name, "")
        value = int(text) if text.strip().isdigit() else default
        return value if low <= value <= high else default

    def choice(name: str, kind: type[enum.Enum], default: enum.Enum) -> enum.Enum:
        try:
            return kind(explicit.get(name, default.value).strip().lower())
        except ValueError:
            return default

    partition = SharePartitionConfig(
        delivery_count_limit=number(
            SHARE_DELIVERY_COUNT_LIMIT,
            limits.delivery_count_limit,
            2,
            limits.delivery_count_limit,
        ),
        max_record_locks=number(
            SHARE_PARTITION_MAX_RECORD_LOCKS,
            limits.partition_max_record_locks,
            100,
            limits.partition_max_record_locks,
        ),
        record_lock_duration_ms=number(
            SHARE_RECORD_LOCK_DURATION_MS,
            limits.record_lock_duration_ms,
            limits.min_record_lock_duration_ms,
            limits.max_record_lock_duration_ms,
        ),
    )
    reset = choice(SHARE_AUTO_OFFSET_RESET, AutoOffsetReset, AutoOffsetReset.LATEST)
    isolation = choice(SHARE_ISOLATION_LEVEL, IsolationLevel, IsolationLevel.READ_UNCOMMITTED)
    assert isinstance(reset, AutoOffsetReset) and isinstance(isolation, IsolationLevel)
    topic = dead_letter_topic(explicit)
    copy = explicit.get(DEAD_LETTER_COPY_RECORD_ENABLE, "").strip().lower() == "true"
    dead_letter = None if topic is None else DeadLetterTopic(topic, copy)
    return ShareGroupSettings(partition, reset, isolation, dead_letter)
