"""A partition's records, a page at a time: what the console's message browser shows.

A plain consumer with no group reads them (assign and seek, as
kafka-console-consumer.sh --partition --offset does), so looking joins no group
and commits nothing. Control batches (transaction markers) are never records;
with read_committed, the default as in librdkafka, records of aborted
transactions are left out and reading stops at the last stable offset.

A page is up to `limit` records from an offset forward, or the last `limit`
before an offset. Aborted records and markers take offsets without being
shown, so paging back reads the range before the offset and, when that holds
too few records, a range twice as long, up to a bound: the way Kafka UIs page
back with a consumer that only reads forward.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from herdless.admin.client import consumer_class, error_text, kafka_python_client
from herdless.admin.errors import AdminError

if TYPE_CHECKING:
    from kafka import KafkaConsumer, TopicPartition

CLIENT_ID = "herdless-console-records"
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
ISOLATION_LEVELS = (READ_COMMITTED, READ_UNCOMMITTED)
# A page that takes longer than this to read says so rather than hold a thread.
READ_TIMEOUT_S = 10.0
POLL_MS = 200
# A page stops early once its records hold this many bytes: 500 records of a
# megabyte each would hold the console's memory, and no one reads them on one page.
PAGE_BYTES = 8 * 1024 * 1024
# Paging back reads at most this many pages' worth of offsets before the offset.
BACK_SCAN_PAGES = 16
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp_ms: int | None  # None: the record carries none
    timestamp_type: str  # Kafka's names: CreateTime, LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]

    @property
    def size(self) -> int:
        """Its bytes of key, value and headers."""
        fields = [self.key, self.value, *(v for _, v in self.headers)]
        return sum(len(f) for f in fields if f) + sum(len(n) for n, _ in self.headers)


@dataclass(frozen=True, slots=True)
class RecordPage:
    records: tuple[Record, ...]
    log_start_offset: int
    # Where reading stops: the high watermark, or the last stable offset with
    # read_committed.
    end_offset: int
    # The offsets the page covers: [start_offset, next_offset).
    start_offset: int
    next_offset: int


class OffsetOutOfRange(AdminError):
    """An offset the partition does not hold; the message names its log start and end."""


class NoSuchPartition(AdminError):
    """The brokers list no such topic, or the topic has no such partition."""


class ReadDenied(AdminError):
    """The brokers refused to let this client read the topic."""


class PartitionReader:
    """One consumer of one partition, made for a page and closed after it."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        isolation_level: str = READ_COMMITTED,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation level {isolation_level!r}: not one of {ISOLATION_LEVELS}")
        self.topic = topic
        self.partition = partition
        self._consumer: KafkaConsumer = kafka_python_client(
            consumer_class,
            bootstrap,
            CLIENT_ID,
            settings,
            group_id=None,
            enable_auto_commit=False,
            isolation_level=isolation_level,
            fetch_max_bytes=PAGE_BYTES,
            # Looking at a topic that is not there must not make it.
            allow_auto_create_topics=False,
            # Retention may delete a page while it is read: go on from what is left.
            auto_offset_reset="earliest",
        )
        self._tp: TopicPartition | None = None

    def __enter__(self) -> PartitionReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()

    def from_offset(self, offset: int, limit: int) -> RecordPage:
        """Up to `limit` records from `offset` on; OffsetOutOfRange for an offset before
        the log start or past the end."""
        return self._kafka_errors(self._from_offset, offset, limit)

    def from_start(self, limit: int) -> RecordPage:
        """Up to `limit` records from the log start offset, wherever it is now."""
        return self._kafka_errors(lambda n: self._from_offset(self._bounds()[0], n), limit)

    def from_time(self, timestamp_ms: int, limit: int) -> tuple[RecordPage, bool]:
        """Up to `limit` records from the first whose timestamp is at `timestamp_ms` or
        later (ListOffsets by time), and whether there is one: without, the page starts
        at the end."""
        return self._kafka_errors(self._from_time, timestamp_ms, limit)

    def before(self, offset: int, limit: int) -> RecordPage:
        """The last `limit` records before `offset` (at most BACK_SCAN_PAGES pages of
        offsets back); OffsetOutOfRange for an offset past the end."""
        return self._kafka_errors(self._before, offset, limit)

    # -- reading ----------------------------------------------------------------

    def _from_offset(self, offset: int, limit: int) -> RecordPage:
        start, end = self._bounds()
        if not start <= offset <= end:
            raise OffsetOutOfRange(self._range_text(offset, start, end))
        records, next_offset = self._read(offset, end, limit)
        return RecordPage(tuple(records), start, end, offset, next_offset)

    def _from_time(self, timestamp_ms: int, limit: int) -> tuple[RecordPage, bool]:
        tp = self._partition()
        found = self._consumer.offsets_for_times({tp: timestamp_ms}).get(tp)
        start, end = self._bounds()
        # A record found past the end is one read_committed may not show yet.
        offset = end if found is None else min(max(found.offset, start), end)
        records, next_offset = self._read(offset, end, limit)
        page = RecordPage(tuple(records), start, end, offset, next_offset)
        return page, found is not None and found.offset < end

    def _before(self, offset: int, limit: int) -> RecordPage:
        start, end = self._bounds()
        if not start <= offset <= end:
            raise OffsetOutOfRange(self._range_text(offset, start, end))
        low = max(start, offset - limit)
        records, reached = self._read(low, offset, offset - low)
        if reached < offset:  # PAGE_BYTES read before the offset: the page ends there
            return RecordPage(tuple(records), start, end, low, reached)
        # Markers and aborted records hide offsets: look further back, twice as far
        # each time, for a full page.
        while len(records) < limit and low > start and offset - low < limit * BACK_SCAN_PAGES:
            lower = max(start, low - (offset - low))
            earlier, reached = self._read(lower, low, low - lower)
            if reached < low:  # too many bytes to join up with the page: leave them
                break
            records, low = earlier + records, lower
        shown = records[-limit:] if records else []
        first = shown[0].offset if len(records) > len(shown) else low
        return RecordPage(tuple(shown), start, end, first, offset)

    def _read(self, offset: int, stop: int, limit: int) -> tuple[list[Record], int]:
        """Up to `limit` records in [offset, stop), fewer once they hold PAGE_BYTES, and
        the offset after the last one read."""
        consumer, tp = self._consumer, self._partition()
        consumer.seek(tp, offset)
        records: list[Record] = []
        size = 0
        deadline = time.monotonic() + READ_TIMEOUT_S
        while consumer.position(tp) < stop:
            if time.monotonic() > deadline:
                raise AdminError(
                    f"reading partition {self.partition} of {self.topic} timed out at offset"
                    f" {consumer.position(tp)}"
                )
            polled = consumer.poll(timeout_ms=POLL_MS, max_records=limit - len(records))
            for found in polled.get(tp, ()):
                if found.offset >= stop:
                    break
                records.append(_record(found))
                size += records[-1].size
                if len(records) >= limit or size >= PAGE_BYTES:
                    return records, found.offset + 1
        return records, min(consumer.position(tp), stop)

    def _bounds(self) -> tuple[int, int]:
        """The log start offset and where reading stops (the high watermark, or the last
        stable offset with read_committed: kafka-python asks ListOffsets with its
        isolation level)."""
        tp = self._partition()
        start = self._consumer.beginning_offsets([tp])[tp]
        end = self._consumer.end_offsets([tp])[tp]
        return start, end

    def _partition(self) -> TopicPartition:
        if self._tp is not None:
            return self._tp
        from kafka import TopicPartition

        partitions = self._consumer.partitions_for_topic(self.topic)
        if not partitions:
            raise NoSuchPartition(f"the brokers list no topic {self.topic}")
        if self.partition not in partitions:
            raise NoSuchPartition(
                f"topic {self.topic} has no partition {self.partition} (it has {len(partitions)})"
            )
        self._tp = TopicPartition(self.topic, self.partition)
        self._consumer.assign([self._tp])
        return self._tp

    def _range_text(self, offset: int, start: int, end: int) -> str:
        where = f"partition {self.partition} of {self.topic}"
        if start == end:
            return (
                f"offset {offset} is out of range: {where} is empty (its log starts and"
                f" ends at {end})"
            )
        return (
            f"offset {offset} is out of range: {where} holds offsets {start} to {end - 1}"
            f" (log start offset {start}, end offset {end})"
        )

    def _kafka_errors(self, read: Callable[..., T], *args: Any) -> T:
        """`read(*args)`, with kafka-python's errors in words."""
        from kafka.errors import KafkaError, TopicAuthorizationFailedError

        try:
            return read(*args)
        except TopicAuthorizationFailedError:
            denied = error_text(TopicAuthorizationFailedError)
            raise ReadDenied(f"not allowed to read topic {self.topic} ({denied})") from None
        except KafkaError as exc:
            raise AdminError(
                f"cannot read partition {self.partition} of {self.topic}: {error_text(exc)}"
            ) from None


def _record(found: Any) -> Record:
    """A kafka-python ConsumerRecord as the browser shows it."""
    timestamp = found.timestamp if found.timestamp is not None and found.timestamp >= 0 else None
    return Record(
        offset=found.offset,
        timestamp_ms=timestamp,
        timestamp_type=TIMESTAMP_TYPES.get(found.timestamp_type, "NoTimestampType"),
        key=found.key,
        value=found.value,
        headers=tuple((name, value) for name, value in found.headers or ()),
    )
