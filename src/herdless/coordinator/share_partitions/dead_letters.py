"""Why a share partition archived a record, and what its dead letter says (KIP-1191).

A record is archived without being accepted in two ways that a share group's
dead-letter topic hears of: a member rejected it, or it was delivered as often
as the delivery count limit allows and then released, by its member or by its
lock running out. Gaps and records of aborted transactions are archived too,
but there is no record to tell of.

The dead letter carries KIP-1191's context headers (`__dlq.errors.*`), as
Kafka writes them, and herdless's one more, the reason, which KIP-1191 leaves
out and users ask for first.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

# KIP-1191's header names, as Kafka's ShareGroupDLQRecordHelper writes them.
HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
# herdless's: why the record was archived (ArchiveReason's value).
HEADER_REASON = "__dlq.errors.reason"


class ArchiveReason(enum.Enum):
    REJECTED = "rejected"
    DELIVERY_LIMIT_REACHED = "delivery limit reached"


@dataclass(frozen=True, slots=True)
class ArchivedRecord:
    """A record the share partition archived unaccepted, with how often it was delivered."""

    offset: int
    delivery_count: int
    reason: ArchiveReason


def dead_letter_headers(
    group_id: str, topic: str, partition: int, record: ArchivedRecord
) -> list[tuple[str, bytes]]:
    """The context headers of `record`'s dead letter, in KIP-1191's order, values as UTF-8
    text (numbers in decimal), as Kafka writes them."""
    return [
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(record.offset).encode()),
        (HEADER_GROUP, group_id.encode()),
        (HEADER_DELIVERY_COUNT, str(record.delivery_count).encode()),
        (HEADER_REASON, record.reason.value.encode()),
    ]


def dead_letter_partition(source_partition: int, dead_letter_partitions: int) -> int:
    """The partition of the dead-letter topic a record of `source_partition` goes to: the
    same index, wrapped round (Kafka's dlqDestinationPartition), so that the dead letters
    of one partition keep their order."""
    return source_partition % dead_letter_partitions
