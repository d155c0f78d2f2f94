"""Produce and InitProducerId."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from herdless.broker.clock import now_ms
from herdless.broker.group_coordinator import INTERNAL_TOPICS
from herdless.broker.handlers.cluster import LEADER_EPOCH
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import InvalidBatch, split_batches
from herdless.storage import PartitionLog, StorageError

if TYPE_CHECKING:
    from herdless.broker.broker import Broker

log = logging.getLogger(__name__)

PRODUCE = 0
INIT_PRODUCER_ID = 22
# One broker: every partition has one replica, always in sync.
IN_SYNC_REPLICAS = 1


async def handle_produce(broker: Broker, request: Request) -> Any:
    body = request.body
    Response = response_class(PRODUCE)
    TopicResponse = Response.TopicProduceResponse
    PartitionResponse = TopicResponse.PartitionProduceResponse
    acks = body.acks
    if body.transactional_id is not None:
        refusal: ErrorCode | None = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif acks not in (-1, 0, 1):
        refusal = ErrorCode.INVALID_REQUIRED_ACKS
    else:
        refusal = None

    to_flush: list[PartitionLog] = []
    topics = []
    for topic_data in body.topic_data:
        partitions = []
        for partition_data in topic_data.partition_data:
            result = PartitionResponse(index=partition_data.index, base_offset=-1)
            if refusal is not None:
                result.error_code = refusal
            else:
                _append(broker, topic_data.name, partition_data, acks, result, to_flush)
            partitions.append(result)
        topics.append(TopicResponse(name=topic_data.name, partition_responses=partitions))

    # The answer waits until the flush policy is met; producers share fsyncs (group commit).
    for partition_log in to_flush:
        await broker.flush(partition_log)
    if acks == 0:
        return None
    return Response(responses=topics, throttle_time_ms=0)


def _append(
    broker: Broker,
    topic: str,
    partition_data: Any,
    acks: int,
    result: Any,
    to_flush: list[PartitionLog],
) -> None:
    partition_log = broker.logs.partition(topic, partition_data.index)
    if partition_log is None:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return
    if topic in INTERNAL_TOPICS:
        result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
        result.error_message = f"{topic} is internal: only the broker writes to it"
        return
    config = partition_log.config
    if acks == -1 and config.min_insync_replicas > IN_SYNC_REPLICAS:
        # As a one-broker Kafka answers: acks=all cannot be met with fewer in-sync
        # replicas than the topic demands, so nothing is written.
        result.error_code = ErrorCode.NOT_ENOUGH_REPLICAS
        result.error_message = (
            f"{topic} has min.insync.replicas={config.min_insync_replicas}; this broker"
            f" keeps {IN_SYNC_REPLICAS} replica, so acks=all cannot be satisfied"
        )
        return
    try:
        batches = split_batches(partition_data.records or b"", config.max_message_bytes)
    except InvalidBatch as exc:
        result.error_code = exc.error
        result.error_message = str(exc)
        log.info("refused a batch for %s-%d: %s", topic, partition_data.index, exc)
        return
    try:
        info = partition_log.append(batches, now_ms(), leader_epoch=LEADER_EPOCH)
    except StorageError as exc:
        result.error_code = exc.error_code
        result.error_message = str(exc)
        return
    result.error_code = ErrorCode.NONE
    result.base_offset = info.first_offset
    result.log_append_time_ms = info.log_append_time_ms
    result.log_start_offset = info.log_start_offset
    if not info.duplicate:
        broker.appends.notify(topic, partition_data.index)
    flush_messages = config.flush_messages
    if flush_messages is not None and partition_log.unflushed_messages >= flush_messages:
        to_flush.append(partition_log)


async def handle_init_producer_id(broker: Broker, request: Request) -> Any:
    Response = response_class(INIT_PRODUCER_ID)
    if request.body.transactional_id is not None:
        # Transactions are not served; refusing clearly beats a producer that hangs.
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        producer_id=broker.next_producer_id(),
        producer_epoch=0,
    )
