"""DescribeProducers: the producers a partition's leader keeps state of, as
kafka-transactions.sh describe-producers shows them (Kafka's
KafkaApis.handleDescribeProducersRequest).

Each producer is told with its epoch, last sequence and timestamp, the epoch of the
transaction coordinator that wrote its last marker, and where its open transaction
began: a transaction that hangs (its coordinator lost it) is found by that offset.
Reading a topic's producers takes READ on it, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import authorized_names
from herdless.broker.replication.replica_manager import PartitionError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType
from herdless.storage import StorageError

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
        partitions = []
        for index in topic.partition_indexes:
            result = PartitionResponse(
                partition_index=index, error_code=ErrorCode.NONE, active_producers=[]
            )
            partitions.append(result)
            if topic.name not in readable:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                producers = context.replicas.leader_log(topic.name, index).active_producers()
            except (PartitionError, StorageError) as exc:
                result.error_code = exc.error_code
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
