"""Ranges of a partition's offsets that its files should hold and do not hold soundly.

Found when the log is opened (a gap between two segments, a synced batch that does
not parse) and by the scrubber (a sealed batch failing its CRC). Such a range is
never served as if it were sound: a read that reaches it stops before it, and one
that starts inside it fails with CorruptRecord (CORRUPT_MESSAGE, what Kafka answers
when its own read of a log trips over a broken batch). Ranges are kept in the
partition directory, so that a restart does not serve them again before the scrubber
finds them anew:

    damaged-offsets    a version line, the count, then "<first> <end> <kind>" a line

A range below the log start offset no longer matters and is forgotten: retention
or DeleteRecords past it is how an operator moves consumers on.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from herdless.storage import checkpoint

DAMAGED_OFFSETS_FILE = "damaged-offsets"


class DamageKind(enum.IntEnum):
    # Offsets between two segments that no segment holds (a segment deleted or emptied).
    MISSING = 0
    # A batch whose bytes no longer match its CRC.
    CORRUPT = 1
    # Bytes that do not parse as batches: everything from there to the segment's end.
    UNREADABLE = 2

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    DamageKind.MISSING: "missing from every segment",
    DamageKind.CORRUPT: "in a batch that fails its CRC",
    DamageKind.UNREADABLE: "in bytes that do not parse as record batches",
}


class Damage(NamedTuple):
    first_offset: int
    # Exclusive.
    end_offset: int
    kind: DamageKind

    def describe(self, name: str) -> str:
        return (
            f"offsets {self.first_offset}..{self.end_offset - 1} of {name} are"
            f" {self.kind.description}"
        )


class DamageMap:
    """A partition's damaged ranges, in order and not overlapping. Not thread-safe:
    PartitionLog calls it under its lock."""

    def __init__(self, path: Path, ranges: Iterable[Damage] = ()) -> None:
        self.path = path
        self._ranges: list[Damage] = []
        for damage in ranges:
            self.add(damage)

    @classmethod
    def load(cls, path: Path) -> DamageMap:
        entries = checkpoint.read_entries(path, 3) or []
        kinds = {kind.value for kind in DamageKind}
        return cls(
            path,
            (
                Damage(first, end, DamageKind(kind))
                for first, end, kind in entries
                if first < end and kind in kinds
            ),
        )

    def __bool__(self) -> bool:
        return bool(self._ranges)

    @property
    def ranges(self) -> list[Damage]:
        return list(self._ranges)

    def add(self, damage: Damage) -> bool:
        """Add a range, merged with those it overlaps; returns False if it was known already."""
        if any(
            d.first_offset <= damage.first_offset and damage.end_offset <= d.end_offset
            for d in self._ranges
        ):
            return False
        first, end = damage.first_offset, damage.end_offset
        kept = []
        for known in self._ranges:
            if known.end_offset <= first or end <= known.first_offset:
                kept.append(known)
            else:
                first, end = min(first, known.first_offset), max(end, known.end_offset)
        kept.append(Damage(first, end, damage.kind))
        self._ranges = sorted(kept)
        return True

    def at(self, offset: int) -> Damage | None:
        """The range holding `offset`, if one does."""
        slot = bisect_right(self._ranges, offset, key=lambda d: d.first_offset) - 1
        if slot >= 0 and offset < self._ranges[slot].end_offset:
            return self._ranges[slot]
        return None

    def next_start(self, offset: int) -> int | None:
        """The first offset at or after `offset` where a damaged range starts."""
        slot = bisect_right(self._ranges, offset - 1, key=lambda d: d.first_offset)
        return self._ranges[slot].first_offset if slot < len(self._ranges) else None

    def keep_within(self, start: int, end: int) -> bool:
        """Forget ranges wholly outside [start, end): the log no longer reaches them.
        Returns whether any went."""
        kept = [d for d in self._ranges if d.end_offset > start and d.first_offset < end]
        changed = len(kept) != len(self._ranges)
        self._ranges = kept
        return changed

    def save(self) -> None:
        """Raises OSError if the file cannot be written."""
        if not self._ranges:
            self.path.unlink(missing_ok=True)
            return
        checkpoint.write_entries(
            self.path, ((d.first_offset, d.end_offset, int(d.kind)) for d in self._ranges)
        )
