"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71) and PushTelemetry (72).

kafka-python 3 has no classes for them (it neither asks for subscriptions nor pushes),
so they are built here with its machinery from the schemas herdless ships
(protocol/schemas/), Kafka's own.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from herdless.protocol import schemas


class GetTelemetrySubscriptionsRequest(ApiMessage, load_json=schemas):
    pass


class GetTelemetrySubscriptionsResponse(ApiMessage, load_json=schemas):
    pass


class PushTelemetryRequest(ApiMessage, load_json=schemas):
    pass


class PushTelemetryResponse(ApiMessage, load_json=schemas):
    pass
