"""The one piece of the embedded consumer protocol the coordinator reads: subscribed topics.

OffsetDelete must refuse to delete offsets of topics a consumer group is
subscribed to (KIP-496), so, like Kafka, we parse every member's subscription
with version 0, which every later version extends: int16 version, then an
array of topic names. Anything that does not parse leaves the topics unknown.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

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


# --- the whole subscription and assignment: classic members of consumer groups ---------
#
# A member that speaks the classic protocol inside a consumer group (KIP-848's online
# upgrade) is assigned by the coordinator: its subscription, the partitions it owns and its
# rack come from its JoinGroup metadata, and its assignment goes back in SyncGroup in the
# embedded format of the version it subscribed with.

# The highest ConsumerProtocolSubscription / ConsumerProtocolAssignment version known.
MAX_CONSUMER_PROTOCOL_VERSION = 3

TopicPartitionNames = frozenset[tuple[str, int]]


class MalformedConsumerProtocol(ValueError):
    """Embedded consumer protocol bytes that do not parse."""


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    version: int
    topics: tuple[str, ...]
    owned_partitions: TopicPartitionNames = frozenset()
    rack_id: str | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def unpack(self, fmt: struct.Struct) -> int:
        try:
            (value,) = fmt.unpack_from(self.data, self.pos)
        except struct.error:
            raise MalformedConsumerProtocol("truncated") from None
        self.pos += fmt.size
        return int(value)

    def string(self) -> str | None:
        n = self.unpack(_I16)
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise MalformedConsumerProtocol("truncated string")
        try:
            value = self.data[self.pos : self.pos + n].decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedConsumerProtocol("string not UTF-8") from None
        self.pos += n
        return value

    def skip_bytes(self) -> None:
        n = self.unpack(_I32)
        if n > 0:
            if self.pos + n > len(self.data):
                raise MalformedConsumerProtocol("truncated bytes")
            self.pos += n

    def count(self) -> int:
        n = self.unpack(_I32)
        if n < 0:
            raise MalformedConsumerProtocol("null array")
        return n

    def topic_partitions(self) -> TopicPartitionNames:
        out = set()
        for _ in range(self.count()):
            topic = self.string() or ""
            out.update((topic, self.unpack(_I32)) for _ in range(self.count()))
        return frozenset(out)


def protocol_version(metadata: bytes) -> int:
    """The embedded protocol version bytes start with, capped at the highest known."""
    if len(metadata) < 2:
        raise MalformedConsumerProtocol("no version")
    (version,) = _I16.unpack_from(metadata)
    if version < 0:
        raise MalformedConsumerProtocol(f"version {version}")
    return min(version, MAX_CONSUMER_PROTOCOL_VERSION)


def decode_subscription(metadata: bytes) -> ConsumerSubscription:
    """A ConsumerProtocolSubscription of any version (later versions only append fields,
    and a newer client's extra fields are ignored, as Kafka ignores them)."""
    version = protocol_version(metadata)
    r = _Reader(metadata)
    r.pos = 2
    topics = tuple(r.string() or "" for _ in range(r.count()))
    r.skip_bytes()  # user data: the client-side assignor's, no use to the coordinator
    owned: TopicPartitionNames = frozenset()
    rack = None
    if version >= 1 and not r.at_end():
        owned = r.topic_partitions()
    if version >= 2 and not r.at_end():
        r.unpack(_I32)  # generation id (the sticky assignors')
    if version >= 3 and not r.at_end():
        rack = r.string()
    return ConsumerSubscription(version, topics, owned, rack)


def decode_assignment(data: bytes) -> TopicPartitionNames:
    """The partitions of a ConsumerProtocolAssignment; none for empty bytes (a member that
    joined but was never assigned)."""
    if not data:
        return frozenset()
    protocol_version(data)
    r = _Reader(data)
    r.pos = 2
    return r.topic_partitions()


def encode_assignment(partitions: TopicPartitionNames, version: int) -> bytes:
    """A ConsumerProtocolAssignment of `version` (every version 0-3 has this layout) with
    null user data, topics and partitions in order."""
    by_name: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_name.setdefault(topic, []).append(partition)
    out = bytearray(_I16.pack(version) + _I32.pack(len(by_name)))
    for topic, ps in by_name.items():
        data = topic.encode("utf-8")
        out += _I16.pack(len(data)) + data + _I32.pack(len(ps))
        for p in ps:
            out += _I32.pack(p)
    out += _I32.pack(-1)
    return bytes(out)
