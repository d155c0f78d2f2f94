"""Executor side: read one partition's offset range into Arrow record batches.

Executors never join the group. They fetch the partition from its leader,
from the range's first offset up to its end; the driver's group member
decides which ranges exist. Each Fetch answer's record batches become one
Arrow record batch, decoded in bulk (decode.py): Spark takes Arrow batches
several times faster than Python rows (SPARK.md), and decoding without a
Python object per record keeps the executor's own share small as well.

Connections that need TLS or SASL are read through librdkafka instead
(rdkafka_fetch.py), which speaks them all; the rows are the same. Of the
kafka.* settings, plaintext reads use those WireSettings holds (client.id,
isolation.level, fetch.max.bytes, max.partition.fetch.bytes,
fetch.max.wait.ms, receive.buffer.bytes) and security.protocol; the planning
side's librdkafka clients use them all (client_config.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Protocol

import kafka.errors
import pyarrow as pa

from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import InvalidBatch
from herdless.spark.client_config import WireSettings
from herdless.spark.decode import decode_records, next_offset
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.offsets import OffsetRange
from herdless.spark.options import ClientOptions
from herdless.spark.rdkafka_fetch import read_range_rdkafka
from herdless.spark.wire import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    FetchedPartition,
    PartitionFetcher,
    WireError,
)

CLIENT_ID = "herdless-spark-executor"
# Large answers keep round trips few; the first request of a range asks for
# about a kilobyte a record, later ones for what the records so far measured.
MAX_FETCH_BYTES = 8 << 20
MIN_FETCH_BYTES = 64 << 10
GUESSED_RECORD_BYTES = 1024
MAX_WAIT_MS = 500
RETRY_BACKOFF_S = 0.2

_ISOLATION = {"read_committed": READ_COMMITTED, "read_uncommitted": READ_UNCOMMITTED}


def speaks_plaintext(connection: ClientOptions) -> bool:
    return connection.client.get("security.protocol", "plaintext").lower() == "plaintext"


def isolation_level(settings: WireSettings) -> int:
    """isolation.level (read_committed unless set, as in librdkafka), as Fetch spells it."""
    name = settings.isolation_level
    if name not in _ISOLATION:
        raise HerdlessSparkError(
            f"kafka.isolation.level is {name!r}; use read_committed or read_uncommitted"
        )
    return _ISOLATION[name]


def read_range(
    connection: ClientOptions, offsets: OffsetRange, poll_timeout_s: float, headers: bool
) -> Iterator[pa.RecordBatch]:
    if not speaks_plaintext(connection):
        yield from read_range_rdkafka(connection, offsets, poll_timeout_s, headers)
        return
    settings = WireSettings.from_client(connection.client)
    isolation = isolation_level(settings)
    fetcher = PartitionFetcher(
        connection.bootstrap,
        offsets.topic,
        offsets.partition,
        settings.client_id or CLIENT_ID,
        connection.connect_timeout_s,
        isolation,
        settings.receive_buffer_bytes,
    )
    limits = [n for n in (settings.fetch_max_bytes, settings.max_partition_fetch_bytes) if n]
    try:
        yield from fetch_range(
            fetcher,
            offsets,
            poll_timeout_s,
            headers,
            isolation,
            connection.bootstrap,
            max_bytes=max(1, min([MAX_FETCH_BYTES, *limits])),
            max_wait_ms=settings.fetch_max_wait_ms or MAX_WAIT_MS,
        )
    finally:
        fetcher.close()


class Fetcher(Protocol):
    def send_fetch(self, offset: int, max_wait_ms: int, max_bytes: int) -> None: ...

    def receive_fetch(self) -> FetchedPartition: ...

    def reset(self) -> None: ...


def fetch_range(
    fetcher: Fetcher,
    offsets: OffsetRange,
    poll_timeout_s: float,
    headers: bool,
    isolation: int,
    bootstrap: str,
    *,
    max_bytes: int = MAX_FETCH_BYTES,
    max_wait_ms: int = MAX_WAIT_MS,
) -> Iterator[pa.RecordBatch]:
    """Fetch `offsets` whole: one Arrow batch per answer, retrying what Kafka calls retriable.

    The next fetch is sent before an answer is decoded (where it starts needs
    only the answer's batch headers), so the broker reads while this decodes.
    """
    where = f"{offsets.topic}-{offsets.partition}"
    position = offsets.start
    record_bytes = GUESSED_RECORD_BYTES
    last_progress = time.monotonic()
    problem = ""
    sent = False  # a fetch from `position` is already on its way
    while position < offsets.until:
        try:
            if not sent:
                size = _size(offsets, position, record_bytes, max_bytes)
                fetcher.send_fetch(position, max_wait_ms, size)
            sent = False
            fetched = fetcher.receive_fetch()
        except WireError as exc:
            fetched, problem = None, str(exc)
            fetcher.reset()
        if fetched is not None and fetched.error_code == ErrorCode.NONE:
            try:
                after = next_offset(fetched.records, position)
                if position < after < offsets.until:
                    record_bytes = max(1, len(fetched.records) // (after - position))
                    size = _size(offsets, after, record_bytes, max_bytes)
                    sent = _send_quietly(fetcher, after, max_wait_ms, size)
                rows = decode_records(
                    fetched.records,
                    offsets.topic,
                    offsets.partition,
                    position,
                    offsets.until,
                    headers,
                    (fetched.aborted or []) if isolation == READ_COMMITTED else None,
                )
            except InvalidBatch as exc:
                raise HerdlessSparkError(
                    f"reading {where} at offset {position}: the broker at {bootstrap} "
                    f"sent a corrupt record batch ({exc})"
                ) from None
            if rows is not None:
                yield rows
            if after > position:
                position = after
                last_progress = time.monotonic()
                continue
            if position >= _visible_end(fetched, isolation):
                # The range ends in offsets that hold no record (compaction,
                # transaction markers): nothing more will come.
                return
            problem = f"no record at offset {position} yet"
        elif fetched is not None:
            problem = _retriable_problem(fetched.error_code, where, offsets, position)
            fetcher.reset()
        if time.monotonic() - last_progress > poll_timeout_s:
            raise HerdlessSparkError(
                f"no record of {where} arrived for {poll_timeout_s:g}s at offset "
                f"{position} (reading up to {offsets.until}); is the broker at "
                f"{bootstrap} up? ({problem})"
            )
        time.sleep(RETRY_BACKOFF_S)


def _size(offsets: OffsetRange, position: int, record_bytes: int, most: int) -> int:
    """How many bytes to ask for: what the rest of the range should take, within bounds."""
    wanted = (offsets.until - position) * record_bytes
    return min(max(wanted, MIN_FETCH_BYTES), most)


def _send_quietly(fetcher: Fetcher, position: int, max_wait_ms: int, max_bytes: int) -> bool:
    """Send a fetch ahead; if that fails, the loop sends it again and reports the failure."""
    try:
        fetcher.send_fetch(position, max_wait_ms, max_bytes)
    except WireError:
        fetcher.reset()
        return False
    return True


def _visible_end(fetched: FetchedPartition, isolation: int) -> int:
    if isolation == READ_COMMITTED and fetched.last_stable_offset >= 0:
        return fetched.last_stable_offset
    return fetched.high_watermark


def _retriable_problem(code: int, where: str, offsets: OffsetRange, position: int) -> str:
    """What a retriable Fetch error code means; any other one ends the read with an error."""
    error = kafka.errors.for_code(code)
    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
        # Never skip silently: the records before the range's end were deleted.
        raise HerdlessSparkError(
            f"reading {where} offsets {offsets.start}..{offsets.until}: offset {position} "
            "is out of range on the broker (deleted by retention?)"
        )
    if not error.retriable:
        raise HerdlessSparkError(
            f"reading {where} offsets {offsets.start}..{offsets.until}: "
            f"the broker answered {error.message}"
        )
    return f"the broker answered {error.message}"
