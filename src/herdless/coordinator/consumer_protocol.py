"""The one piece of the embedded consumer protocol the coordinator reads: subscribed topics.

OffsetDelete must refuse to delete offsets of topics a consumer group is
subscribed to (KIP-496), so, like Kafka, we parse every member's subscription
with version 0, which every later version extends: int16 version, then an
array of topic names. Anything that does not parse leaves the topics unknown.
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    try:
        pos = 2  # version, any: later versions only append fields
        (count,) = _I32.unpack_from(metadata, pos)
        pos += 4
        if count < 0:
            return None
        topics = set()
        for _ in range(count):
            (n,) = _I16.unpack_from(metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.add(metadata[pos : pos + n].decode("utf-8"))
            pos += n
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError):
        return None


def encode_subscription(topics: list[str], user_data: bytes = b"") -> bytes:
    """A version-0 subscription; for tests and tools."""
    out = bytearray(_I16.pack(0) + _I32.pack(len(topics)))
    for topic in topics:
        data = topic.encode("utf-8")
        out += _I16.pack(len(data)) + data
    out += _I32.pack(len(user_data)) + user_data
    return bytes(out)
