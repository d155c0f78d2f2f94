"""The coordination messages and their wire encoding.

Every message is one record value on the coordination topic, with no key:

    version u8 | kind u8 | interval_ms u32 | partition i32 | offset i64
    | client_id, group_id, topic: each u16 length + UTF-8

18 fixed bytes plus the three names. The version byte comes first so that a
reader meeting a format it does not know skips the record instead of
misreading it. We do not speak the Go library's '/'-separated ASCII format:
its rationalizer judges claims differently (any heartbeat takes ownership,
staleness by the reader's clock), so Go and Python consumers on one group
would derive different world states from the same log, which is exactly what
the protocol must never do. See docs/marshal.md.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

VERSION = 1
_HEADER = struct.Struct(">BBIiq")
_LENGTH = struct.Struct(">H")
NO_OFFSET = -1


class Kind(enum.IntEnum):
    HEARTBEAT = 1
    CLAIMING_PARTITION = 2
    RELEASING_PARTITION = 3
    CLAIMING_MESSAGES = 4
    # Not in the design document: a consumer says it is alive in a group even
    # while it holds no partition, so that others can see it waiting and make
    # room (fairness). interval_ms 0 says it has left.
    PRESENT = 5


class DecodeError(ValueError):
    """A record on the coordination topic that is not a message we understand."""


@dataclass(frozen=True, slots=True)
class Message:
    kind: Kind
    client_id: str
    group_id: str
    topic: str = ""
    partition: int = -1
    # last_offset (Heartbeat, ReleasingPartition) or proposed_last_offset
    # (ClaimingMessages): an offset of the consumed topic, inclusive.
    offset: int = NO_OFFSET
    # The sender's HeartbeatInterval. Carried in the log so that staleness is
    # judged from the log alone, with no setting every reader must agree on.
    interval_ms: int = 0


def encode(message: Message) -> bytes:
    parts = [
        _HEADER.pack(
            VERSION,
            message.kind,
            message.interval_ms,
            message.partition,
            message.offset,
        )
    ]
    for name in (message.client_id, message.group_id, message.topic):
        raw = name.encode()
        parts.append(_LENGTH.pack(len(raw)))
        parts.append(raw)
    return b"".join(parts)


def decode(raw: bytes | None) -> Message:
    if not raw or len(raw) < _HEADER.size:
        raise DecodeError("too short")
    version, kind, interval_ms, partition, offset = _HEADER.unpack_from(raw)
    if version != VERSION:
        raise DecodeError(f"unknown version {version}")
    try:
        kind = Kind(kind)
    except ValueError:
        raise DecodeError(f"unknown kind {kind}") from None
    names = []
    pos = _HEADER.size
    for _ in range(3):
        if pos + _LENGTH.size > len(raw):
            raise DecodeError("truncated")
        (length,) = _LENGTH.unpack_from(raw, pos)
        pos += _LENGTH.size
        if pos + length > len(raw):
            raise DecodeError("truncated")
        try:
            names.append(raw[pos : pos + length].decode())
        except UnicodeDecodeError:
            raise DecodeError("name is not UTF-8") from None
        pos += length
    if pos != len(raw):
        raise DecodeError("trailing bytes")
    return Message(kind, names[0], names[1], names[2], partition, offset, interval_ms)
