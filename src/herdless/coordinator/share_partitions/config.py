"""The limits a share partition keeps to, with Kafka 4.2's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

# group.share.delivery.count.limit: a record delivered this often is archived rather than
# made available again when its lock runs out or it is released.
DEFAULT_DELIVERY_COUNT_LIMIT = 5
# group.share.partition.max.record.locks: how many records, from the start offset on, a
# share partition keeps in flight; no record past them is acquired until the start moves.
DEFAULT_MAX_RECORD_LOCKS = 2_000
# group.share.record.lock.duration.ms: how long an acquired record stays with its member.
DEFAULT_RECORD_LOCK_DURATION_MS = 30_000


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS
    record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
