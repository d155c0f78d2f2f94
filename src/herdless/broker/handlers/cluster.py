"""Metadata and DescribeCluster: one broker that leads every partition."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from herdless.broker.group_coordinator import INTERNAL_TOPICS
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.storage import StorageError, Topic

if TYPE_CHECKING:
    from herdless.broker.broker import Broker

log = logging.getLogger(__name__)

METADATA = 3
DESCRIBE_CLUSTER = 60
# Clients call OffsetForLeaderEpoch when the epoch rises; one node never changes leader.
LEADER_EPOCH = 0


async def handle_metadata(broker: Broker, request: Request) -> Any:
    body = request.body
    Response = response_class(METADATA)
    TopicResponse = Response.MetadataResponseTopic
    host, port = broker.config.advertised_address
    brokers = [Response.MetadataResponseBroker(node_id=broker.node_id, host=host, port=port)]

    # v0 asks for all topics with an empty list; later versions with null.
    if body.topics is None or (request.api_version == 0 and not body.topics):
        names = sorted(broker.logs.topics)
    else:
        names = [topic.name for topic in body.topics]
    auto_create = broker.config.auto_create_topics and body.allow_auto_topic_creation is not False

    topics = []
    for name in names:
        topic = broker.logs.topics.get(name)
        if topic is None:
            error = (
                _auto_create(broker, name) if auto_create else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            topic = broker.logs.topics.get(name)
            if topic is None:
                topics.append(TopicResponse(error_code=error, name=name, partitions=[]))
                continue
        topics.append(_describe(topic, broker.node_id, TopicResponse))
    return Response(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        authorized_operations=None,
        error_code=ErrorCode.NONE,
    )


def _auto_create(broker: Broker, name: str) -> ErrorCode:
    try:
        broker.logs.create_topic(name, broker.config.num_partitions, {})
    except StorageError as exc:
        return exc.error_code
    log.info("auto-created topic %s with %d partitions", name, broker.config.num_partitions)
    # Kafka answers LEADER_NOT_AVAILABLE on creation; the leader is already here, so serve it.
    return ErrorCode.NONE


def _describe(topic: Topic, node_id: int, TopicResponse: Any) -> Any:
    PartitionResponse = TopicResponse.MetadataResponsePartition
    partitions = [
        PartitionResponse(
            error_code=ErrorCode.NONE,
            partition_index=index,
            leader_id=node_id,
            leader_epoch=LEADER_EPOCH,
            replica_nodes=[node_id],
            isr_nodes=[node_id],
            offline_replicas=[],
        )
        for index in range(topic.partition_count)
    ]
    return TopicResponse(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=partitions,
        authorized_operations=None,
    )


async def handle_describe_cluster(broker: Broker, request: Request) -> Any:
    Response = response_class(DESCRIBE_CLUSTER)
    host, port = broker.config.advertised_address
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=[Response.DescribeClusterBroker(broker_id=broker.node_id, host=host, port=port)],
        authorized_operations=None,
    )
