"""Fetch with long polling: a fetch short of min_bytes parks until an append wakes it.

Fetch sessions (KIP-227, from v7): the session cache (broker/handlers/fetch_sessions.py)
says which partitions a request covers, those it names or all of its session's,
and which of their answers go back. The wait for min_bytes counts every
partition of the session, as Kafka's does, not only those the request named.

Fetch v0-v3 cannot carry v2 batches: their records are down-converted to message
sets, magic v1 for v2-v3 and v0 for v0-v1, as Kafka 3 does (legacy_records).
From v13 topics are named by id (KIP-516); from v15 a follower's id comes in the
replica state.

From v4 a consumer may read at read_committed (isolation level 1): it is served
below the last stable offset rather than the high watermark, and told the aborted
transactions among the records it gets, so that it drops their records (Kafka's
FetchIsolation.TXN_COMMITTED). Followers and older versions read uncommitted.

From v11 a consumer names its rack and may read from any replica, not only the
leader (KIP-392): a follower serves it below its own high watermark (and last
stable offset). A leader whose replica.selector.class picks another replica for
the consumer answers that partition with no records and the replica's id in
preferred_read_replica, and answers the fetch at once, as Kafka does.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from herdless.broker.clock import monotonic_ms
from herdless.broker.handlers.authorization import authorize_cluster, authorized_names
from herdless.broker.handlers.fetch_sessions import (
    CachedPartition,
    PartitionKey,
)
from herdless.broker.replication.replica_manager import PartitionError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.protocol.fetch_metadata import FINAL_EPOCH, INVALID_SESSION_ID
from herdless.protocol.legacy_records import MAGIC_V0, MAGIC_V1, downconvert
from herdless.protocol.regions import FileRegion
from herdless.security.acls import AclOperation, ResourceType
from herdless.security.session import NO_REQUESTS_BEHIND
from herdless.storage import PartitionLog, StorageError

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

# Versions below this cannot be answered from a topic whose compression.type is zstd.
ZSTD_VERSION = 10
# Up to this version a partition's max bytes is a hard limit: no batch is given whole
# past it (v3 added the response's max_bytes and "at least one message").
HARD_LIMIT_VERSION = 2
# From v7 a request names its fetch session and epoch; from v13 topics by id.
SESSIONS_VERSION = 7
TOPIC_IDS_VERSION = 13
REPLICA_STATE_VERSION = 15
# From v11 a consumer says its rack and may be sent to another replica (KIP-392).
CLIENT_METADATA_VERSION = 11
# From v4 a fetch names its isolation level; READ_COMMITTED reads below the last stable offset.
ISOLATION_VERSION = 4
READ_COMMITTED = 1
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
    api_version = request.api_version
    deadline = time.monotonic() + max(body.max_wait_ms, 0) / 1000
    replica_id = replica_id_of(body, api_version)
    uses_topic_ids = api_version >= TOPIC_IDS_VERSION
    session_id, epoch = INVALID_SESSION_ID, FINAL_EPOCH
    if api_version >= SESSIONS_VERSION:
        session_id, epoch = body.session_id, body.session_epoch
    requested, forgotten = _requested(body, uses_topic_ids)
    # Sessions' ages decide eviction: the monotonic clock.
    fetch = context.fetch_sessions.new_context(
        monotonic_ms(), session_id, epoch, replica_id >= 0, uses_topic_ids, requested, forgotten
    )
    partitions = fetch.partitions
    if uses_topic_ids:
        _name_topics(context, partitions)
    refused = (
        _refused_topics(context, request, partitions, replica_id)
        if context.acls is not None
        else None
    )
    wanted = [
        (p.topic, p.partition)
        for p in partitions
        if p.topic is not None and (refused is None or p.topic not in refused)
    ]
    read_committed = (
        api_version >= ISOLATION_VERSION
        and replica_id < 0
        and body.isolation_level == READ_COMMITTED
    )
    client_rack = (
        (body.rack_id or "") if api_version >= CLIENT_METADATA_VERSION and replica_id < 0 else None
    )
    behind = request.session.behind if request.session is not None else NO_REQUESTS_BEHIND
    while True:
        read, size = _read(
            context,
            partitions,
            api_version,
            replica_id,
            body.max_bytes,
            refused,
            read_committed,
            client_rack,
        )
        remaining = deadline - time.monotonic()
        # Nothing to read (a session error, an empty fetch, only partitions refused) is
        # answered at once, as Kafka does; so is a consumer sent to another replica, and
        # one that sent another request behind this one.
        if (
            not wanted
            or size >= body.min_bytes
            or remaining <= 0
            or context.stopping
            or any(data.preferred_read_replica >= 0 for _, data in read)
            or behind.waiting()
        ):
            break
        await context.replicas.wait_for_appends(wanted, remaining, behind)
    answer = fetch.answer(read)
    return response_class(ApiKey.FETCH)(
        throttle_time_ms=0,
        error_code=answer.error_code,
        session_id=answer.session_id,
        responses=_by_topic(answer.partitions, uses_topic_ids),
    )


def _refused_topics(
    context: BrokerContext, request: Request, partitions: list[CachedPartition], replica_id: int
) -> set[str | None]:
    """The topics whose partitions are answered TOPIC_AUTHORIZATION_FAILED, as Kafka
    decides over every partition of the fetch (its session's too): a follower needs
    CLUSTER_ACTION on the cluster, else it is refused everything; a consumer needs READ
    on each topic."""
    names = [p.topic for p in partitions if p.topic is not None]
    if replica_id >= 0:
        if authorize_cluster(context, request, AclOperation.CLUSTER_ACTION):
            return set()
        return {p.topic for p in partitions}
    allowed = authorized_names(context, request, AclOperation.READ, ResourceType.TOPIC, names)
    return {name for name in names if name not in allowed}


def _name_topics(context: BrokerContext, partitions: list[CachedPartition]) -> None:
    """Name each partition's topic by its id, afresh at each fetch: a topic deleted since
    leaves its id unknown (None), and a topic created again under the name has another id."""
    names: dict[uuid.UUID | None, str | None] = {None: None}
    for partition in partitions:
        topic_id = partition.topic_id
        if topic_id not in names:
            names[topic_id] = context.metadata.topic_name(topic_id)
        partition.topic = names[topic_id]


def _requested(
    body: Any, uses_topic_ids: bool
) -> tuple[dict[PartitionKey, CachedPartition], list[PartitionKey]]:
    """The partitions a request names, by session key, and those it asks to forget."""
    requested: dict[PartitionKey, CachedPartition] = {}
    for topic in body.topics:
        name = None if uses_topic_ids else topic.topic
        topic_id = topic.topic_id if uses_topic_ids else None
        for wanted in topic.partitions:
            partition = CachedPartition(
                topic=name,
                topic_id=topic_id,
                partition=wanted.partition,
                fetch_offset=wanted.fetch_offset,
                partition_max_bytes=wanted.partition_max_bytes,
                current_leader_epoch=wanted.current_leader_epoch,
                log_start_offset=wanted.log_start_offset,
                last_fetched_epoch=wanted.last_fetched_epoch,
            )
            requested[partition.key(uses_topic_ids)] = partition
    forgotten: list[PartitionKey] = [
        (topic.topic_id if uses_topic_ids else topic.topic, index)
        for topic in body.forgotten_topics_data or ()
        for index in topic.partitions
    ]
    return requested, forgotten


def _by_topic(answered: list[tuple[CachedPartition, Any]], uses_topic_ids: bool) -> list[Any]:
    """The answered partitions under their topics, each topic once, in first-answered order."""
    TopicResponse = response_class(ApiKey.FETCH).FetchableTopicResponse
    topics: dict[str | uuid.UUID | None, Any] = {}
    for partition, data in answered:
        key = partition.topic_id if uses_topic_ids else partition.topic
        topic = topics.get(key)
        if topic is None:
            topic = topics[key] = TopicResponse(
                topic=partition.topic, topic_id=partition.topic_id, partitions=[]
            )
        topic.partitions.append(data)
    return list(topics.values())


def replica_id_of(body: Any, api_version: int) -> int:
    if api_version >= REPLICA_STATE_VERSION:
        state = body.replica_state
        return -1 if state is None or state.replica_id is None else state.replica_id
    return body.replica_id if body.replica_id is not None else -1


def _read(
    context: BrokerContext,
    fetched: list[CachedPartition],
    api_version: int,
    replica_id: int,
    max_bytes: int | None,
    refused: set[str | None] | None = None,
    read_committed: bool = False,
    client_rack: str | None = None,
) -> tuple[list[tuple[CachedPartition, Any]], int]:
    """Each partition's answer, in order, and the bytes of records they carry; the
    partitions of `refused` topics answered TOPIC_AUTHORIZATION_FAILED. A consumer
    `read_committed` reads below the last stable offset, with the aborted transactions.
    A consumer with a `client_rack` ("" for none: Fetch v11 on) reads from any replica
    here, and may be sent to another."""
    PartitionData = response_class(ApiKey.FETCH).FetchableTopicResponse.PartitionData
    AbortedTransaction = PartitionData.AbortedTransaction
    budget = max_bytes if max_bytes is not None else 0x7FFFFFFF
    replicas = context.replicas
    total = 0
    partitions = []
    for wanted in fetched:
        name = wanted.topic
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
        partitions.append((wanted, data))
        if refused and name in refused:
            data.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
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
                    name,
                    wanted.partition,
                    replica_id,
                    wanted.fetch_offset,
                    wanted.log_start_offset,
                )
                max_offset = None
            else:
                partition_log = replicas.consumer_log(
                    name, wanted.partition, epoch, client_rack is not None
                )
                max_offset = partition_log.high_watermark
        except PartitionError as exc:
            data.error_code = exc.error_code
            continue
        data.high_watermark = partition_log.high_watermark
        # Told at either isolation level, as Kafka does.
        data.last_stable_offset = partition_log.last_stable_offset
        if read_committed:
            max_offset = data.last_stable_offset
        data.log_start_offset = partition_log.log_start_offset
        if client_rack is not None:
            preferred = replicas.preferred_read_replica(
                partition_log, client_rack, wanted.fetch_offset
            )
            if preferred is not None:
                # The offsets as the leader has them, and no records: read them there.
                data.preferred_read_replica = preferred
                continue
        config = partition_log.config
        if api_version < ZSTD_VERSION and config.compression_type == "zstd":
            data.error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            continue
        magic = legacy_magic(api_version)
        if magic is not None and replica_id < 0 and not config.message_downconversion_enable:
            data.error_code = ErrorCode.UNSUPPORTED_VERSION
            continue
        if replica_id >= 0 and replicas.leader_throttled(partition_log, replica_id):
            continue  # offsets without records: a replica catching up, slowed (KIP-73)
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
        if read_committed and records:
            try:
                aborted = partition_log.aborted_transactions_read(wanted.fetch_offset, records)
            except StorageError as exc:  # the log closed under us
                if isinstance(records, FileRegion):
                    records.close()
                data.error_code = exc.error_code
                continue
            data.aborted_transactions = [
                AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
                for txn in aborted
            ]
        data.records = records
        total += len(records)
        if replica_id >= 0:
            replicas.record_sent_to_follower(partition_log, len(records))
        elif records:
            context.bytes_out(name, len(records))
    return partitions, total


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
