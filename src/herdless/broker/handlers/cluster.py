"""Metadata and DescribeCluster, answered from the broker's metadata view."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from herdless.broker.group_coordinator import INTERNAL_TOPICS
from herdless.broker.metadata import TopicMetadata
from herdless.broker.topic_admin import NewTopic, TopicAdminError
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from herdless.broker.context import BrokerContext

log = logging.getLogger(__name__)

METADATA = 3
DESCRIBE_CLUSTER = 60


async def handle_metadata(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(METADATA)
    TopicResponse = Response.MetadataResponseTopic
    metadata = context.metadata
    brokers = [
        Response.MetadataResponseBroker(
            node_id=b.node_id, host=address[0], port=address[1], rack=b.rack
        )
        for b in metadata.advertised_brokers()
        if (address := b.address_for(request)) is not None
    ]

    # v0 asks for all topics with an empty list; later versions with null.
    names: list[str | None]
    if body.topics is None or (request.api_version == 0 and not body.topics):
        names = list(metadata.topic_names())
    else:
        names = [topic.name for topic in body.topics]
    auto_create = context.config.auto_create_topics and body.allow_auto_topic_creation is not False

    topics = []
    for index, requested in enumerate(names):
        name = requested
        if not name and request.api_version >= 10:
            # v10+ may name a topic by id alone (as consumers of KIP-848 groups, which are
            # assigned partitions by topic id, do); an unknown id is not created.
            topic_id = body.topics[index].topic_id
            name = metadata.topic_name(topic_id) if topic_id.int else None
            if name is None:
                topics.append(
                    TopicResponse(
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                        name=None,
                        topic_id=topic_id,
                        partitions=[],
                    )
                )
                continue
        assert name is not None
        topic = metadata.topic(name)
        if topic is None:
            if auto_create:
                error = await _auto_create(context, name)
            else:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            topic = metadata.topic(name)
            if topic is None:
                topics.append(TopicResponse(error_code=error, name=name, partitions=[]))
                continue
        topics.append(_describe(topic, TopicResponse))
    return Response(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=metadata.cluster_id,
        controller_id=metadata.controller_id,
        topics=topics,
        authorized_operations=None,
        error_code=ErrorCode.NONE,
    )


async def _auto_create(context: BrokerContext, name: str) -> ErrorCode:
    try:
        await context.topics.create_topic(NewTopic(name))
    except TopicAdminError as exc:
        return exc.error_code
    log.info("auto-created topic %s", name)
    # As Kafka: the topic exists but its leaders may not be known yet; clients retry. One
    # broker leads at once, so it serves the topic in this very answer.
    return ErrorCode.LEADER_NOT_AVAILABLE


def _describe(topic: TopicMetadata, TopicResponse: Any) -> Any:
    PartitionResponse = TopicResponse.MetadataResponsePartition
    partitions = [
        PartitionResponse(
            error_code=ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p.partition,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            offline_replicas=list(p.offline_replicas),
        )
        for p in topic.partitions
    ]
    return TopicResponse(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=partitions,
        authorized_operations=None,
    )


async def handle_describe_cluster(context: BrokerContext, request: Request) -> Any:
    Response = response_class(DESCRIBE_CLUSTER)
    metadata = context.metadata
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        cluster_id=metadata.cluster_id,
        controller_id=metadata.controller_id,
        brokers=[
            Response.DescribeClusterBroker(
                broker_id=b.node_id, host=address[0], port=address[1], rack=b.rack
            )
            for b in metadata.advertised_brokers()
            if (address := b.address_for(request)) is not None
        ],
        authorized_operations=None,
    )
