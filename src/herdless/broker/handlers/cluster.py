"""Metadata and DescribeCluster, answered from the broker's metadata view."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from herdless.broker.coordinators.group_coordinator import INTERNAL_TOPICS
from herdless.broker.handlers.authorization import (
    authorize,
    authorize_cluster,
    authorized_names,
    authorized_operations,
)
from herdless.broker.topics.topic_admin import NewTopic, TopicAdminError
from herdless.cluster.metadata import MetadataView, TopicMetadata
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

# The id of a topic refused or not created: Kafka gives no id away with a refusal.
_NO_TOPIC_ID = uuid.UUID(int=0)


async def handle_metadata(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.METADATA)
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
    all_topics = body.topics is None or (request.api_version == 0 and not body.topics)
    # (name, the id it was asked by or None); a name of None: an id no topic has.
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if all_topics:
        wanted = [(name, None) for name in metadata.topic_names()]
    else:
        wanted = [_named(metadata, topic, request.api_version) for topic in body.topics]
    auto_create = (
        context.config.auto_create_topics
        and body.allow_auto_topic_creation is not False
        and not all_topics
    )
    # Topics the caller may not describe are left out of an answer about all of them and
    # refused by name otherwise, whether they exist or not (Kafka's rule: their existence
    # is not disclosed).
    described = authorized_names(
        context,
        request,
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        [name for name, _ in wanted if name is not None],
        log_denied=not all_topics,
    )
    creatable = _Creatable(context, request)
    operations = request.api_version >= 8 and bool(body.include_topic_authorized_operations)

    topics = []
    for name, topic_id in wanted:
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
        if name not in described:
            if not all_topics:
                # Asked by id, the id is no secret; asked by name, nor is the name.
                topics.append(
                    TopicResponse(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        name=None if topic_id is not None else name,
                        topic_id=topic_id if topic_id is not None else _NO_TOPIC_ID,
                        partitions=[],
                    )
                )
            continue
        topic = metadata.topic(name)
        if topic is None:
            if auto_create and not creatable(name):
                topics.append(
                    TopicResponse(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        name=name,
                        topic_id=_NO_TOPIC_ID,
                        is_internal=name in INTERNAL_TOPICS,
                        partitions=[],
                    )
                )
                continue
            if auto_create:
                error = await _auto_create(context, name)
            else:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            topic = metadata.topic(name)
            if topic is None:
                answer = TopicResponse(error_code=error, name=name, partitions=[])
                if operations:
                    answer.authorized_operations = authorized_operations(
                        context, request, ResourceType.TOPIC, name
                    )
                topics.append(answer)
                continue
        answer = _describe(topic, TopicResponse)
        if operations:
            answer.authorized_operations = authorized_operations(
                context, request, ResourceType.TOPIC, name
            )
        topics.append(answer)
    return Response(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=metadata.cluster_id,
        controller_id=metadata.controller_id,
        topics=topics,
        authorized_operations=(
            _cluster_operations(context, request)
            if 8 <= request.api_version <= 10 and body.include_cluster_authorized_operations
            else None
        ),
        error_code=ErrorCode.NONE,
    )


def _named(
    metadata: MetadataView, topic: Any, api_version: int
) -> tuple[str | None, uuid.UUID | None]:
    """A requested topic's name, and the id it was asked by (v10+ may name a topic by id
    alone, as consumers of KIP-848 groups, assigned partitions by topic id, do); an
    unknown id has no name and is not created."""
    if topic.name or api_version < 10:
        return topic.name, None
    topic_id = topic.topic_id
    return (metadata.topic_name(topic_id) if topic_id.int else None), topic_id


class _Creatable:
    """Whether the caller may have a topic auto-created: CREATE on the cluster, else on
    the topic (Kafka asks the cluster once, without logging its refusal)."""

    def __init__(self, context: BrokerContext, request: Request) -> None:
        self._context = context
        self._request = request
        self._cluster: bool | None = None

    def __call__(self, name: str) -> bool:
        context, request = self._context, self._request
        if context.acls is None:
            return True
        if self._cluster is None:
            self._cluster = authorize_cluster(
                context, request, AclOperation.CREATE, log_denied=False
            )
        return self._cluster or authorize(
            context, request, AclOperation.CREATE, ResourceType.TOPIC, name
        )


def _cluster_operations(context: BrokerContext, request: Request) -> set[int]:
    """The cluster's authorized operations, as Kafka answers them: none at all to a
    caller that may not describe the cluster."""
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        return set()
    return authorized_operations(context, request, ResourceType.CLUSTER, CLUSTER_NAME)


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
    Response = response_class(ApiKey.DESCRIBE_CLUSTER)
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
        authorized_operations=(
            _cluster_operations(context, request)
            if request.body.include_cluster_authorized_operations
            else None
        ),
    )
