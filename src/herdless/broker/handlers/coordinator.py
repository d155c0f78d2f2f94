"""FindCoordinator: a group's coordinator leads its partition of `__consumer_offsets`, a
transactional id's its partition of `__transaction_state`, a share partition's
("groupId:topicId:partition", asked only by brokers) its partition of
`__share_group_state`.

librdkafka also reads FindCoordinator v0 in ApiVersions as the sign of a broker
new enough for LZ4, so it is served even before the group APIs are.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from herdless.broker.coordinators.group_coordinator import (
    OFFSETS_TOPIC,
    REBALANCES_TOPIC,
)
from herdless.broker.coordinators.share_coordinator import SHARE_GROUP_STATE_TOPIC
from herdless.broker.coordinators.transaction_coordinator import TRANSACTION_STATE_TOPIC
from herdless.broker.handlers.authorization import REFUSALS, authorize, authorize_cluster
from herdless.broker.topics.topic_admin import TopicAdminError
from herdless.cluster.metadata import BrokerEndpoint
from herdless.coordinator import partition_for
from herdless.coordinator.share_state import parse_coordinator_key
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

# The group coordinator's topics, created by the first FindCoordinator for a group.
GROUP_TOPICS = (OFFSETS_TOPIC, REBALANCES_TOPIC)
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2
# The first version with the SHARE key type (KIP-932).
SHARE_KEY_VERSION = 6
# What the caller must be allowed to DESCRIBE to learn a key's coordinator.
_KEY_RESOURCE_TYPES = {
    KEY_TYPE_GROUP: ResourceType.GROUP,
    KEY_TYPE_TRANSACTION: ResourceType.TRANSACTIONAL_ID,
}


async def handle_find_coordinator(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.FIND_COORDINATOR)
    keys = [body.key] if request.api_version < 4 else body.coordinator_keys
    refused = _refused_keys(context, request, body.key_type, keys)
    if (
        body.key_type == KEY_TYPE_GROUP
        and len(refused) < len(set(keys))
        and any(context.metadata.topic(topic) is None for topic in GROUP_TOPICS)
    ):
        try:
            await context.groups.create_topics(
                context.topics, context.config.offsets_topic_replication_factor
            )
        except TopicAdminError as exc:
            # As Kafka: no coordinator until the offsets topic can have its replicas.
            log.warning("cannot create the internal topics yet: %s", exc.message)
    if (
        body.key_type == KEY_TYPE_TRANSACTION
        and context.transactions is not None
        and len(refused) < len(set(keys))
        and context.metadata.topic(TRANSACTION_STATE_TOPIC) is None
    ):
        try:
            await context.transactions.create_topic(
                context.topics, context.config.transaction_state_log_replication_factor
            )
        except TopicAdminError as exc:
            log.warning("cannot create %s yet: %s", TRANSACTION_STATE_TOPIC, exc.message)
    if (
        body.key_type == KEY_TYPE_SHARE
        and context.share_coordinator is not None
        and len(refused) < len(set(keys))
        and context.metadata.topic(SHARE_GROUP_STATE_TOPIC) is None
    ):
        try:
            await context.share_coordinator.create_topic(
                context.topics, context.config.share_coordinator_state_topic_replication_factor
            )
        except TopicAdminError as exc:
            log.warning("cannot create %s yet: %s", SHARE_GROUP_STATE_TOPIC, exc.message)
    if request.api_version < 4:
        error, message, coordinator = _find(context, request, body.key_type, body.key, refused)
        return Response(
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            node_id=coordinator.node_id if coordinator else -1,
            host=coordinator.host if coordinator else "",
            port=coordinator.port if coordinator else -1,
        )
    coordinators = []
    for key in body.coordinator_keys:
        error, message, coordinator = _find(context, request, body.key_type, key, refused)
        coordinators.append(
            Response.Coordinator(
                key=key,
                node_id=coordinator.node_id if coordinator else -1,
                host=coordinator.host if coordinator else "",
                port=coordinator.port if coordinator else -1,
                error_code=error,
                error_message=message,
            )
        )
    return Response(throttle_time_ms=0, coordinators=coordinators)


def _refused_keys(
    context: BrokerContext, request: Request, key_type: int, keys: list[str]
) -> set[str]:
    """The keys whose coordinator the caller may not learn: those it may not DESCRIBE,
    and every share partition's for a caller that is not a broker (CLUSTER_ACTION)."""
    if key_type == KEY_TYPE_SHARE:
        if authorize_cluster(context, request, AclOperation.CLUSTER_ACTION):
            return set()
        return set(keys)
    resource_type = _KEY_RESOURCE_TYPES.get(key_type)
    if context.acls is None or resource_type is None:
        return set()
    return {
        key
        for key in dict.fromkeys(keys)
        if not authorize(context, request, AclOperation.DESCRIBE, resource_type, key)
    }


def _find(
    context: BrokerContext, request: Request, key_type: int, key: str, refused: set[str]
) -> tuple[ErrorCode, str | None, BrokerEndpoint | None]:
    """The coordinator of `key`, at its address on the listener the request came in on."""
    if key in refused:
        code, message = REFUSALS[_KEY_RESOURCE_TYPES.get(key_type, ResourceType.CLUSTER)]
        return code, message, None
    if key_type == KEY_TYPE_GROUP:
        topic_name, partition = OFFSETS_TOPIC, partition_for(key, context.groups.num_partitions)
    elif key_type == KEY_TYPE_TRANSACTION and context.transactions is not None:
        topic_name, partition = TRANSACTION_STATE_TOPIC, context.transactions.partition(key)
    elif key_type == KEY_TYPE_SHARE and context.share_coordinator is not None:
        if request.api_version < SHARE_KEY_VERSION:
            return (
                ErrorCode.INVALID_REQUEST,
                f"the share key type needs FindCoordinator v{SHARE_KEY_VERSION}",
                None,
            )
        try:
            share_key = parse_coordinator_key(key)
        except ValueError as exc:
            return ErrorCode.INVALID_REQUEST, str(exc), None
        topic_name, partition = (
            SHARE_GROUP_STATE_TOPIC,
            context.share_coordinator.partition(share_key),
        )
    else:
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}", None
    offsets = context.metadata.topic(topic_name)
    if offsets is None or partition >= len(offsets.partitions):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic_name} is not ready", None
    leader = offsets.partitions[partition].leader
    coordinator = context.metadata.broker(leader) if leader >= 0 else None
    if coordinator is None:
        return (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"{topic_name}-{partition} has no leader",
            None,
        )
    address = coordinator.address_for(request)
    if address is None:
        return (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"broker {coordinator.node_id} has no listener {request.session.listener}",
            None,
        )
    host, port = address
    return ErrorCode.NONE, None, replace(coordinator, host=host, port=port)
