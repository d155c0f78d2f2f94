"""FindCoordinator: a group's coordinator leads its partition of `__consumer_offsets`.

librdkafka also reads FindCoordinator v0 in ApiVersions as the sign of a broker
new enough for LZ4, so it is served even before the group APIs are.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from herdless.broker.group_coordinator import INTERNAL_TOPICS, OFFSETS_TOPIC
from herdless.broker.metadata import BrokerEndpoint
from herdless.broker.topic_admin import TopicAdminError
from herdless.coordinator import partition_for
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from herdless.broker.context import BrokerContext

FIND_COORDINATOR = 10
KEY_TYPE_GROUP = 0


async def handle_find_coordinator(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(FIND_COORDINATOR)
    if body.key_type == KEY_TYPE_GROUP and any(
        context.metadata.topic(topic) is None for topic in INTERNAL_TOPICS
    ):
        try:
            await context.groups.create_topics(
                context.topics, context.config.offsets_topic_replication_factor
            )
        except TopicAdminError as exc:
            # As Kafka: no coordinator until the offsets topic can have its replicas.
            log.warning("cannot create the internal topics yet: %s", exc.message)
    if request.api_version < 4:
        error, message, coordinator = _find(context, request, body.key_type, body.key)
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
        error, message, coordinator = _find(context, request, body.key_type, key)
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


def _find(
    context: BrokerContext, request: Request, key_type: int, key: str
) -> tuple[ErrorCode, str | None, BrokerEndpoint | None]:
    """The coordinator of `key`, at its address on the listener the request came in on."""
    if key_type != KEY_TYPE_GROUP:
        # Transactions are not served, so no broker coordinates a transactional id.
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not supported", None
    offsets = context.metadata.topic(OFFSETS_TOPIC)
    partition = partition_for(key, context.groups.num_partitions)
    if offsets is None or partition >= len(offsets.partitions):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is not ready", None
    leader = offsets.partitions[partition].leader
    coordinator = context.metadata.broker(leader) if leader >= 0 else None
    if coordinator is None:
        return (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"{OFFSETS_TOPIC}-{partition} has no leader",
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
