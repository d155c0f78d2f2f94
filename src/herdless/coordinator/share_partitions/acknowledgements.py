"""What a share consumer says of the records it acquired (ShareFetch and ShareAcknowledge
AcknowledgementBatches), checked for the shape Kafka requires before any is applied."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class AcknowledgeType(enum.IntEnum):
    """Kafka's AcknowledgeType ids. GAP marks an offset with no record to deliver (compacted
    away, a transaction marker): it is archived, as REJECT archives a record."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class InvalidAcknowledgement(ValueError):
    """An acknowledgement that is malformed whatever the records' state: Kafka's
    INVALID_REQUEST."""


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """Offsets first to last, inclusive, with one type for all, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[AcknowledgeType, ...]

    def type_at(self, offset: int) -> AcknowledgeType:
        if len(self.types) == 1:
            return self.types[0]
        return self.types[offset - self.first_offset]


def acknowledgement_batches(
    raw: Sequence[tuple[int, int, Sequence[int]]],
) -> tuple[AcknowledgementBatch, ...]:
    """Batches from (first, last, types) as a request carries them; InvalidAcknowledgement
    unless each range is well formed, the ranges ascend without overlapping, and each has
    one known type or one per offset (Kafka's ShareFetch and ShareAcknowledge checks)."""
    batches: list[AcknowledgementBatch] = []
    previous_last = -1
    for first, last, types in raw:
        if first < 0 or last < first:
            raise InvalidAcknowledgement(f"acknowledgement batch {first}-{last} is not a range")
        if first <= previous_last:
            raise InvalidAcknowledgement(
                f"acknowledgement batch {first}-{last} overlaps or precedes the one before"
            )
        if len(types) != 1 and len(types) != last - first + 1:
            raise InvalidAcknowledgement(
                f"acknowledgement batch {first}-{last} has {len(types)} types: one, or one"
                " per offset"
            )
        try:
            known = tuple(AcknowledgeType(value) for value in types)
        except ValueError:
            raise InvalidAcknowledgement(
                f"acknowledgement batch {first}-{last} has an unknown acknowledge type"
                f" among {list(types)}"
            ) from None
        batches.append(AcknowledgementBatch(first, last, known))
        previous_last = last
    return tuple(batches)
