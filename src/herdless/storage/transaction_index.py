"""The aborted-transaction index of one segment (.txnindex), in Kafka's format.

One entry per transaction aborted by a marker in the segment, in marker order,
each 34 bytes big-endian as Kafka's AbortedTxn writes them:

    version int16 (0), producer id int64, first offset int64,
    last offset int64 (the marker's), last stable offset int64

The last stable offset is the partition's LSO once the abort was written: a
reader of the range [start, upper bound) has found every aborted transaction
overlapping it as soon as an entry's LSO reaches the upper bound (Kafka's
TransactionIndex.collectAbortedTxns). A Fetch at read_committed returns these
so that the consumer drops the aborted records.

As in Kafka the file is created at the first abort, so a segment without one
has none. The entries also live in memory (aborts are rare; a segment's index
is small) and are written through to the file. Opening keeps the whole entries
of a file cut short and says it was (`damaged`): the log then rebuilds its
indexes from the batches (loader.py), as it does for the entries past its
recovery point.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

from herdless.storage.errors import StorageIOError

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
CURRENT_VERSION = 0

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(CURRENT_VERSION, *self)


class TxnIndexSearch(NamedTuple):
    """The aborted transactions of one segment that overlap a range, and whether the
    search is complete (no later segment can hold one that does)."""

    aborted: list[AbortedTxn]
    complete: bool


class TransactionIndex:
    def __init__(self, path: Path, entries: list[AbortedTxn], damaged: bool) -> None:
        self.path = path
        self._entries = entries
        # The file held a partial or unreadable entry: its whole entries were kept.
        self.damaged = damaged
        self._fd: int | None = None
        self._unsynced = False
        # The file lacks entries the memory has (a write through failed): replaced at flush.
        self.torn = False

    @classmethod
    def load(cls, path: Path) -> TransactionIndex:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return cls(path, [], False)
        entries: list[AbortedTxn] = []
        damaged = len(data) % ENTRY_SIZE != 0
        for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, position)
            entry = AbortedTxn(*fields)
            if version != CURRENT_VERSION or (
                entries and entry.last_offset < entries[-1].last_offset
            ):
                damaged = True
                break
            entries.append(entry)
        if damaged:
            log.warning("%s: keeping its first %d whole entries", path, len(entries))
        return cls(path, entries, damaged)

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, entry: AbortedTxn) -> None:
        """Record an aborted transaction, written through to the file (created if absent)."""
        if self._entries and entry.last_offset < self._entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {entry.last_offset} follows one ending at"
                f" {self._entries[-1].last_offset} in {self.path}"
            )
        self._entries.append(entry)
        if self.torn:
            return
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, entry.encode())
            self._unsynced = True
        except OSError:
            # Memory stays right; the next flush writes the file whole.
            self.torn = True
            self.release()

    def truncate_to(self, offset: int) -> None:
        """Forget the transactions aborted at or after `offset` (a log cut there)."""
        kept = [e for e in self._entries if e.last_offset < offset]
        if len(kept) == len(self._entries) and not self.damaged:
            return
        self._entries = kept
        self._rewrite()

    def replace_with(self, entries: list[AbortedTxn]) -> None:
        """Hold `entries` (in marker order), written and synced: the log cleaner's copy of
        the segments it cleans, whose markers it keeps."""
        self._entries = list(entries)
        self._rewrite()

    def reset(self) -> None:
        """Forget every entry and remove the file: it is about to be rebuilt, or its
        segment is new."""
        self._entries = []
        self.release()
        self.path.unlink(missing_ok=True)
        self.damaged = self.torn = self._unsynced = False

    def _rewrite(self) -> None:
        self.release()
        try:
            if not self._entries:
                self.path.unlink(missing_ok=True)
            else:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.write(fd, b"".join(e.encode() for e in self._entries))
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            self.torn = True
            raise StorageIOError(f"cannot write {self.path}: {exc}") from exc
        self.damaged = self.torn = False

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearch:
        """The transactions aborted in this segment that hold offsets in
        [fetch_offset, upper_bound_offset)."""
        aborted = []
        for entry in self._entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                aborted.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearch(aborted, True)
        return TxnIndexSearch(aborted, False)

    # -- files --------------------------------------------------------------------

    def sync_handle(self) -> int | None:
        """A duplicate descriptor to fsync, if entries were written since the last one;
        a torn file is first written whole (and synced) instead."""
        if self.torn:
            with contextlib.suppress(StorageIOError):
                self._rewrite()
            return None
        if not self._unsynced:
            return None
        self._unsynced = False
        # Released since the write (a descriptor budget): fsync reaches the file anyway.
        return os.dup(self._fd) if self._fd is not None else os.open(self.path, os.O_RDONLY)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    close = release
