"""The leader-epoch cache of a partition: the offset at which each leader epoch began.

Modelled on Kafka's LeaderEpochFileCache. Every leader of a partition writes
under a leader epoch, stamped into the batches it appends; the cache keeps,
for each epoch that wrote (or was assigned at a leader's election), its start
offset, ordered so that both epochs and start offsets increase. A follower
that comes back asks the leader where its latest epoch ended
(OffsetForLeaderEpoch, answered by end_offset_for) and truncates there,
instead of trusting a high watermark that may be stale.

    leader-epoch-checkpoint    Kafka's layout: "0", the entry count, then "<epoch> <start offset>"
                               a line; replaced atomically on every change

The cache knows nothing of the log it describes: PartitionLog keeps the two in
step, truncating the cache when the log is cut and rebuilding it from the
batches when the checkpoint is missing.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

from herdless.storage import checkpoint
from herdless.storage.errors import StorageIOError

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
# Kafka's answer to an epoch it cannot place: the follower then falls back on its high watermark.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Not thread-safe on its own: PartitionLog calls it under its lock."""

    def __init__(self, path: Path, entries: Iterable[EpochEntry] = ()) -> None:
        self.path = path
        self._entries = [EpochEntry(*entry) for entry in entries]
        if not _increasing(self._entries):
            raise ValueError(f"epochs and start offsets must increase: {self._entries}")

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache | None:
        """The cache as checkpointed in `path`; None if the file is absent or damaged."""
        stored = checkpoint.read_entries(path, 2)
        if stored is None:
            return None
        entries = [EpochEntry(epoch, start) for epoch, start in stored]
        if not _increasing(entries) or any(e.epoch < 0 or e.start_offset < 0 for e in entries):
            log.warning("ignoring %s: its entries do not increase", path)
            return None
        return cls(path, entries)

    @classmethod
    def from_batches(cls, path: Path, batches: Iterable[tuple[int, int]]) -> LeaderEpochCache:
        """The cache that appending batches of these (partition leader epoch, base offset)
        builds, unsaved; batches without an epoch (-1) add nothing."""
        cache = cls(path)
        for epoch, base_offset in batches:
            if epoch >= 0:
                cache._assign(epoch, base_offset)
        return cache

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._entries})"

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def save(self) -> None:
        try:
            checkpoint.write_entries(self.path, self._entries)
        except OSError as exc:
            raise StorageIOError(f"cannot write {self.path}: {exc}") from exc

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the cache changed.

        Kafka's rules: an epoch keeps the start offset it was first given (a
        later assignment of the latest epoch at a larger offset is ignored);
        an assignment that would make epochs or start offsets go backwards
        first removes the entries in its way, newest first, so that both keep
        increasing. That only happens to a log already inconsistent.
        """
        changed = self._assign(epoch, start_offset)
        if changed:
            self.save()
        return changed

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        entries = self._entries
        if entries and entries[-1].epoch == epoch and entries[-1].start_offset <= start_offset:
            return False
        removed = []
        while entries and (entries[-1].epoch >= epoch or entries[-1].start_offset >= start_offset):
            removed.append(entries.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            log.warning(
                "%s: epoch %d at %d removed conflicting entries %s",
                self.path.parent.name,
                epoch,
                start_offset,
                removed[::-1],
            )
        entries.append(EpochEntry(epoch, start_offset))
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetForLeaderEpoch for `requested_epoch`.

        Kafka's semantics (LeaderEpochFileCache.endOffsetFor): the latest
        epoch ends at the log end offset; an older one at the start offset of
        the first later epoch, reported with the largest known epoch at or
        below the one requested; an epoch below every known one with itself
        and the first known start offset. UNDEFINED_EPOCH, an empty cache or
        an epoch above the latest give (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
        """
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        later = bisect_right(entries, requested_epoch, key=lambda e: e.epoch)
        if later == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        end_offset = entries[later].start_offset
        if later == 0:
            # The data of earlier epochs is gone; the follower should start at what remains.
            return requested_epoch, end_offset
        return entries[later - 1].epoch, end_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote `offset`: the latest one starting at or before it."""
        at = bisect_right(self._entries, offset, key=lambda e: e.start_offset)
        return self._entries[at - 1].epoch if at else None

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove the entries starting at or after `end_offset` (the log was cut there)."""
        entries = self._entries
        if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
            return False
        while entries and entries[-1].start_offset >= end_offset:
            entries.pop()
        self.save()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Forget epochs wholly below `start_offset`, the log start offset.

        The epoch that `start_offset` falls in is kept, starting there.
        """
        entries = self._entries
        at = bisect_right(entries, start_offset, key=lambda e: e.start_offset)
        if at == 0 or (at == 1 and entries[0].start_offset == start_offset):
            return False
        first = EpochEntry(entries[at - 1].epoch, start_offset)
        self._entries = [first, *entries[at:]]
        self.save()
        return True

    def clear(self) -> None:
        self._entries = []
        self.save()


def _increasing(entries: list[EpochEntry]) -> bool:
    return all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in pairwise(entries))
