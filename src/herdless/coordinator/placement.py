"""Which `__consumer_offsets` partition owns a group, computed exactly as Kafka does.

Kafka uses `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`, so
placement must reproduce Java's String.hashCode (over UTF-16 code units, with
int32 overflow) and Utils.abs (which maps Integer.MIN_VALUE to 0, where
Math.abs would return it unchanged and negative).
"""

from __future__ import annotations

from functools import lru_cache

_INT32_MIN = -(2**31)


def java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(n: int) -> int:
    return 0 if n == _INT32_MIN else abs(n)


# Every group request asks where its group lives, and hashing the id in Python cost
# a few per cent of a broker answering heartbeats.
@lru_cache(maxsize=1 << 16)
def partition_for(group_id: str, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return kafka_abs(java_string_hash(group_id)) % num_partitions
