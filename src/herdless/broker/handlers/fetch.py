"""Fetch with long polling: a fetch short of min_bytes parks until an append wakes it.

Fetch sessions (KIP-227) are declined by answering session id 0, which every
client accepts by sending full fetch requests.

Fetch v0-v3 cannot carry v2 batches: their records are down-converted to message
sets, magic v1 for v2-v3 and v0 for v0-v1, as Kafka 3 does (legacy_records).
From v13 topics are named by id (KIP-516); from v15 a follower's id comes in the
replica state.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from herdless.broker.replicas import PartitionError
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.protocol.legacy_records import MAGIC_V0, MAGIC_V1, downconvert
from herdless.storage import PartitionLog, StorageError

if TYPE_CHECKING:
    from herdless.broker.context import BrokerContext

FETCH = 1
# Versions below this cannot be answered from a topic whose compression.type is zstd.
ZSTD_VERSION = 10
# Up to this version a partition's max bytes is a hard limit: no batch is given whole
# past it (v3 added the response's max_bytes and "at least one message").
HARD_LIMIT_VERSION = 2
TOPIC_IDS_VERSION = 13
REPLICA_STATE_VERSION = 15
# A partition's records are sent from the segment file (sendfile) from this size on, and
# copied below it, where a region's own descriptor and the writes before and after it
# cost as much as the copy they save: on loopback the two cost the broker alike up to a
# few hundred KiB, and a 900 KB region a third of the copy (docs/benchmarks.md).
ZERO_COPY_MIN_BYTES = 64 * 1024
# Up to this version a storage error is told as NOT_LEADER_OR_FOLLOWER, the only one
# such clients know to recover from by refreshing metadata.
OLD_STORAGE_ERROR_VERSION = 5


def legacy_magic(api_version: int) -> int | None:
    """The message format a Fetch version carries, if older than v2 batches."""
    if api_version <= 1:
        return MAGIC_V0
    if api_version <= 3:
        return MAGIC_V1
    return None


async def handle_fetch(context: BrokerContext, request: Request) -> Any:
    body = request.body
    deadline = time.monotonic() + max(body.max_wait_ms, 0) / 1000
    names = _topic_names(context, body, request.api_version)
    wanted = [
        (name, p.partition)
        for name, topic in zip(names, body.topics, strict=True)
        if name is not None
        for p in topic.partitions
    ]
    while True:
        responses, size = _read(context, body, request.api_version, names)
        remaining = deadline - time.monotonic()
        if size >= body.min_bytes or remaining <= 0 or context.stopping:
            break
        await context.replicas.wait_for_appends(wanted, remaining)
    return response_class(FETCH)(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        session_id=0,
        responses=responses,
    )


def _topic_names(context: BrokerContext, body: Any, api_version: int) -> list[str | None]:
    """Each requested topic's name; None for an id no topic has (UNKNOWN_TOPIC_ID)."""
    if api_version < TOPIC_IDS_VERSION:
        return [topic.topic for topic in body.topics]
    return [
        None if topic.topic_id is None else context.metadata.topic_name(topic.topic_id)
        for topic in body.topics
    ]


def _replica_id(body: Any, api_version: int) -> int:
    if api_version >= REPLICA_STATE_VERSION:
        state = body.replica_state
        return -1 if state is None or state.replica_id is None else state.replica_id
    return body.replica_id if body.replica_id is not None else -1


def _read(
    context: BrokerContext, body: Any, api_version: int, names: list[str | None]
) -> tuple[list[Any], int]:
    TopicResponse = response_class(FETCH).FetchableTopicResponse
    PartitionData = TopicResponse.PartitionData
    budget = body.max_bytes if body.max_bytes is not None else 0x7FFFFFFF
    replica_id = _replica_id(body, api_version)
    replicas = context.replicas
    total = 0
    topics = []
    for name, topic in zip(names, body.topics, strict=True):
        partitions = []
        for wanted in topic.partitions:
            data = PartitionData(
                partition_index=wanted.partition,
                error_code=ErrorCode.NONE,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=b"",
            )
            partitions.append(data)
            if name is None:
                data.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            epoch = wanted.current_leader_epoch
            try:
                if replica_id >= 0:
                    # A follower: it reads past the high watermark, and where it fetches
                    # tells the leader how far it has got.
                    partition_log = replicas.follower_log(name, wanted.partition, replica_id, epoch)
                    replicas.record_follower_fetch(
                        name, wanted.partition, replica_id, wanted.fetch_offset
                    )
                    max_offset = None
                else:
                    partition_log = replicas.leader_log(name, wanted.partition, epoch)
                    max_offset = partition_log.high_watermark
            except PartitionError as exc:
                data.error_code = exc.error_code
                continue
            data.high_watermark = data.last_stable_offset = partition_log.high_watermark
            data.log_start_offset = partition_log.log_start_offset
            config = partition_log.config
            if api_version < ZSTD_VERSION and config.compression_type == "zstd":
                data.error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
                continue
            magic = legacy_magic(api_version)
            if magic is not None and replica_id < 0 and not config.message_downconversion_enable:
                data.error_code = ErrorCode.UNSUPPORTED_VERSION
                continue
            # Past the response budget a partition still reports its offsets, without records;
            # the first one always gets a whole batch so a large batch cannot stall a consumer.
            limit = min(wanted.partition_max_bytes, budget - total)
            if limit <= 0 and total > 0:
                continue
            try:
                if magic is None:
                    records = partition_log.read_records(
                        wanted.fetch_offset,
                        max(limit, 1),
                        max_offset=max_offset,
                        min_region_bytes=ZERO_COPY_MIN_BYTES,
                    )
                else:
                    whole_first = api_version > HARD_LIMIT_VERSION and total == 0
                    records = _read_message_sets(
                        partition_log, wanted.fetch_offset, limit, max_offset, magic, whole_first
                    )
            except StorageError as exc:
                # Out of range, or the log closed under us (topic deleted, shutdown).
                data.error_code = exc.error_code
                if (
                    exc.error_code == ErrorCode.KAFKA_STORAGE_ERROR
                    and api_version <= OLD_STORAGE_ERROR_VERSION
                ):
                    data.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            except _UnsupportedCodec:
                data.error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
                continue
            data.records = records
            total += len(records)
        topics.append(TopicResponse(topic=name, topic_id=topic.topic_id, partitions=partitions))
    return topics, total


class _UnsupportedCodec(Exception):
    """The next batch uses a codec the fetch version's message format lacks (zstd)."""


def _read_message_sets(
    partition_log: PartitionLog,
    offset: int,
    limit: int,
    max_offset: int | None,
    magic: int,
    whole_first: bool,
) -> bytes:
    """Messages of `magic` from `offset` on, whole ones within `limit` bytes.

    A first message larger than the limit comes whole when `whole_first`, else cut at
    the limit, as brokers of those versions sent it: old clients then report a message
    too large for their fetch size (or grow it) instead of waiting forever. Batches
    that convert to nothing (control batches, records below `offset`) are read past.
    """
    messages: list[bytes] = []
    size = 0
    position = offset
    while True:
        data = partition_log.read(position, max(limit, 1), max_offset=max_offset)
        if not data:
            break
        converted = downconvert(data, magic, offset)
        if converted.unsupported_codec and not messages and not converted.messages:
            raise _UnsupportedCodec
        for message in converted.messages:
            if size + len(message) > limit:
                if not messages:
                    return message if whole_first else message[: max(limit, 0)]
                return b"".join(messages)
            messages.append(message)
            size += len(message)
        if messages or converted.unsupported_codec or converted.next_offset <= position:
            break
        position = converted.next_offset
    return b"".join(messages)
