"""Hand-written coordination logs: entries placed where a real writer would put them."""

from __future__ import annotations

from herdless.marshal.log import destination
from herdless.marshal.messages import NO_OFFSET, Kind, Message, encode
from herdless.marshal.rationalizer import Entry

PARTITIONS = 4
GROUP = "g"
INTERVAL = 1000


class LogBuilder:
    """Appends messages as the broker would: per-partition offsets, LogAppendTime stamps."""

    def __init__(self, partitions: int = PARTITIONS) -> None:
        self.partitions = partitions
        self.entries: list[Entry] = []
        self._next: dict[int, int] = {}

    def add(self, message: Message, at_ms: int) -> Entry:
        partition = destination(message, self.partitions)
        offset = self._next.get(partition, 0)
        self._next[partition] = offset + 1
        entry = Entry(partition, offset, at_ms, encode(message))
        self.entries.append(entry)
        return entry

    def claim(self, client: str, partition: int, at_ms: int, topic: str = "t") -> Entry:
        return self.add(message(Kind.CLAIMING_PARTITION, client, partition, topic=topic), at_ms)

    def heartbeat(self, client: str, partition: int, offset: int, at_ms: int) -> Entry:
        return self.add(message(Kind.HEARTBEAT, client, partition, offset), at_ms)

    def release(self, client: str, partition: int, offset: int, at_ms: int) -> Entry:
        return self.add(message(Kind.RELEASING_PARTITION, client, partition, offset), at_ms)

    def claim_messages(self, client: str, partition: int, offset: int, at_ms: int) -> Entry:
        return self.add(message(Kind.CLAIMING_MESSAGES, client, partition, offset), at_ms)

    def present(self, client: str, at_ms: int, interval: int = INTERVAL) -> Entry:
        return self.add(Message(Kind.PRESENT, client, GROUP, interval_ms=interval), at_ms)


def message(
    kind: Kind, client: str, partition: int, offset: int = NO_OFFSET, topic: str = "t"
) -> Message:
    return Message(kind, client, GROUP, topic, partition, offset, INTERVAL)
