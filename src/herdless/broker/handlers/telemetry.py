"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71) and PushTelemetry (72).

Any client may ask and push, as in Kafka (neither API is authorized); what it is asked
for comes from the client-metrics subscriptions (client_metrics_configs.py), and what it
pushes goes to /metrics (telemetry/exporter.py). The work is the manager's
(telemetry/manager.py); this module reads the connection and writes the answers.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from herdless.broker.clock import monotonic_ms, wall_ms
from herdless.broker.telemetry.manager import (
    ClientAttributes,
    ClientMetricsManager,
    TelemetryError,
)
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.session import UNKNOWN_SOFTWARE

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

_ZERO = uuid.UUID(int=0)


def _client(request: Request) -> ClientAttributes:
    session = request.session
    if session is None:
        return ClientAttributes(request.client_id or "", UNKNOWN_SOFTWARE, UNKNOWN_SOFTWARE, "", 0)
    return ClientAttributes(
        request.client_id or "",
        session.software.name,
        session.software.version,
        session.client_address,
        session.client_port,
    )


def _watch_connection(manager: ClientMetricsManager, request: Request, instance: uuid.UUID) -> None:
    """Forget the instance when this connection closes, as Kafka does on disconnect; once
    per connection and instance."""
    session = request.session
    if session is None:
        return
    if manager.watch_connection(id(session.on_close), instance):
        session.on_close.append(lambda: manager.connection_closed(id(session.on_close)))


async def handle_get_telemetry_subscriptions(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
    manager = context.client_metrics
    if manager is None:
        return Response(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION)
    asked = request.body.client_instance_id or _ZERO
    try:
        found = manager.get_subscriptions(asked, _client(request), monotonic_ms())
    except TelemetryError as exc:
        return Response(
            throttle_time_ms=0,
            error_code=exc.error_code,
            client_instance_id=_ZERO,
            subscription_id=0,
            accepted_compression_types=[],
            push_interval_ms=0,
            telemetry_max_bytes=0,
            delta_temporality=False,
            requested_metrics=[],
        )
    _watch_connection(manager, request, found.instance_id)
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        # Kafka's field: the id assigned when the client sent none, else zero.
        client_instance_id=found.instance_id if asked == _ZERO else _ZERO,
        subscription_id=found.subscription_id,
        accepted_compression_types=list(found.accepted_compression_types),
        push_interval_ms=found.push_interval_ms,
        telemetry_max_bytes=found.telemetry_max_bytes,
        delta_temporality=found.delta_temporality,
        requested_metrics=list(found.metrics),
    )


async def handle_push_telemetry(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.PUSH_TELEMETRY)
    manager = context.client_metrics
    if manager is None:
        return Response(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION)
    body = request.body
    instance = body.client_instance_id or _ZERO
    try:
        manager.push(
            instance,
            _client(request),
            body.subscription_id,
            body.terminating,
            body.compression_type,
            bytes(body.metrics or b""),
            monotonic_ms(),
            wall_ms(),
        )
    except TelemetryError as exc:
        return Response(throttle_time_ms=0, error_code=exc.error_code)
    _watch_connection(manager, request, instance)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE)
