"""Which coordination partition carries which messages.

The hash is the Go library's construction (md5, first 8 bytes as a
little-endian integer) but over topic *and* partition, as the design document
says, so the partitions of one busy topic spread over the coordination log.
"""

from __future__ import annotations

import hashlib

DEFAULT_TOPIC = "__marshal"
DEFAULT_PARTITIONS = 8


def _bucket(key: bytes, count: int) -> int:
    return int.from_bytes(hashlib.md5(key).digest()[:8], "little") % count


def coordinating_partition(topic: str, partition: int, count: int) -> int:
    """Where every claim, heartbeat and release for (topic, partition) goes."""
    return _bucket(f"{topic}\x00{partition}".encode(), count)


def member_partition(group_id: str, count: int) -> int:
    """Where a group's Present messages go: one partition, so one clock judges them all."""
    return _bucket(b"\x01" + group_id.encode(), count)
