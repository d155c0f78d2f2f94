"""FindCoordinator: on one node, this broker coordinates every group.

librdkafka also reads FindCoordinator v0 in ApiVersions as the sign of a broker
new enough for LZ4, so it is served even before the group APIs are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from herdless.broker.broker import Broker

FIND_COORDINATOR = 10
KEY_TYPE_GROUP = 0


async def handle_find_coordinator(broker: Broker, request: Request) -> Any:
    body = request.body
    Response = response_class(FIND_COORDINATOR)
    host, port = broker.config.advertised_address
    if body.key_type == KEY_TYPE_GROUP:
        error, message, node_id = ErrorCode.NONE, None, broker.node_id
    else:
        # Transactions are not served, so no broker coordinates a transactional id.
        error, message, node_id = (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "transactions are not supported",
            -1,
        )
    if request.api_version < 4:
        return Response(
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            node_id=node_id,
            host=host if node_id >= 0 else "",
            port=port if node_id >= 0 else -1,
        )
    return Response(
        throttle_time_ms=0,
        coordinators=[
            Response.Coordinator(
                key=key,
                node_id=node_id,
                host=host if node_id >= 0 else "",
                port=port if node_id >= 0 else -1,
                error_code=error,
                error_message=message,
            )
            for key in body.coordinator_keys
        ],
    )
