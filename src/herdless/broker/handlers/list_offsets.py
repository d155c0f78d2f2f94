"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a time.

Version 0 answers differently, as Kafka does: up to max_num_offsets offsets
(old_style_offsets), segment base offsets chosen by when each segment file was
last written rather than by record timestamps (see PartitionLog.legacy_offsets_before).

A consumer is told only of offsets it may fetch (Kafka's Partition.fetchOffsetForTimestamp):
below the high watermark, or from v2 at isolation level read_committed below the last
stable offset, which is then its LATEST.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.broker.clock import wall_ms
from herdless.broker.handlers.authorization import authorized_names
from herdless.broker.replication.replica_manager import PartitionError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType
from herdless.storage import StorageError

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext
    from herdless.storage import PartitionLog

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
CONSUMER_REPLICA_ID = -1
# From v2 a request names its isolation level.
ISOLATION_VERSION = 2
READ_COMMITTED = 1
# The first version that may ask for each special timestamp (Kafka's KafkaApis table).
_SPECIAL_SINCE = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


async def handle_list_offsets(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.LIST_OFFSETS)
    TopicResponse = Response.ListOffsetsTopicResponse
    PartitionResponse = TopicResponse.ListOffsetsPartitionResponse
    # DESCRIBE on each topic, followers' requests too (Kafka asks no more of them here).
    described = authorized_names(
        context,
        request,
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        [topic.name for topic in request.body.topics],
    )
    topics = []
    for topic in request.body.topics:
        partitions = []
        for wanted in topic.partitions:
            result = PartitionResponse(
                partition_index=wanted.partition_index,
                error_code=ErrorCode.NONE,
                old_style_offsets=[],
                timestamp=-1,
                offset=-1,
                leader_epoch=-1,
            )
            if topic.name not in described:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                partitions.append(result)
                continue
            if request.api_version == 0:
                _answer_v0(context, topic.name, wanted, request.body.replica_id, result)
                partitions.append(result)
                continue
            if wanted.timestamp < 0 and request.api_version < _SPECIAL_SINCE.get(
                wanted.timestamp, 1 << 15
            ):
                result.error_code = ErrorCode.UNSUPPORTED_VERSION
                partitions.append(result)
                continue
            try:
                partition_log = context.replicas.leader_log(
                    topic.name, wanted.partition_index, wanted.current_leader_epoch
                )
            except PartitionError as exc:
                result.error_code = exc.error_code
            else:
                result.leader_epoch = context.replicas.leader_epoch(partition_log)
                result.timestamp, result.offset = _lookup(
                    partition_log, wanted.timestamp, _last_fetchable(partition_log, request)
                )
                if wanted.timestamp == LATEST_TIERED:
                    result.leader_epoch = -1
                result.old_style_offsets = [result.offset]
            partitions.append(result)
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
    return Response(throttle_time_ms=0, topics=topics)


def _last_fetchable(partition_log: PartitionLog, request: Request) -> int | None:
    """The end of what the requester may fetch: None for a replica, which may read it all."""
    body = request.body
    if body.replica_id != CONSUMER_REPLICA_ID:
        return None
    if request.api_version >= ISOLATION_VERSION and body.isolation_level == READ_COMMITTED:
        return partition_log.last_stable_offset
    return partition_log.high_watermark


def _lookup(
    partition_log: PartitionLog, timestamp: int, last_fetchable: int | None
) -> tuple[int, int]:
    """(timestamp, offset) as Kafka answers: -1 timestamp for the special lookups; a
    consumer is told of no offset at or past `last_fetchable` (-1, -1 instead)."""
    if timestamp == LATEST:
        return -1, partition_log.high_watermark if last_fetchable is None else last_fetchable
    found = _find(partition_log, timestamp)
    if (
        last_fetchable is not None
        and timestamp not in (EARLIEST, EARLIEST_LOCAL)
        and found[1] >= last_fetchable
    ):
        return -1, -1
    return found


def _find(partition_log: PartitionLog, timestamp: int) -> tuple[int, int]:
    """(timestamp, offset) of any lookup but LATEST, wherever in the log it lies."""
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        # With no remote tier, the local log starts where the log does.
        return -1, partition_log.log_start_offset
    if timestamp == LATEST_TIERED:
        return -1, -1  # nothing is tiered
    if timestamp == MAX_TIMESTAMP:
        found = partition_log.max_timestamp_offset()
        return (found[1], found[0]) if found is not None else (-1, -1)
    found = partition_log.offset_for_timestamp(timestamp)
    if found is None:
        # No record that late: Kafka answers offset -1 and clients treat it as the end.
        return -1, -1
    offset, record_timestamp = found
    return record_timestamp, offset


def _answer_v0(
    context: BrokerContext, topic: str, wanted: Any, replica_id: int, result: Any
) -> None:
    if wanted.timestamp < EARLIEST:
        # v0 knows no other special timestamps (such as -3, max timestamp).
        result.error_code = ErrorCode.UNSUPPORTED_VERSION
        return
    if wanted.max_num_offsets < 0:
        # Kafka's answer too: its array of that many offsets cannot be made.
        result.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
        return
    try:
        partition_log = context.replicas.leader_log(topic, wanted.partition_index)
    except PartitionError as exc:
        result.error_code = exc.error_code
        return
    try:
        offsets = partition_log.legacy_offsets_before(
            # Compared with segments' modification times: the wall clock.
            wanted.timestamp,
            wanted.max_num_offsets,
            wall_ms(),
        )
    except StorageError as exc:  # the log closed under us (topic deleted, shutdown)
        result.error_code = exc.error_code
        return
    if replica_id == CONSUMER_REPLICA_ID:
        # A consumer is never told of offsets past the high watermark: it gets that instead.
        high_watermark = partition_log.high_watermark
        if any(offset > high_watermark for offset in offsets):
            offsets = [high_watermark, *(o for o in offsets if o <= high_watermark)]
    result.old_style_offsets = offsets
