"""Reading a sealed segment whole to find batches that no longer match their CRCs.

Opening a log checks only what was not known synced (the recovery point) plus a
few cheap things (segment offsets continuous, batch headers after the last index
entry): a bit that rots in a sealed segment later goes unseen until a consumer's
client trips over it. A scrubber reads every sealed segment now and then, as a
filesystem scrub does, batch by batch: header, offsets, CRC. What it finds is
damage (damage.py); the broker records it with PartitionLog.record_damage, after
which the batch is never served as sound.

The segment is read through a descriptor of its own, never the log's, without
the log's lock: a sealed segment does not change until retention, a cleaning or
a truncation replaces it, and record_damage checks that it is still in the log.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from herdless.protocol.records import HEADER_SIZE, BatchHeader, crc_matches, parse_header
from herdless.storage.damage import Damage, DamageKind
from herdless.storage.errors import StorageIOError
from herdless.storage.log import SealedSegment
from herdless.storage.segment import FileWindow, header_problem

# Told how many bytes were read; returns False to stop (the broker is shutting down).
Pace = Callable[[int], bool]


def scrub_segment(sealed: SealedSegment, pace: Pace) -> list[Damage]:
    """The damage in one sealed segment: batches failing their CRC, and bytes from the
    first header that does not parse to the end. Nothing if the segment has gone.

    Raises StorageIOError if the file cannot be read (a failing disk).
    """
    try:
        fd = os.open(sealed.path, os.O_RDONLY)
    except FileNotFoundError:
        return []  # retention or a cleaning got there first
    except OSError as exc:
        raise StorageIOError(f"cannot read {sealed.path}: {exc.strerror}") from exc
    try:
        return _scrub(fd, sealed, pace)
    finally:
        os.close(fd)


def _scrub(fd: int, sealed: SealedSegment, pace: Pace) -> list[Damage]:
    found: list[Damage] = []
    window = FileWindow(fd, sealed.size)
    position, expected = 0, sealed.base_offset
    while position < sealed.size:
        header = None
        if sealed.size - position >= HEADER_SIZE:
            header = parse_header(window.get(position, HEADER_SIZE))
        if header is None or not _sound(header, position, sealed, expected):
            # Nothing after it can be found: the rest of the segment is unreadable.
            found.append(Damage(expected, sealed.next_base_offset, DamageKind.UNREADABLE))
            break
        if not crc_matches(window.get(position, header.size), header):
            found.append(Damage(header.base_offset, header.last_offset + 1, DamageKind.CORRUPT))
        expected = header.last_offset + 1
        position += header.size
        if not pace(header.size):
            break
    return found


def _sound(header: BatchHeader, position: int, sealed: SealedSegment, expected: int) -> bool:
    """Whether the header may be believed: sane, within the file, offsets in order."""
    return (
        header_problem(header) is None
        and position + header.size <= sealed.size
        and expected <= header.base_offset <= header.last_offset < sealed.next_base_offset
    )
