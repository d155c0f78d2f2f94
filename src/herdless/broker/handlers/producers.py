"""DescribeProducers: the producers a partition's replica keeps state of, as
kafka-transactions.sh describe-producers shows them (Kafka's
KafkaApis.handleDescribeProducersRequest). Any replica answers, leader or follower,
as in Kafka: a follower replays its leader's batches into the same producer state,
so `describe-producers --broker-id` (herdless's and kafka-transactions.sh's) can
compare what each replica holds.

Each producer is told with its epoch, last sequence and timestamp, the epoch of the
transaction coordinator that wrote its last marker, and where its open transaction
began: a transaction that hangs (its coordinator lost it) is found by that offset.
Reading a topic's producers takes READ on it, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import REFUSALS, authorized_names
from herdless.broker.replication.replica_manager import PartitionError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType
from herdless.storage import InvalidTopicName, StorageError, validate_topic_name

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext


async def handle_describe_producers(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DESCRIBE_PRODUCERS)
    TopicResponse = Response.TopicResponse
    PartitionResponse = TopicResponse.PartitionResponse
    ProducerState = PartitionResponse.ProducerState
    wanted_topics = request.body.topics
    readable = authorized_names(
        context, request, AclOperation.READ, ResourceType.TOPIC, [t.name for t in wanted_topics]
    )
    topics = []
    for topic in wanted_topics:
        refusal = _refusal(topic.name, readable)
        partitions = []
        for index in topic.partition_indexes:
            result = PartitionResponse(
                partition_index=index, error_code=ErrorCode.NONE, active_producers=[]
            )
            partitions.append(result)
            if refusal is not None:
                result.error_code, result.error_message = refusal
                continue
            try:
                producers = context.replicas.replica_log(topic.name, index).active_producers()
            except PartitionError as exc:
                result.error_code, result.error_message = exc.error_code, exc.message
                continue
            except StorageError as exc:  # the log closed under us (topic deleted, shutdown)
                result.error_code, result.error_message = exc.error_code, str(exc)
                continue
            result.active_producers = [
                ProducerState(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.epoch,
                    last_sequence=entry.last_sequence,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=entry.current_txn_first_offset,
                )
                for entry in producers
            ]
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
    return Response(throttle_time_ms=0, topics=topics)


def _refusal(name: str, readable: set[str]) -> tuple[ErrorCode, str] | None:
    """Why a topic's partitions are not described, in Kafka's order: an invalid name,
    then READ refused."""
    try:
        validate_topic_name(name)
    except InvalidTopicName as exc:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)
    if name not in readable:
        return REFUSALS[ResourceType.TOPIC]
    return None
