"""Sparse offset and time indexes of one segment, in Kafka's on-disk format.

Both are arrays of fixed-size big-endian entries, relative to the segment's
base offset so an offset fits in 4 bytes:

- offset index (.index): (relative offset int32, file position int32); the
  offset is the last offset of the batch that starts at that position.
- time index (.timeindex): (timestamp int64, relative offset int32); the
  largest timestamp seen so far in the segment and the last offset of the
  batch that carried it, so timestamps only grow along the file.

The entries also live in memory (arrays, bisected), and new ones are written
through to the file of the active segment. A damaged file is never repaired
in place: the segment rebuilds it from the log (see segment.py). A write
through that fails (a full disk) leaves the file short or torn: it is then
`torn`, takes no more writes, and is replaced whole by the next flush
(repair()), or rebuilt when the log is next opened.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

INT32_MAX = 2**31 - 1


class IndexCorrupt(Exception):
    """An index file that cannot be trusted; the caller rebuilds it from the log."""


class _Index:
    _entry: struct.Struct
    _key_type: str
    _value_type: str
    suffix: str

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._keys = array(self._key_type)
        self._values = array(self._value_type)
        self._fd: int | None = None
        # New entries are written through to the file (the active segment's indexes).
        self._appending = False
        # The file lacks entries the memory has: a write through failed.
        self.torn = False
        # Entries written through since the last sync_handle().
        self._unsynced = False

    @property
    def entry_size(self) -> int:
        return self._entry.size

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    def _append(self, key: int, value: int) -> None:
        self._keys.append(key)
        self._values.append(value)
        if not self._appending or self.torn:
            return
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            _write_all(self._fd, self._entry.pack(key, value))
            self._unsynced = True
        except OSError:
            # The in-memory entries stay right; the file is now short or torn.
            self.torn = True
            self.release()

    def _read_entries(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError as exc:
            raise IndexCorrupt(f"{self.path.name} is missing") from exc
        if len(data) % self._entry.size:
            raise IndexCorrupt(f"{self.path.name} has a torn entry")
        for key, value in self._entry.iter_unpack(data):
            self._keys.append(key)
            self._values.append(value)

    def file_entries(self) -> list[tuple[int, int]]:
        """The whole entries in the file as it stands, unchecked; none if it is unreadable."""
        try:
            data = self.path.read_bytes()
        except OSError:
            return []
        size = self._entry.size
        return list(self._entry.iter_unpack(data[: len(data) - len(data) % size]))

    def _keep(self, count: int) -> None:
        del self._keys[count:]
        del self._values[count:]

    def to_bytes(self) -> bytes:
        return b"".join(
            self._entry.pack(k, v) for k, v in zip(self._keys, self._values, strict=True)
        )

    def write_file(self) -> bool:
        """Replace the file with the in-memory entries unless it already holds them.

        Returns whether it wrote. The rename is atomic; the caller fsyncs the directory.
        """
        data = self.to_bytes()
        try:
            if self.path.read_bytes() == data:
                self.torn = False
                return False
        except FileNotFoundError:
            pass
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError:
            # A part-written copy would only take the room a full disk lacks.
            tmp.unlink(missing_ok=True)
            raise
        self.torn = False
        return True

    def repair(self) -> None:
        """Replace a torn file with the entries in memory; appends are written through again.

        Raises OSError if the file still cannot be written.
        """
        if self.torn:
            self.release()
            self.write_file()

    def open_for_append(self, *, truncate: bool = False) -> None:
        if self._fd is None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if truncate else 0)
            self._fd = os.open(self.path, flags, 0o644)
        self._appending = True
        # A new or truncated file is a directory entry, a size, to sync.
        self._unsynced = self._unsynced or truncate

    @property
    def writable(self) -> bool:
        return self._appending

    def sync_handle(self) -> int | None:
        """A descriptor of the file for fsync in another thread, if entries were written
        through since the last one; it outlives close(). The file is opened anew if its
        descriptor was released meanwhile: fsync syncs the file, whatever wrote it."""
        if not self._unsynced:
            return None
        fd = os.dup(self._fd) if self._fd is not None else os.open(self.path, os.O_RDONLY)
        self._unsynced = False
        return fd

    def close(self) -> None:
        """Stop writing entries through; the file is left as it is."""
        self._appending = False
        self.release()

    def release(self) -> None:
        """Close the descriptor; an index still taking entries opens its file again for the next."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


class OffsetIndex(_Index):
    _entry = struct.Struct(">ii")
    _key_type = "i"
    _value_type = "i"
    suffix = ".index"

    @classmethod
    def load(
        cls, path: Path, base_offset: int, max_entries: int, log_size: int, offset_limit: int | None
    ) -> OffsetIndex:
        """Read and sanity-check an index file; `offset_limit` bounds its offsets when known."""
        index = cls(path, base_offset, max_entries)
        index._read_entries()
        previous_offset = previous_position = -1
        for relative, position in zip(index._keys, index._values, strict=True):
            if relative <= previous_offset or position <= previous_position:
                raise IndexCorrupt(f"{path.name} entries do not increase")
            if relative < 0 or position < 0 or position >= log_size:
                raise IndexCorrupt(f"{path.name} points outside its segment")
            if offset_limit is not None and base_offset + relative >= offset_limit:
                raise IndexCorrupt(f"{path.name} names offsets of the next segment")
            previous_offset, previous_position = relative, position
        return index

    def append(self, offset: int, position: int) -> None:
        self._append(offset - self.base_offset, position)

    def lookup(self, offset: int) -> int:
        """File position from which a forward scan finds the batch holding `offset`.

        Entries name a batch's last offset, so the batch at an entry's position
        ends at or before `offset` and scanning from there cannot miss it.
        """
        slot = bisect_right(self._keys, offset - self.base_offset) - 1
        return self._values[slot] if slot >= 0 else 0

    def scan_start(self, end_position: int, offset_limit: int) -> int:
        """File position of the last indexed batch that starts by `end_position` and whose
        last offset is below `offset_limit` (0 if none): every batch before it ends by
        `end_position` and lies below `offset_limit`, so a scan for where such batches end
        may begin there."""
        slot = min(
            bisect_right(self._values, end_position),
            bisect_left(self._keys, offset_limit - self.base_offset),
        )
        return self._values[slot - 1] if slot > 0 else 0

    @property
    def last_offset(self) -> int | None:
        return self.base_offset + self._keys[-1] if self._keys else None

    @property
    def last_position(self) -> int | None:
        return self._values[-1] if self._values else None

    def truncate_to_position(self, position: int) -> None:
        """Forget the entries of batches at or after `position`, in memory only."""
        self._keep(bisect_left(self._values, position))


class TimeIndex(_Index):
    _entry = struct.Struct(">qi")
    _key_type = "q"
    _value_type = "i"
    suffix = ".timeindex"

    @classmethod
    def load(
        cls, path: Path, base_offset: int, max_entries: int, offset_limit: int | None
    ) -> TimeIndex:
        index = cls(path, base_offset, max_entries)
        index._read_entries()
        previous_timestamp = None
        previous_offset = -1
        for timestamp, relative in zip(index._keys, index._values, strict=True):
            if previous_timestamp is not None and timestamp <= previous_timestamp:
                raise IndexCorrupt(f"{path.name} timestamps do not increase")
            if relative < 0 or relative < previous_offset:
                raise IndexCorrupt(f"{path.name} offsets go backwards")
            if offset_limit is not None and base_offset + relative >= offset_limit:
                raise IndexCorrupt(f"{path.name} names offsets of the next segment")
            previous_timestamp, previous_offset = timestamp, relative
        return index

    def maybe_append(self, timestamp: int, offset: int) -> None:
        # Kafka's time index only ever grows in time: a lookup relies on it.
        if not self._keys or timestamp > self._keys[-1]:
            self._append(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """Offset from which to look for the first record at or after `timestamp`.

        Every batch before the one that first reached an entry's timestamp has a
        smaller maximum, so nothing at or after a later time hides before it.
        """
        slot = bisect_right(self._keys, timestamp) - 1
        return self.base_offset + (self._values[slot] if slot >= 0 else 0)

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not self._keys:
            return None
        return self._keys[-1], self.base_offset + self._values[-1]

    def truncate_to_offset(self, offset: int) -> None:
        """Forget the entries naming `offset` or later, in memory only; their offsets only grow."""
        self._keep(bisect_left(self._values, offset - self.base_offset))


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
